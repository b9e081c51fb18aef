//! Tool calls through the hub against the in-process server: content, errors, progress,
//! cancellation, a server that dies, bounded waits, readiness and reconnection.
#![allow(clippy::unwrap_used)]

mod test_server;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_mcp::{Limits, McpError, McpHub, ServerStatus};
use pi_types::{AgentTool, AgentToolResult, CancellationToken, ImageContent, UserContent};
use serde_json::{json, Value};
use test_server::TestServer;

const WAIT: Duration = Duration::from_secs(10);

async fn hub_with(server: &TestServer, limits: Limits) -> McpHub {
    let hub = McpHub::new();
    hub.add_server(server.config("test").with_limits(limits));
    assert!(hub.wait_ready(WAIT).await, "the server did not settle");
    hub
}

fn tool(hub: &McpHub, name: &str) -> Arc<dyn AgentTool> {
    let tools = hub.tools();
    let found = tools.iter().find(|t| t.spec().name() == name);
    Arc::clone(found.unwrap_or_else(|| panic!("no tool {name}")))
}

type Updates = Arc<Mutex<Vec<AgentToolResult>>>;

async fn call(tool: &Arc<dyn AgentTool>, args: Value) -> (Result<AgentToolResult, String>, Updates) {
    call_with(tool, args, CancellationToken::new()).await
}

async fn call_with(
    tool: &Arc<dyn AgentTool>,
    args: Value,
    cancel: CancellationToken,
) -> (Result<AgentToolResult, String>, Updates) {
    let updates = Updates::default();
    let sink = Arc::clone(&updates);
    let on_update = Arc::new(move |update| sink.lock().unwrap().push(update));
    let call = tool.execute("c1".into(), args, cancel, on_update);
    let result = tokio::time::timeout(WAIT, call).await.expect("the call must not hang");
    (result.map_err(|e| e.to_string()), updates)
}

fn texts(result: &AgentToolResult) -> Vec<String> {
    let text = |c: &UserContent| match c {
        UserContent::Text(t) => t.text.clone(),
        UserContent::Image(i) => format!("<{}>", i.mime_type),
    };
    result.content.iter().map(text).collect()
}

