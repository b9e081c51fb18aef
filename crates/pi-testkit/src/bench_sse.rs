//! The HTTP workloads (`sse-*`) of `shared/bench/WORKLOADS.md`: each API's real wire format,
//! served over loopback by `sse-server.mjs` (a separate Node process, vendored here as
//! [`SERVER_SCRIPT`]), streamed by the production HTTP client of `pi-providers` into the
//! adapter of the model's API, through a `Models` registry whose one provider resolves its key
//! per request, into `pi_agent::Agent`s.
//!
//! Setup (not timed): the body is built on the server (`GET /prepare`) and its request count
//! read (`GET /stats`), each over a connection of its own that is closed after, so the timed run
//! opens its connections itself; the process-wide HTTP client is created (no connection).
//! After the run, `/stats` again: exactly one request per model call, and the connections that
//! carried them are reported in the output line.

use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_providers::{Auth, Models, Provider};
use pi_types::{AgentMessage, AssistantContent, Model, StopReason, StreamFn};
use serde_json::json;

use crate::bench_support::{
    check_last, ok_tool, run_agents, text, BenchLine, BenchOptions, Counters, Fleet, FINAL_TEXT,
};

/// The loopback server of the HTTP workloads, a byte-identical copy of the reference's
/// `shared/bench/reference/sse-server.mjs` (the source of truth for the bodies).
pub const SERVER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/sse-server.mjs");

/// The HTTP workloads at their default sizes that the reference's baseline runs.
pub const BASELINE: [&str; 5] = ["sse-anthropic", "sse-completions", "sse-responses", "sse-google", "sse-agents"];

/// The `API` part of the workload names.
pub const APIS: [&str; 4] = ["anthropic", "completions", "responses", "google"];

const API_KEY: &str = "bench-dummy-key";
const PREAMBLE_CHARS: usize = 16;
const AGENT_CHARS: usize = 2_000;

/// Default size of an HTTP workload.
pub fn default_size(workload: &str) -> Option<usize> {
    if workload == "sse-agents" {
        return Some(1_000);
    }
    let (family, _) = parse(workload)?;
    Some(if family == Family::Args { 400_000 } else { 1_000_000 })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Text,
    Args,
    Thinking,
    Agents,
}

/// One API's model, as in `shared/providers/cases/<api>/text_basic.json`.
struct ApiModel {
    api: &'static str,
    id: &'static str,
    name: &'static str,
    provider: &'static str,
    /// What the base URL adds after `/<api>`.
    path: &'static str,
    reasoning: bool,
    cost: [f64; 4],
    context_window: u64,
    max_tokens: u64,
}

fn api_model(short: &str) -> Option<ApiModel> {
    Some(match short {
        "anthropic" => ApiModel {
            api: pi_providers::api::anthropic::API,
            id: "claude-sonnet-4-5",
            name: "Claude Sonnet 4.5",
            provider: "anthropic",
            path: "",
            reasoning: true,
            cost: [3.0, 15.0, 0.3, 3.75],
            context_window: 200_000,
            max_tokens: 64_000,
        },
        "completions" => ApiModel {
            api: pi_providers::api::openai::completions::API,
            id: "gpt-4o-mini",
            name: "GPT-4o mini",
            provider: "openai",
            path: "/v1",
            reasoning: false,
            cost: [0.15, 0.6, 0.075, 0.0],
            context_window: 128_000,
            max_tokens: 16_384,
        },
        "responses" => ApiModel {
            api: pi_providers::api::openai::responses::API,
            id: "gpt-4.1",
            name: "GPT-4.1",
            provider: "openai",
            path: "/v1",
            reasoning: false,
            cost: [2.0, 8.0, 0.5, 0.0],
            context_window: 1_047_576,
            max_tokens: 32_768,
        },
        "google" => ApiModel {
            api: pi_providers::api::google::gemini::API,
            id: "gemini-2.5-flash",
            name: "Gemini 2.5 Flash",
            provider: "google",
            path: "/v1beta",
            reasoning: true,
            cost: [0.3, 2.5, 0.03, 0.0],
            context_window: 1_048_576,
            max_tokens: 65_536,
        },
        _ => return None,
    })
}

