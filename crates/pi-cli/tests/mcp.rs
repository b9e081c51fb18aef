//! `--mcp`: a stdio MCP server's tools in `pi chat` (`/tools` names their source), a server
//! that cannot start, and a bad specification.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// A minimal MCP server on stdio (Python, standard library only): one tool, `shout`.
const SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "shouter", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "shout", "description": "Upper-case the text",
                             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

fn pi() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pi"));
    command.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command
}

fn chat(args: &[&str], input: &str) -> Output {
    let mut child = pi()
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Whether python3 runs the test servers (a note on stderr when it does not).
fn has_python() -> bool {
    let found = Command::new("python3").arg("--version").output().is_ok();
    if !found {
        let _ = writeln!(std::io::stderr(), "note: python3 not found; the stdio MCP server test is skipped");
    }
    found
}

/// The shouter server written to a fresh folder named after `name`: the folder, the script,
/// and its `--mcp` specification (named `loud`).
fn shouter(name: &str) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("pi-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("shouter.py");
    std::fs::write(&script, SERVER).unwrap();
    let spec = format!("loud=python3 {}", script.display());
    (dir, script, spec)
}

#[test]
fn chat_tools_lists_mcp_tools_with_their_server() {
    if !has_python() {
        return;
    }
    let (dir, script, spec) = shouter("mcp");
    let output = chat(&["--mcp", &spec, "--mcp", "gone=/nonexistent/pi-mcp-server"], "/tools\n");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("(mcp tools: +shout)\n"), "{stdout}");
    assert!(stdout.contains("\n  calculate (built-in): "), "{stdout}");
    assert!(stdout.contains("\n  shout (mcp: loud): Upper-case the text\n"), "{stdout}");
    assert!(stdout.contains(&format!("\n  loud (stdio: python3 {}): ready, 1 tool\n", script.display())), "{stdout}");
    assert!(stdout.contains("\n  gone (stdio: /nonexistent/pi-mcp-server): reconnecting (attempt "), "{stdout}");
    assert!(stdout.contains("(starting mcp servers loud, gone…)\n"), "{stdout}");
    assert!(
        stdout.contains("MCP server 'gone': could not connect: No such file or directory (os error 2) (retrying in the background)\n"),
        "{stdout}"
    );
}

/// A stdio server that writes why it cannot start to stderr and exits.
const BROKEN: &str = "broken=python3 -c \"import sys; print('loading config', file=sys.stderr); print('fatal: no API token in TOKEN', file=sys.stderr); sys.exit(3)\"";

