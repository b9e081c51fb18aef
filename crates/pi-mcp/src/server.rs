//! One server's connection: connect, list, follow `list_changed`, reconnect within limits.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;

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
                let (child, stderr) = TokioChildProcess::builder(command)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| failed(e.to_string()))?;
                let tail = Arc::new(Mutex::new(VecDeque::new()));
                let reader = stderr.map(|stderr| tokio::spawn(follow_stderr(name.clone(), stderr, Arc::clone(&tail))));
                match handler.serve(child).await {
                    Ok(service) => Ok(service),
                    Err(error) => {
                        // The child has exited or closed its stdout: let the reader reach the
                        // end of what it wrote, briefly.
                        if let Some(reader) = reader {
                            let _ = tokio::time::timeout(STDERR_SETTLE, reader).await;
                        }
                        let lines: Vec<String> =
                            tail.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect();
                        match lines.is_empty() {
                            true => Err(failed(readable(&error.to_string()))),
                            false => Err(McpError::Start { server: name.clone(), reason: lines.join(" | ") }),
                        }
                    }
                }
            }
            ServerTransport::Http { url, bearer_token } => {
                let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(token) = bearer_token {
                    transport_config = transport_config.auth_header(token.clone());
                }
                let transport = StreamableHttpClientTransport::with_client(http_client()?, transport_config);
                handler.serve(transport).await.map_err(|e| failed(readable(&e.to_string())))
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

/// How many of a child's last stderr lines a start-up failure quotes, and how long of each.
const STDERR_LINES: usize = 3;
const STDERR_LINE_CHARS: usize = 200;

/// How long a failed start-up waits for the child's stderr to reach its end.
const STDERR_SETTLE: Duration = Duration::from_millis(500);

/// Read a child's stderr to its end: each line goes to the log (debug, `pi_mcp`), the last
/// [`STDERR_LINES`] (cut to [`STDERR_LINE_CHARS`]) into `tail` for a start-up failure to quote.
async fn follow_stderr(server: String, stderr: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        tracing::debug!(server = %server, line, "MCP server stderr");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(line.chars().take(STDERR_LINE_CHARS).collect());
    }
}

/// A transport's error text for people: one line, without rmcp's type names, an HTML page (a web server's error page
/// where an MCP endpoint was expected) named rather than quoted, at most 300 characters.
pub(crate) fn readable(text: &str) -> String {
    // rmcp wraps transport failures as "Send message error Transport [rmcp::...<...>] error:
    // CAUSE": the cause is what a person needs.
    let text = match text.rfind("] error: ") {
        Some(at) if text[..at].contains("::") => &text[at + "] error: ".len()..],
        _ => text,
    };
    let lower = text.to_ascii_lowercase();
    let (text, page) = match ["<!doctype", "<html"].iter().filter_map(|tag| lower.find(tag)).min() {
        Some(start) => (text.get(..start).unwrap_or(text), true),
        None => (text, false),
    };
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if page {
        line = format!("{} (an HTML page, not MCP)", line.trim_end_matches([':', ' ']));
    }
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
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
            tracing::warn!(server = %shared.config.name, %error, "MCP server given up");
            hub.publish(index, Vec::new(), ServerStatus::Failed(error.to_string()));
            return;
        }
        tracing::info!(server = %shared.config.name, attempt = failures, %error, "MCP server not connected; retrying");
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
                tracing::info!(server = %name, tools = count, "MCP server ready");
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

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn transport_errors_lose_type_names_and_html_pages() {
        let text = "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::X<reqwest::Client>>] \
                    error: unexpected server response: HTTP 404 Not Found <!DOCTYPE html>\n<html><body>big</body></html>";
        assert_eq!(readable(text), "unexpected server response: HTTP 404 Not Found (an HTML page, not MCP)");
        assert_eq!(readable("No such file or directory (os error 2)"), "No such file or directory (os error 2)");
        assert_eq!(readable(&"x".repeat(400)).chars().count(), 301);
    }
}
