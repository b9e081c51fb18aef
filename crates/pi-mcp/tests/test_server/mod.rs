//! An in-process MCP server (rmcp's server side) whose tool list the test changes at will.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pi_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, Tool,
};
use pi_mcp::rmcp::service::RequestContext;
use pi_mcp::rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use pi_mcp::{ByteStream, ServerConfig};
use serde_json::{json, Map, Value};
use tokio::sync::{watch, Notify};

/// The declarations the server can list (a subset at a time).
pub fn declaration(name: &str) -> Tool {
    let schema = |value: Value| match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    };
    match name {
        "echo" => Tool::new(
            "echo",
            "Echo the text",
            schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})),
        ),
        "add" => Tool::new(
            "add",
            "Add two numbers",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
        ),
        "slow" => Tool::new(
            "slow",
            "Report progress, then finish",
            schema(json!({"type": "object", "properties": {"steps": {"type": "integer"}}})),
        ),
        other => Tool::new(other.to_owned(), format!("The {other} tool"), schema(json!({"type": "object"}))),
    }
}

/// What the server saw and did, shared by all its connections.
#[derive(Clone, Default)]
pub struct TestServer {
    enabled: Arc<Mutex<Vec<String>>>,
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    /// `die` closes every connection at once (the server "crashes").
    kill: Arc<Notify>,
    /// Connections made so far.
    pub connects: Arc<AtomicUsize>,
    /// Requests the client cancelled (`notifications/cancelled` seen by the handler).
    pub cancelled: Arc<AtomicUsize>,
    /// While false, connecting waits (a server that is not ready yet).
    ready: Arc<Mutex<Option<watch::Sender<bool>>>>,
}

impl TestServer {
    pub fn new(tools: &[&str]) -> Self {
        let server = Self::default();
        *server.enabled.lock().unwrap() = tools.iter().map(|t| t.to_string()).collect();
        server
    }

    /// Connections wait until [`Self::open`].
    pub fn gated(self) -> Self {
        *self.ready.lock().unwrap() = Some(watch::Sender::new(false));
        self
    }

    pub fn open(&self) {
        if let Some(ready) = &*self.ready.lock().unwrap() {
            ready.send_replace(true);
        }
    }

    /// Change the listed tools and send `notifications/tools/list_changed` on every connection.
    pub async fn set_tools(&self, tools: &[&str]) {
        *self.enabled.lock().unwrap() = tools.iter().map(|t| t.to_string()).collect();
        let peers = self.peers.lock().unwrap().clone();
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// Close every open connection.
    pub fn crash(&self) {
        self.kill.notify_waiters();
    }

    /// A hub configuration that reaches this server over an in-process pipe.
    pub fn config(&self, name: &str) -> ServerConfig {
        let server = self.clone();
        ServerConfig::stream(name, move || {
            let server = server.clone();
            Box::pin(async move {
                let ready = server.ready.lock().unwrap().as_ref().map(|r| r.subscribe());
                if let Some(mut ready) = ready {
                    let _ = ready.wait_for(|open| *open).await;
                }
                server.connects.fetch_add(1, Ordering::SeqCst);
                let (client, server_end) = tokio::io::duplex(64 * 1024);
                tokio::spawn(async move {
                    let Ok(running) = server.clone().serve(server_end).await else { return };
                    server.peers.lock().unwrap().push(running.peer().clone());
                    let kill = Arc::clone(&server.kill);
                    tokio::select! {
                        _ = running.waiting() => {}
                        () = kill.notified() => {}
                    }
                });
                Ok(Box::new(client) as Box<dyn ByteStream>)
            })
        })
    }
}

fn text(text: impl Into<String>) -> ContentBlock {
    ContentBlock::text(text.into())
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let enabled = self.enabled.lock().unwrap().clone();
        Ok(ListToolsResult::with_all_items(enabled.iter().map(|name| declaration(name)).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        let number = |key: &str| args.get(key).and_then(Value::as_f64).unwrap_or(0.0);
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![text(format!(
                "echo: {}",
                args.get("text").and_then(Value::as_str).unwrap_or("")
            ))]),
            "add" => CallToolResult::success(vec![text(format!("{}", number("a") + number("b")))]),
            "fail" => CallToolResult::error(vec![text("it failed")]),
            "image" => {
                let mut result =
                    CallToolResult::success(vec![text("a pixel"), ContentBlock::image("iVBORw0KGgo=", "image/png")]);
                result.structured_content = Some(json!({"width": 1}));
                result
            }
            "slow" => {
                let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(3);
                let token = context
                    .meta
                    .get_progress_token()
                    .ok_or_else(|| ErrorData::invalid_params("no progress token", None))?;
                for step in 1..=steps {
                    let progress = ProgressNotificationParam::new(token.clone(), step as f64)
                        .with_total(steps as f64)
                        .with_message(format!("step {step}"));
                    let _ = context.peer.notify_progress(progress).await;
                }
                CallToolResult::success(vec![text("done")])
            }
            "hang" => {
                context.ct.cancelled().await;
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                CallToolResult::error(vec![text("cancelled")])
            }
            "die" => {
                self.crash();
                return std::future::pending().await;
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(result.into())
    }
}

/// Serve `server` over streamable HTTP on a loopback port; returns the endpoint URL.
pub async fn serve_http(server: TestServer) -> String {
    use pi_mcp::rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use pi_mcp::rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let address = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/mcp")
}