#[test]
fn a_server_that_fails_to_start_is_named_with_its_last_stderr_lines() {
    if !has_python() {
        return;
    }
    let reason = "MCP server 'broken' failed to start: loading config | fatal: no API token in TOKEN";
    // Without --mcp-required the run goes on without the server's tools.
    let output = pi().args(["--mcp", BROKEN, "What is 2 + 3?"]).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stderr), format!("pi: {reason} (retrying in the background)\n"));
    assert!(text(&output.stdout).contains("← calculate: 2 + 3 = 5"), "{output:?}");
    // With it, nothing runs: exit 1 and the one line.
    let output = pi().args(["--mcp", BROKEN, "--mcp-required", "What is 2 + 3?"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(text(&output.stdout), "");
    assert_eq!(text(&output.stderr), format!("pi: {reason}\n"));
    let output = chat(&["--mcp", BROKEN, "--mcp-required"], "hello\n");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(text(&output.stderr), format!("pi: {reason}\n"));
}

#[test]
fn a_bad_mcp_spec_is_a_usage_error() {
    let output = pi().args(["--mcp", "x=", "hi"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(text(&output.stderr), "pi: invalid MCP server specification \"x=\": no command\n");
}

#[test]
fn an_html_page_where_an_mcp_endpoint_was_expected_is_named_not_quoted() {
    // A web server answering every request with an HTML error page.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 8192];
            let _ = std::io::Read::read(&mut stream, &mut buffer);
            let page = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1></body></html>\n";
            let response = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    let output = pi().args(["--mcp", &format!("site={url}"), "--mcp-required", "hi"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("pi: MCP server 'site': could not connect: unexpected server response: HTTP 404"),
        "{stderr}"
    );
    assert!(stderr.ends_with(" (an HTML page, not MCP)\n") && !stderr.contains('<'), "{stderr}");
    assert!(!stderr.contains("rmcp::"), "{stderr}");
}

#[test]
fn each_verbosity_level_adds_something() {
    if !has_python() {
        return;
    }
    let (dir, _, spec) = shouter("verbose");
    let demo = |level: &str| {
        let output = pi().args([level, "--mcp", &spec, "What is 2 + 3?"]).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        text(&output.stderr)
    };
    // Nothing listens here: one HTTP attempt, refused, and a decision not to retry it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let refused = |level: &str| {
        let output =
            pi().args([level, "--base-url", &url, "--model", "m", "hi"]).env("PI_API_KEY", "none").output().unwrap();
        text(&output.stderr)
    };
    let v = demo("-v");
    assert!(v.contains("MCP server ready") && v.contains("server=loud") && v.contains("invoke_agent"), "{v}");
    assert!(!v.contains("delta"), "{v}");
    let v = refused("-v");
    assert!(!v.contains("retry decision") && !v.contains("POST"), "{v}");
    let vv = refused("-vv");
    assert!(vv.contains("retry decision") && vv.contains("retryable=false"), "{vv}");
    assert!(vv.contains("POST") && vv.contains("server.port"), "{vv}");
    let vvv = demo("-vvv");
    assert!(vvv.contains("pi_cli::delta") && vvv.contains("kind=\"text\"") || vvv.contains("kind=text"), "{vvv}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stdio MCP server whose one tool, `open_gate`, creates the file `argv[1]` and returns once
/// the file `argv[2]` exists (the other server has listed its new tool).
const GATE: &str = r#"
import json, os, sys, time
marker, listed = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "gate", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "open_gate", "description": "Open the gate",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        open(marker, "w").close()
        for _ in range(200):
            if os.path.exists(listed):
                break
            time.sleep(0.05)
        time.sleep(0.3)
        result = {"content": [{"type": "text", "text": "the gate is open"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// A stdio MCP server with no tools until the file `argv[1]` appears: then it announces
/// `list_changed`, lists `shout`, and creates the file `argv[2]` once it has listed it.
const LATE: &str = r#"
import json, os, sys, threading, time
marker, listed = sys.argv[1], sys.argv[2]
lock, ready = threading.Lock(), threading.Event()
def send(obj):
    with lock:
        print(json.dumps(obj), flush=True)
def watch():
    while not os.path.exists(marker):
        time.sleep(0.05)
    ready.set()
    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
threading.Thread(target=watch, daemon=True).start()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {"listChanged": True}},
                  "serverInfo": {"name": "late", "version": "1"}}
    elif method == "tools/list":
        tools = []
        if ready.is_set():
            tools = [{"name": "shout", "description": "Upper-case the text",
                      "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]
        result = {"tools": tools}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": msg["params"]["arguments"]["text"].upper()}]}
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
    if method == "tools/list" and ready.is_set():
        open(listed, "w").close()
"#;

fn sse_chunk(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn tool_call_chunks(id: &str, name: &str, arguments: &str) -> String {
    let call = serde_json::json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
        "function": {"name": name, "arguments": arguments}}]});
    [
        sse_chunk(r#"{"role":"assistant","content":""}"#, "null"),
        sse_chunk(&call.to_string(), "null"),
        sse_chunk("{}", r#""tool_calls""#),
    ]
    .concat()
}

/// A chat-completions server playing a model: it calls `open_gate`, then `shout`, then
/// answers; each request body goes to the channel.
fn scripted_model() -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let replies = [
            tool_call_chunks("call_1", "open_gate", "{}"),
            tool_call_chunks("call_2", "shout", r#"{"text":"hello"}"#),
            [sse_chunk(r#"{"role":"assistant","content":"Done."}"#, "null"), sse_chunk("{}", r#""stop""#)].concat(),
        ];
        for (stream, reply) in listener.incoming().zip(replies) {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{reply}data: [DONE]\n\n"
            );
            let _ = stream.write_all(response.as_bytes());
            let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
        }
    });
    (url, rx)
}

#[test]
fn a_server_that_becomes_ready_mid_run_reaches_the_next_turn() {
    if !has_python() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("pi-cli-midrun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (gate, late) = (dir.join("gate.py"), dir.join("late.py"));
    std::fs::write(&gate, GATE).unwrap();
    std::fs::write(&late, LATE).unwrap();
    let (marker, listed, session) = (dir.join("marker"), dir.join("listed"), dir.join("session.jsonl"));
    let args = format!("{} {}", marker.display(), listed.display());
    let (url, requests) = scripted_model();
    let output = pi()
        .args(["--base-url", &url, "--model", "m", "--session", session.to_str().unwrap()])
        .args(["--mcp", &format!("gate=python3 {} {args}", gate.display())])
        .args(["--mcp", &format!("late=python3 {} {args}", late.display())])
        .arg("Open the gate, then shout hello")
        .env("PI_API_KEY", "none")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("← open_gate: the gate is open\n") && stdout.contains("← shout: HELLO\n"), "{stdout}");
    // The first request has the gate only; the second, at the next turn of the same run, shout too.
    let first = requests.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
    assert!(first.contains(r#""name":"open_gate""#) && !first.contains(r#""name":"shout""#), "{first}");
    let second = requests.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
    assert!(second.contains(r#""name":"shout""#), "{second}");
    // The transcript records the change at that turn boundary.
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&session).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let roles: Vec<&str> = lines.iter().map(|m| m["role"].as_str().unwrap()).collect();
    // The system prompt, the run's first tool set (the gate), then shout added mid-run.
    assert_eq!(
        roles,
        ["system", "system", "user", "assistant", "toolResult", "system", "assistant", "toolResult", "assistant"]
    );
    assert_eq!(lines[1]["toolsAdded"][0]["name"], "open_gate", "{}", lines[1]);
    assert_eq!(lines[5]["toolsAdded"][0]["name"], "shout", "{}", lines[5]);
    assert!(lines[5].get("toolsRemoved").is_none(), "{}", lines[5]);
    let _ = std::fs::remove_dir_all(&dir);
}