/// The adapter pi-providers registers for an API id.
fn adapter(api: &str) -> Option<Arc<dyn StreamFn>> {
    Some(match api {
        pi_providers::api::anthropic::API => Arc::new(pi_providers::api::anthropic::AnthropicMessages),
        pi_providers::api::openai::completions::API => {
            Arc::new(pi_providers::api::openai::completions::OpenAICompletions)
        }
        pi_providers::api::openai::responses::API => Arc::new(pi_providers::api::openai::responses::OpenAIResponses),
        pi_providers::api::google::gemini::API => {
            Arc::new(pi_providers::api::google::gemini::GoogleGenerativeAi::default())
        }
        _ => return None,
    })
}

/// The family and the API's short name of a workload name.
fn parse(workload: &str) -> Option<(Family, &str)> {
    if workload == "sse-agents" {
        return Some((Family::Agents, "completions"));
    }
    let rest = workload.strip_prefix("sse-")?;
    let (family, short) = if let Some(short) = rest.strip_prefix("args-") {
        (Family::Args, short)
    } else if let Some(short) = rest.strip_prefix("thinking-") {
        (Family::Thinking, short)
    } else {
        (Family::Text, rest)
    };
    APIS.contains(&short).then_some((family, short))
}

/// Assistant-message events of a response with blocks of these streamed lengths.
fn assistant_events(blocks: &[usize]) -> usize {
    2 + blocks.iter().map(|chars| 2 + chars.div_ceil(4).max(1)).sum::<usize>()
}

/// Events of one run, as WORKLOADS.md counts them.
fn expected_events(family: Family, short: &str, size: usize) -> usize {
    let half = size / 2;
    match family {
        Family::Text => 4 + assistant_events(&[size]) + 2,
        Family::Agents => size * (4 + assistant_events(&[AGENT_CHARS]) + 2),
        // Gemini sends the call whole: toolcall_start, one toolcall_delta, toolcall_end.
        Family::Args if short == "google" => 4 + assistant_events(&[PREAMBLE_CHARS]) + 3 + 4 + 2 + 5 + 2,
        Family::Args => 4 + assistant_events(&[PREAMBLE_CHARS, size + 14]) + 4 + 2 + assistant_events(&[4]) + 2,
        // Responses adds "\n\n" as one more thinking_delta at `reasoning_summary_part.done`.
        Family::Thinking => 4 + assistant_events(&[half, size - half]) + usize::from(short == "responses") + 2,
    }
}

