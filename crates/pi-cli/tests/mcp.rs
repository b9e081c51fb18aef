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

#[test]
fn chat_tools_lists_mcp_tools_with_their_server() {
    if Command::new("python3").arg("--version").output().is_err() {
        let _ = writeln!(std::io::stderr(), "note: python3 not found; the stdio MCP server test is skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("pi-cli-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("shouter.py");
    std::fs::write(&script, SERVER).unwrap();
    let spec = format!("loud=python3 {}", script.display());
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
    if Command::new("python3").arg("--version").output().is_err() {
        let _ = writeln!(std::io::stderr(), "note: python3 not found; the stdio MCP server test is skipped");
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
    if Command::new("python3").arg("--version").output().is_err() {
        let _ = writeln!(std::io::stderr(), "note: python3 not found; the stdio MCP server test is skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("pi-cli-verbose-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("shouter.py");
    std::fs::write(&script, SERVER).unwrap();
    let spec = format!("loud=python3 {}", script.display());
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