#[tokio::test]
async fn lists_tools_as_declarations_with_the_prefix() {
    let server = TestServer::new(&["echo", "add"]);
    let hub = McpHub::new();
    hub.add_server(server.config("test").with_prefix("t_"));
    assert!(hub.wait_ready(WAIT).await);
    let tools = hub.tools();
    let declarations: Vec<Value> = tools.iter().map(|t| serde_json::to_value(&t.spec().declaration).unwrap()).collect();
    assert_eq!(
        declarations,
        [
            json!({"name": "t_echo", "description": "Echo the text",
                   "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}),
            json!({"name": "t_add", "description": "Add two numbers",
                   "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}),
        ]
    );
    let servers = hub.servers();
    assert_eq!(servers[0].status, ServerStatus::Ready { tools: 2 });
    assert_eq!(servers[0].tools, ["t_echo", "t_add"]);
    assert_eq!(hub.server_of("t_add").as_deref(), Some("test"));
    // The prefix is the model's name only: the server is called by its own.
    let (result, _) = call(&tool(&hub, "t_echo"), json!({"text": "hi"})).await;
    assert_eq!(texts(&result.unwrap()), ["echo: hi"]);
}

#[tokio::test]
async fn text_image_structured_content_and_is_error() {
    let server = TestServer::new(&["echo", "image", "fail"]);
    let hub = hub_with(&server, Limits::default()).await;

    let (result, updates) = call(&tool(&hub, "echo"), json!({"text": "hi"})).await;
    let result = result.unwrap();
    assert_eq!(texts(&result), ["echo: hi"]);
    assert_eq!(result.is_error, None);
    assert_eq!(result.details, Some(json!({"server": "test"})));
    assert!(updates.lock().unwrap().is_empty());

    let (result, _) = call(&tool(&hub, "image"), json!({})).await;
    let result = result.unwrap();
    assert_eq!(
        result.content[1],
        UserContent::Image(ImageContent { data: "iVBORw0KGgo=".into(), mime_type: "image/png".into() })
    );
    assert_eq!(texts(&result), ["a pixel", "<image/png>"]);
    assert_eq!(result.structured_content, Some(json!({"width": 1})));

    let (result, _) = call(&tool(&hub, "fail"), json!({})).await;
    let result = result.unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(texts(&result), ["it failed"]);
}

#[tokio::test]
async fn a_json_rpc_error_is_an_error_naming_the_server() {
    let server = TestServer::new(&["missing"]);
    let hub = hub_with(&server, Limits::default()).await;
    let (result, _) = call(&tool(&hub, "missing"), json!({})).await;
    assert_eq!(result.unwrap_err(), "MCP server 'test': tools/call 'missing' failed: no tool missing");
}

#[tokio::test]
async fn progress_notifications_are_tool_updates() {
    let server = TestServer::new(&["slow"]);
    let hub = hub_with(&server, Limits::default()).await;
    let (result, updates) = call(&tool(&hub, "slow"), json!({"steps": 3})).await;
    assert_eq!(texts(&result.unwrap()), ["done"]);
    let updates = updates.lock().unwrap();
    let seen: Vec<_> = updates.iter().map(|u| texts(u).join("")).collect();
    assert_eq!(seen, ["1/3 step 1", "2/3 step 2", "3/3 step 3"]);
    assert_eq!(updates[0].details, Some(json!({"progress": 1.0, "total": 3.0, "message": "step 1"})));
}

#[tokio::test]
async fn the_runs_cancellation_sends_notifications_cancelled() {
    let server = TestServer::new(&["hang"]);
    let hub = hub_with(&server, Limits::default()).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let (result, _) = call_with(&tool(&hub, "hang"), json!({}), cancel).await;
    assert_eq!(result.unwrap_err(), "MCP tool call 'hang' on server 'test' was cancelled");
    let deadline = tokio::time::Instant::now() + WAIT;
    while server.cancelled.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the server never saw notifications/cancelled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_server_that_dies_mid_call_gives_an_error_result_and_comes_back() {
    let server = TestServer::new(&["die", "echo"]);
    let limits = Limits { reconnect_delay: Duration::from_millis(20), ..Limits::default() };
    let hub = hub_with(&server, limits).await;
    let mut changes = hub.tools_changed();
    changes.borrow_and_update();
    let echo = tool(&hub, "echo");

    let (result, _) = call(&tool(&hub, "die"), json!({})).await;
    assert_eq!(result.unwrap_err(), "MCP server 'test' closed the connection during tools/call 'die'");

    // The tools leave the set while the server is down and come back with the reconnection.
    tokio::time::timeout(WAIT, async {
        while !matches!(hub.servers()[0].status, ServerStatus::Ready { .. })
            || server.connects.load(Ordering::SeqCst) < 2
        {
            changes.changed().await.unwrap();
        }
    })
    .await
    .expect("reconnected");
    assert_eq!(hub.servers()[0].tools, ["die", "echo"]);
    // A tool kept from before the crash calls through the new connection.
    let (result, _) = call(&echo, json!({"text": "again"})).await;
    assert_eq!(texts(&result.unwrap()), ["echo: again"]);
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let server = TestServer::new(&["hang"]);
    let limits = Limits { call_idle: Duration::from_millis(200), ..Limits::default() };
    let hub = hub_with(&server, limits).await;
    let (result, _) = call(&tool(&hub, "hang"), json!({})).await;
    assert_eq!(result.unwrap_err(), "MCP server 'test': tools/call 'hang' did not complete within 200ms");
}

#[tokio::test]
async fn a_server_that_becomes_ready_adds_its_tools() {
    let server = TestServer::new(&["echo"]).gated();
    let hub = McpHub::new();
    hub.add_server(server.config("late"));
    assert!(!hub.wait_ready(Duration::from_millis(100)).await);
    assert_eq!(hub.servers()[0].status, ServerStatus::Connecting);
    let mut seen = hub.tools_version();
    assert!(hub.tools_if_changed(&mut seen).is_none());
    server.open();
    assert!(hub.wait_ready(WAIT).await);
    let tools = hub.tools_if_changed(&mut seen).expect("the tools changed");
    assert_eq!(tools.iter().map(|t| t.spec().name()).collect::<Vec<_>>(), ["echo"]);
    assert!(hub.tools_if_changed(&mut seen).is_none());
}

#[tokio::test]
async fn list_changed_relists_the_tools() {
    let server = TestServer::new(&["echo"]);
    let hub = hub_with(&server, Limits::default()).await;
    let mut changes = hub.tools_changed();
    changes.borrow_and_update();
    server.set_tools(&["echo", "add"]).await;
    tokio::time::timeout(WAIT, changes.changed()).await.expect("changed").unwrap();
    assert_eq!(hub.servers()[0].tools, ["echo", "add"]);
}

#[tokio::test]
async fn a_server_that_cannot_start_fails_after_its_attempts() {
    let hub = McpHub::new();
    let mut config = pi_mcp::ServerConfig::stdio("nope", "/nonexistent/pi-mcp-test-server", ["--x"]);
    config.limits = Limits { reconnect_attempts: 1, reconnect_delay: Duration::from_millis(10), ..Limits::default() };
    hub.add_server(config);
    tokio::time::timeout(WAIT, async {
        while !matches!(hub.servers()[0].status, ServerStatus::Failed(_)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("given up");
    let ServerStatus::Failed(reason) = &hub.servers()[0].status else { unreachable!() };
    assert!(reason.starts_with("MCP server 'nope': could not connect:"), "{reason}");
    assert!(hub.tools().is_empty());
}

#[test]
fn errors_say_which_server() {
    let error = McpError::NotConnected { server: "fs".into() };
    assert_eq!(error.to_string(), "MCP server 'fs' is not connected");
}

#[tokio::test]
async fn streamable_http_lists_calls_and_reports_progress() {
    let server = TestServer::new(&["echo", "slow"]);
    let url = test_server::serve_http(server).await;
    let hub = McpHub::new();
    hub.add_server(pi_mcp::ServerConfig::parse(&format!("web={url}")).unwrap());
    assert!(hub.wait_ready(WAIT).await);
    assert_eq!(hub.servers()[0].status, ServerStatus::Ready { tools: 2 }, "{:?}", hub.servers());
    assert_eq!(hub.servers()[0].transport, format!("http: {url}"));
    let (result, _) = call(&tool(&hub, "echo"), json!({"text": "over http"})).await;
    assert_eq!(texts(&result.unwrap()), ["echo: over http"]);
    let (result, updates) = call(&tool(&hub, "slow"), json!({"steps": 2})).await;
    assert_eq!(texts(&result.unwrap()), ["done"]);
    assert_eq!(updates.lock().unwrap().len(), 2);
}
