//! One server's connection: connect, list, follow `list_changed`, reconnect within limits.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceExt};

use crate::config::{ServerConfig, ServerTransport};
use crate::connection::{Connection, ServerShared, ServerStatus};
use crate::error::service_error;
use crate::error::McpError;
use crate::handler::Handler;
use crate::tool::McpTool;

/// Where a server's task reports its tools and status (the hub).
pub(crate) trait Publish: Send + Sync {
    /// Server `index` now has `tools` and is in `status`.
    fn publish(&self, index: usize, tools: Vec<Arc<McpTool>>, status: ServerStatus);
}

/// The longest wait between two reconnection attempts.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(30);

type Service = RunningService<RoleClient, Handler>;

/// Start the server (or reach it) and complete the `initialize` handshake, within `limits.connect`.
async fn connect(config: &ServerConfig) -> Result<Service, McpError> {
    let name = &config.name;
    let failed = |reason: String| McpError::Connect { server: name.clone(), reason };
    let handler = Handler::default();
    let handshake = async {
        match &config.transport {
            ServerTransport::Stdio { command, args, env } => {
                let mut command = tokio::process::Command::new(command);
                command.args(args).envs(env.iter().map(|(k, v)| (k, v))).kill_on_drop(true);
                let (child, _stderr) = TokioChildProcess::builder(command)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| failed(e.to_string()))?;
                handler.serve(child).await.map_err(|e| failed(e.to_string()))
            }
            ServerTransport::Http { url, bearer_token } => {
                let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(token) = bearer_token {
                    transport_config = transport_config.auth_header(token.clone());
                }
                let transport = StreamableHttpClientTransport::with_client(http_client()?, transport_config);
                handler.serve(transport).await.map_err(|e| failed(e.to_string()))
            }
            ServerTransport::Stream(connector) => {
                let stream = connector().await.map_err(|e| failed(e.to_string()))?;
                handler.serve(stream).await.map_err(|e| failed(e.to_string()))
            }
        }
    };
    let limit = config.limits.connect;
    tokio::time::timeout(limit, handshake).await.map_err(|_| McpError::Timeout {
        server: name.clone(),
        what: "initialize".into(),
        limit,
    })?
}

/// rustls with the `ring` provider (as pi-providers), no redirects, a bounded connect; no total
/// timeout, since a response may be a long SSE stream (the call limits bound it instead).
fn http_client() -> Result<reqwest::Client, McpError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tls_backend_rustls()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| McpError::Connect { server: "http".into(), reason: e.to_string() })
}

/// `tools/list` (every page) within `limits.list`, as pi tools.
async fn list_tools(shared: &Arc<ServerShared>, peer: &Peer<RoleClient>) -> Result<Vec<Arc<McpTool>>, McpError> {
    let name = &shared.config.name;
    let limit = shared.config.limits.list;
    let listed = tokio::time::timeout(limit, peer.list_all_tools())
        .await
        .map_err(|_| McpError::Timeout { server: name.clone(), what: "tools/list".into(), limit })?
        .map_err(|e| service_error(name, "tools/list", e))?;
    let mut tools = Vec::with_capacity(listed.len());
    for tool in &listed {
        match McpTool::new(Arc::clone(shared), tool) {
            Ok(tool) => tools.push(Arc::new(tool)),
            // One bad schema must not hide the server's other tools.
            Err(error) => tracing::warn!(server = %name, tool = %tool.name, %error, "MCP tool skipped"),
        }
    }
    Ok(tools)
}

/// The server's task: connect, publish its tools, re-list on `list_changed`, and reconnect when
/// the connection ends, until `limits.reconnect_attempts` consecutive attempts failed.
pub(crate) async fn supervise(hub: Weak<dyn Publish>, index: usize, shared: Arc<ServerShared>) {
    let limits = shared.config.limits;
    let mut failures = 0u32;
    let mut delay = limits.reconnect_delay;
    loop {
        let error = match connect(&shared.config).await {
            Ok(service) => {
                let (listed, error) = serve(&hub, index, &shared, service).await;
                shared.set_connection(None);
                if listed {
                    failures = 0;
                    delay = limits.reconnect_delay;
                }
                error
            }
            Err(error) => error,
        };
        failures = failures.saturating_add(1);
        let Some(hub) = hub.upgrade() else { return };
        if failures > limits.reconnect_attempts {
            hub.publish(index, Vec::new(), ServerStatus::Failed(error.to_string()));
            return;
        }
        hub.publish(index, Vec::new(), ServerStatus::Reconnecting { attempt: failures, last_error: error.to_string() });
        drop(hub);
        tokio::time::sleep(delay).await;
        delay = delay.saturating_mul(2).min(MAX_RECONNECT_DELAY);
    }
}

/// Publish the server's tools and follow `list_changed` until the connection ends; returns
/// whether the tools were listed at least once, and why it ended.
async fn serve(
    hub: &Weak<dyn Publish>,
    index: usize,
    shared: &Arc<ServerShared>,
    service: Service,
) -> (bool, McpError) {
    let name = &shared.config.name;
    let handler = service.service().clone();
    let peer = service.peer().clone();
    shared.set_connection(Some(Connection { peer: peer.clone(), handler: handler.clone() }));
    let closed = service.waiting();
    tokio::pin!(closed);
    let mut listed = false;
    loop {
        match list_tools(shared, &peer).await {
            Ok(tools) => {
                listed = true;
                let Some(hub) = hub.upgrade() else { return (true, McpError::NotConnected { server: name.clone() }) };
                let count = tools.len();
                hub.publish(index, tools, ServerStatus::Ready { tools: count });
            }
            Err(error @ McpError::Closed { .. }) => return (listed, error),
            Err(error) if !listed => return (false, error),
            // Keep the tools listed before; the next `list_changed` tries again.
            Err(error) => tracing::warn!(server = %name, %error, "MCP tools/list failed"),
        }
        tokio::select! {
            _ = &mut closed => return (listed, McpError::Closed { server: name.clone(), what: "the session".into() }),
            () = handler.tools_changed.notified() => {}
        }
    }
}
