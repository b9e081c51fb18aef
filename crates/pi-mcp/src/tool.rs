//! One server tool as a pi [`AgentTool`]: `tools/call` with progress, cancellation and bounds.

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::{
    AgentTool, AgentToolResult, BoxError, CancellationToken, ImageContent, Tool, ToolSpec, ToolUpdateFn, UserContent,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientNotification, ClientRequest, ContentBlock,
    Notification, ProgressNotificationParam, Request, RequestId, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient};
use serde_json::{json, Value};

use crate::connection::ServerShared;
use crate::error::{service_error, McpError};

/// A tool of an MCP server, callable by the agent loop.
///
/// Calls go through the server's current connection, so a tool kept across a reconnection
/// still works; while the server is down a call fails at once with [`McpError::NotConnected`].
pub struct McpTool {
    spec: ToolSpec,
    remote_name: String,
    server: Arc<ServerShared>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name())
            .field("server", &self.server.config.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The pi tool for a server's tool declaration (the prefix applied, the schema compiled).
    pub(crate) fn new(server: Arc<ServerShared>, tool: &rmcp::model::Tool) -> Result<Self, pi_types::TypesError> {
        let prefix = server.config.prefix.as_deref().unwrap_or("");
        let declaration = Tool {
            name: format!("{prefix}{}", tool.name),
            description: tool.description.as_deref().unwrap_or("").to_owned(),
            parameters: Arc::new(Value::Object((*tool.input_schema).clone())),
            constrained_sampling: None,
        };
        let label = tool.title.clone().unwrap_or_else(|| declaration.name.clone());
        let spec = ToolSpec::new(declaration)?.with_label(label);
        Ok(Self { spec, remote_name: tool.name.to_string(), server })
    }

    /// The name of the server the tool comes from.
    pub fn server_name(&self) -> &str {
        &self.server.config.name
    }

    /// The tool's name on its server (without the prefix).
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }
}

impl AgentTool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn execute(
        &self,
        _call_id: String,
        args: Value,
        cancel: CancellationToken,
        on_update: ToolUpdateFn,
    ) -> BoxFuture<'static, Result<AgentToolResult, BoxError>> {
        let server = Arc::clone(&self.server);
        let tool = self.remote_name.clone();
        Box::pin(async move { call(&server, tool, args, cancel, on_update).await.map_err(BoxError::from) })
    }
}

async fn call(
    server: &ServerShared,
    tool: String,
    args: Value,
    cancel: CancellationToken,
    on_update: ToolUpdateFn,
) -> Result<AgentToolResult, McpError> {
    let name = &server.config.name;
    let limits = server.config.limits;
    let connection = server.connection().ok_or_else(|| McpError::NotConnected { server: name.clone() })?;
    let mut params = CallToolRequestParams::new(tool.clone());
    match args {
        Value::Object(arguments) => params = params.with_arguments(arguments),
        Value::Null => {}
        _ => return Err(McpError::Arguments { tool }),
    }
    let what = format!("tools/call '{tool}'");
    let options = PeerRequestOptions::with_timeout(limits.call_idle)
        .reset_timeout_on_progress()
        .with_max_total_timeout(limits.call_total);
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let handle =
        connection.peer.send_request_with_option(request, options).await.map_err(|e| service_error(name, &what, e))?;
    let _route = connection.handler.register(handle.progress_token.clone(), progress_to_update(on_update));
    let mut guard = CancelOnDrop { peer: Some(handle.peer.clone()), id: handle.id.clone() };
    let response = tokio::select! {
        response = handle.await_response() => response,
        () = cancel.cancelled() => return Err(McpError::Cancelled { server: name.clone(), tool }),
    };
    // Answered (or timed out, which rmcp reports to the server itself): nothing to cancel.
    guard.peer = None;
    match response.map_err(|e| service_error(name, &what, e))? {
        ServerResult::CallToolResult(result) => Ok(tool_result(name, result)),
        other => Err(McpError::Request {
            server: name.clone(),
            what,
            reason: format!("unexpected response {}", serde_json::to_string(&other).unwrap_or_default()),
        }),
    }
}

/// Sends `notifications/cancelled` for a call that was given up (the run aborted, or the call's
/// future dropped) before its response arrived.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let (Some(peer), Ok(runtime)) = (self.peer.take(), tokio::runtime::Handle::try_current()) else { return };
        let params = CancelledNotificationParam::new(Some(self.id.clone()), Some("aborted by the agent".to_owned()));
        let notification = ClientNotification::CancelledNotification(Notification::new(params));
        runtime.spawn(async move {
            // Bounded: a stuck transport must not keep this task alive.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), peer.send_notification(notification)).await;
        });
    }
}

/// A progress notification as a tool update: the text the reference's UIs show, the numbers in
/// the details.
fn progress_to_update(on_update: ToolUpdateFn) -> crate::handler::ProgressFn {
    Arc::new(move |progress: ProgressNotificationParam| {
        let fraction = match progress.total {
            Some(total) => format!("{}/{}", progress.progress, total),
            None => progress.progress.to_string(),
        };
        let text = match &progress.message {
            Some(message) => format!("{fraction} {message}"),
            None => fraction,
        };
        let details = json!({"progress": progress.progress, "total": progress.total, "message": progress.message});
        on_update(AgentToolResult::text(text).with_details(details));
    })
}

/// `CallToolResult` -> tool result: text and images as they are, other blocks as text;
/// `isError` kept as the result's error flag, `structuredContent` as its structured content.
pub(crate) fn tool_result(server: &str, result: CallToolResult) -> AgentToolResult {
    let content = result.content.into_iter().map(content_block).collect();
    AgentToolResult {
        content,
        details: Some(json!({ "server": server })),
        structured_content: result.structured_content,
        is_error: result.is_error.filter(|&e| e),
        ..Default::default()
    }
}

fn content_block(block: ContentBlock) -> UserContent {
    match block {
        ContentBlock::Text(text) => UserContent::text(text.text),
        ContentBlock::Image(image) => UserContent::Image(ImageContent { data: image.data, mime_type: image.mime_type }),
        ContentBlock::Audio(audio) => {
            UserContent::text(format!("[audio {} ({} bytes base64) not shown]", audio.mime_type, audio.data.len()))
        }
        ContentBlock::Resource(resource) => match resource.resource {
            ResourceContents::TextResourceContents { text, .. } => UserContent::text(text),
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => {
                UserContent::text(format!("[resource {uri} ({}) not shown]", mime_type.as_deref().unwrap_or("binary")))
            }
            other => UserContent::text(format!("[resource {}]", serde_json::to_string(&other).unwrap_or_default())),
        },
        ContentBlock::ResourceLink(link) => UserContent::text(format!("[resource link {} ({})]", link.uri, link.name)),
        // `ContentBlock` is non-exhaustive: a future kind is named, not dropped silently.
        other => UserContent::text(format!(
            "[unsupported MCP content: {}]",
            serde_json::to_string(&other).unwrap_or_default()
        )),
    }
}
