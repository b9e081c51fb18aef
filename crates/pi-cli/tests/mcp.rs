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
    assert!(stdout.contains("mcp server gone: reconnecting (attempt "), "{stdout}");
    assert!(stdout.contains("): MCP server 'gone': could not connect: No such file"), "{stdout}");
}

#[test]
fn a_bad_mcp_spec_is_a_usage_error() {
    let output = pi().args(["--mcp", "x=", "hi"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(text(&output.stderr), "pi: invalid MCP server specification \"x=\": no command\n");
}
