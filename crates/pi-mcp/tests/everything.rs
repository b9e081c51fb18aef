//! Against a server nobody here wrote: `@modelcontextprotocol/server-everything` (npm), over
//! stdio and over streamable HTTP. Skipped, with a note, where `node`/`npm` are missing or the
//! package cannot be installed (offline).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pi_mcp::{McpHub, ServerConfig, ServerStatus};
use pi_types::{AgentTool, AgentToolResult, CancellationToken, UserContent};
use serde_json::{json, Value};

/// Pinned: its tool names (`echo`, `get-sum`, `trigger-long-running-operation`) changed before.
const PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";
const WAIT: Duration = Duration::from_secs(60);

/// The server's entry point, installed once into `target/mcp-everything`.
fn entry_point() -> Option<PathBuf> {
    static ENTRY: OnceLock<Option<PathBuf>> = OnceLock::new();
    ENTRY.get_or_init(install).clone()
}

fn install() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let prefix = target.join("mcp-everything");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let works = |program: &str| {
        Command::new(program).arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success())
    };
    if !works("node") || !works("npm") {
        note("node/npm not found; the server-everything tests are skipped");
        return None;
    }
    let installed = prefix.join("node_modules/@modelcontextprotocol/server-everything/package.json");
    let pinned =
        std::fs::read_to_string(&installed).is_ok_and(|p| p.contains(&format!("\"version\": \"{}\"", version())));
    if !pinned {
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=30000", "--prefix"])
            .arg(&prefix)
            .arg(PACKAGE)
            .stdout(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            note(&format!("`npm install {PACKAGE}` failed (offline?); the server-everything tests are skipped"));
            return None;
        }
    }
    entry.exists().then_some(entry)
}

/// Straight to stderr: the test harness captures `println!` of passing tests.
fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "note: {text}");
}

fn version() -> &'static str {
    PACKAGE.rsplit('@').next().unwrap_or("")
}

fn tool(hub: &McpHub, name: &str) -> Arc<dyn AgentTool> {
    let tools = hub.tools();
    Arc::clone(tools.iter().find(|t| t.spec().name() == name).unwrap_or_else(|| panic!("no tool {name}")))
}

async fn call(tool: &Arc<dyn AgentTool>, args: Value) -> (AgentToolResult, Vec<String>) {
    let updates = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&updates);
    let on_update = Arc::new(move |update: AgentToolResult| {
        let text = update.content.iter().filter_map(|c| match c {
            UserContent::Text(t) => Some(t.text.clone()),
            UserContent::Image(_) => None,
        });
        sink.lock().unwrap().extend(text);
    });
    let call = tool.execute("c1".into(), args, CancellationToken::new(), on_update);
    let result = tokio::time::timeout(WAIT, call).await.expect("no hang").expect("the call succeeds");
    let updates = updates.lock().unwrap().clone();
    (result, updates)
}

fn text(result: &AgentToolResult) -> String {
    let texts = result.content.iter().filter_map(|c| match c {
        UserContent::Text(t) => Some(t.text.as_str()),
        UserContent::Image(_) => None,
    });
    texts.collect::<Vec<_>>().join("|")
}

async fn exercise(hub: &McpHub) {
    assert!(hub.wait_ready(WAIT).await, "server-everything did not start");
    assert!(matches!(hub.servers()[0].status, ServerStatus::Ready { .. }), "{:?}", hub.servers());

    let (result, _) = call(&tool(hub, "echo"), json!({"message": "hi"})).await;
    assert_eq!(text(&result), "Echo: hi");
    assert_eq!(result.is_error, None);

    let (result, _) = call(&tool(hub, "get-sum"), json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&result), "The sum of 2 and 3 is 5.");

    let long = tool(hub, "trigger-long-running-operation");
    let (result, updates) = call(&long, json!({"duration": 0.3, "steps": 3})).await;
    assert_eq!(text(&result), "Long running operation completed. Duration: 0.3 seconds, Steps: 3.");
    assert_eq!(updates, ["1/3", "2/3", "3/3"]);

    let (result, _) = call(&tool(hub, "get-tiny-image"), json!({})).await;
    assert!(result.content.iter().any(|c| matches!(c, UserContent::Image(i) if i.mime_type == "image/png")));
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let Some(entry) = entry_point() else { return };
    let hub = McpHub::new();
    hub.add_server(ServerConfig::stdio("everything", "node", [entry.to_string_lossy().into_owned(), "stdio".into()]));
    exercise(&hub).await;
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let Some(entry) = entry_point() else { return };
    // A free loopback port for the server (released just before it binds it).
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let mut child = tokio::process::Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let url = format!("http://127.0.0.1:{port}/mcp");
    // Wait for the listener (bounded), then connect.
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "server-everything did not listen on {url}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hub = McpHub::new();
    hub.add_server(ServerConfig::parse(&format!("everything={url}")).unwrap());
    exercise(&hub).await;
    drop(hub);
    let _ = child.kill().await;
}