/// A GET over a connection of its own, closed after (HTTP/1.0: no keep-alive, no chunking).
fn server_get(url: &str, path: &str) -> Result<serde_json::Value, String> {
    let authority = url.strip_prefix("http://").ok_or_else(|| format!("BENCH_SSE_URL must be http://...: {url}"))?;
    let target = format!("{url}{path}");
    let fail = |e: std::io::Error| format!("{target}: {e} (is sse-server.mjs running?)");
    let mut socket = std::net::TcpStream::connect(authority).map_err(fail)?;
    // Building a 2M body takes the server a few seconds.
    socket.set_read_timeout(Some(Duration::from_secs(120))).map_err(fail)?;
    socket.write_all(format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").as_bytes()).map_err(fail)?;
    let mut response = String::new();
    socket.read_to_string(&mut response).map_err(fail)?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(|| format!("{target}: no HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("{target}: {} {}", head.lines().next().unwrap_or_default(), body.trim()));
    }
    serde_json::from_str(body).map_err(|e| format!("{target}: {e}"))
}

fn stat(stats: &serde_json::Value, key: &str) -> u64 {
    stats.get(key).and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// `[type, text]` of every block, as the reference's `blocksOf` (tool calls: their `content`).
fn blocks_of(message: &AgentMessage) -> Vec<(&'static str, Option<String>)> {
    let AgentMessage::Assistant(message) = message else { return Vec::new() };
    message
        .content
        .iter()
        .map(|block| match block {
            AssistantContent::Text(t) => ("text", Some(t.text.clone())),
            AssistantContent::Thinking(t) => ("thinking", Some(t.thinking.clone())),
            AssistantContent::ToolCall(c) => {
                ("toolCall", c.arguments.get("content").and_then(|v| v.as_str()).map(str::to_owned))
            }
        })
        .collect()
}

/// The content checks of WORKLOADS.md beyond the transcript length and the last message.
fn check_content(family: Family, size: usize, messages: &[AgentMessage]) -> Result<(), String> {
    let blocks = |i: usize| messages.get(i).map(blocks_of).unwrap_or_default();
    let text_block = |n: usize| ("text", Some(text(n)));
    let ok = match family {
        Family::Text => blocks(2) == [text_block(size)],
        Family::Agents => blocks(2) == [text_block(AGENT_CHARS)],
        Family::Thinking => blocks(2) == [("thinking", Some(text(size / 2))), text_block(size - size / 2)],
        Family::Args => {
            let call_ok = matches!(messages.get(2), Some(AgentMessage::Assistant(m))
                if m.stop_reason == StopReason::ToolUse
                    && matches!(m.content.get(1), Some(AssistantContent::ToolCall(c)) if c.name == "write"));
            let result_ok = matches!(messages.get(3), Some(AgentMessage::ToolResult(r)) if !r.is_error);
            call_ok
                && result_ok
                && blocks(2) == [text_block(PREAMBLE_CHARS), ("toolCall", Some(text(size)))]
                && blocks(4) == [("text", Some(FINAL_TEXT.to_owned()))]
        }
    };
    if ok {
        return Ok(());
    }
    let shown: Vec<String> = messages
        .iter()
        .skip(2)
        .map(|m| {
            let sizes: Vec<(&str, Option<usize>)> =
                blocks_of(m).iter().map(|(t, x)| (*t, x.as_ref().map(String::len))).collect();
            format!("{} {sizes:?}", m.role())
        })
        .collect();
    Err(format!("content differs from the response sent; got {}", shown.join(", ")))
}

/// Run one HTTP workload once against the server at `url` and check it.
pub fn run(
    workload: &str,
    size: usize,
    runtime: &tokio::runtime::Runtime,
    options: BenchOptions,
    url: &str,
) -> Result<BenchLine, String> {
    let (family, short) = parse(workload).ok_or_else(|| format!("unknown workload `{workload}`"))?;
    let spec = api_model(short).ok_or_else(|| format!("unknown API `{short}`"))?;
    if family == Family::Thinking && size < 2 {
        return Err(format!("{workload}: SIZE must be at least 2"));
    }
    if !options.usage_estimate {
        return Err(format!("{workload}: --no-usage-estimate is for the faux workloads"));
    }
    let url = url.trim_end_matches('/');
    let (shape, chars) = match family {
        Family::Text => ("text", size),
        Family::Agents => ("text", AGENT_CHARS),
        Family::Args => ("tool", size),
        Family::Thinking => ("thinking", size),
    };
    server_get(url, &format!("/prepare?api={}&shape={shape}&chars={chars}", spec.api))?;
    // The process-wide client (TLS configuration, no connection), created before timing as the
    // reference loads its adapter modules before timing.
    pi_providers::http_client()?;
    let [input, output, cache_read, cache_write] = spec.cost;
    let model: Model = serde_json::from_value(json!({
        "id": spec.id, "name": spec.name, "api": spec.api, "provider": spec.provider,
        "baseUrl": format!("{url}/{}{}", spec.api, spec.path),
        "reasoning": spec.reasoning, "input": ["text", "image"],
        "cost": {"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write},
        "contextWindow": spec.context_window, "maxTokens": spec.max_tokens,
        "headers": {"x-bench-shape": shape, "x-bench-chars": chars.to_string()},
    }))
    .map_err(|e| e.to_string())?;
    let adapter = adapter(spec.api).ok_or_else(|| format!("no adapter for {}", spec.api))?;
    let resolver: pi_providers::registry::KeyResolver =
        Arc::new(|_model| Box::pin(std::future::ready(Ok(Some(API_KEY.to_owned())))));
    let models = Models::new();
    models.set_provider(
        Provider::new(spec.provider)
            .with_auth(Auth::Resolver(resolver))
            .with_model(model.clone())
            .with_api(spec.api, adapter),
    );
    let stream_fn: Arc<dyn StreamFn> = Arc::new(models);
    let model = Arc::new(model);
    let tool = if family == Family::Args { ok_tool("write", "content")? } else { ok_tool("echo", "n")? };
    let counters = Arc::new(Counters::default());
    let agent_count = if family == Family::Agents { size } else { 1 };
    let before = server_get(url, "/stats")?;

    let started = Instant::now();
    let fleet = Fleet { stream_fn: &stream_fn, model: &model, tool: &tool, counters: &counters };
    let agents = run_agents(runtime, &fleet, agent_count, 1)?;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;

    let after = server_get(url, "/stats")?;
    let requests = stat(&after, "requests").saturating_sub(stat(&before, "requests"));
    let connections = stat(&after, "connections").saturating_sub(stat(&before, "connections"));
    let expected_requests = (agent_count * if family == Family::Args { 2 } else { 1 }) as u64;
    for agent in &agents {
        if let Some(error) = agent.error_message() {
            return Err(format!("{workload} {size}: a run ended with an error: {error}"));
        }
    }
    if requests != expected_requests {
        return Err(format!("{workload} {size}: the server got {requests} requests, expected {expected_requests}"));
    }
    let (events, type_chars) = counters.totals();
    let expected = expected_events(family, short, size);
    if events != expected {
        return Err(format!("{workload} {size}: {events} events, expected {expected}"));
    }
    if type_chars == 0 {
        return Err("listener saw no event types".into());
    }
    let transcript = if family == Family::Args { 5 } else { 3 };
    for agent in &agents {
        let messages: Vec<AgentMessage> = agent.messages().iter().cloned().collect();
        check_last(workload, size, messages.iter(), transcript)?;
        check_content(family, size, &messages).map_err(|e| format!("{workload} {size}: {e}"))?;
    }
    Ok(BenchLine {
        workload: workload.to_owned(),
        size,
        wall_ms: (wall_ms * 10.0).round() / 10.0,
        events,
        events_per_sec: (events as f64 / (wall_ms / 1000.0)).round() as u64,
        peak_rss_mb: crate::bench_support::peak_rss_mb(),
        threads: options.threads,
        no_usage_estimate: false,
        rss_per_agent_kb: None,
        requests: Some(requests),
        connections: Some(connections),
    })
}

/// Whether `node` can be run (the server needs it).
pub fn node_available() -> bool {
    std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// A running `node sse-server.mjs --port 0`, killed when dropped.
pub struct SseServer {
    child: std::process::Child,
    url: String,
}

impl SseServer {
    /// Start the vendored server and wait (at most 10 s) for the URL it prints.
    pub fn start() -> Result<Self, String> {
        let mut child = std::process::Command::new("node")
            .arg(SERVER_SCRIPT)
            .args(["--port", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start node {SERVER_SCRIPT}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout of sse-server.mjs")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = Self { child, url: String::new() };
        let line = rx.recv_timeout(Duration::from_secs(10)).map_err(|_| "sse-server.mjs printed no URL within 10 s")?;
        let parsed: serde_json::Value =
            serde_json::from_str(&line).map_err(|_| format!("sse-server.mjs printed {line:?}, not its URL"))?;
        server.url = parsed.get("url").and_then(|u| u.as_str()).ok_or("sse-server.mjs printed no url")?.to_owned();
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for SseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sizes_and_counts_as_workloads_md() {
        assert_eq!(parse("sse-args-google"), Some((Family::Args, "google")));
        assert_eq!(parse("sse-thinking-responses"), Some((Family::Thinking, "responses")));
        assert_eq!(parse("sse-agents"), Some((Family::Agents, "completions")));
        assert_eq!(parse("sse-bedrock"), None);
        assert_eq!(default_size("sse-args-anthropic"), Some(400_000));
        assert_eq!(expected_events(Family::Text, "anthropic", 1_000_000), 250_010);
        assert_eq!(expected_events(Family::Args, "completions", 400_000), 100_031);
        assert_eq!(expected_events(Family::Args, "google", 400_000), 28);
        assert_eq!(expected_events(Family::Thinking, "google", 1_000_000), 250_012);
        assert_eq!(expected_events(Family::Thinking, "responses", 1_000_000), 250_013);
        assert_eq!(expected_events(Family::Agents, "completions", 1_000), 510_000);
    }
}
