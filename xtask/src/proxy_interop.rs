//! `cargo xtask proxy-interop`: our proxy server driven by the reference TypeScript client.
//!
//! Starts the server on a loopback port in front of faux providers, installs
//! `@earendil-works/pi-agent-core@1.6.0` in a scratch folder (`target/proxy-interop`), runs every
//! scripted case through the reference's `streamProxy` under Node and through our
//! `ProxyStreamFn`, and compares the event sequences field by field and the rebuilt final
//! messages (clock readings aside). The reference's `partial` is one live object that a
//! consumer only sees after the client has read ahead (its docs: "not an event-time
//! snapshot"), so the partials of non-terminal events are not compared here; the round-trip
//! tests of pi-proxy compare ours event for event.
//!
//! The same server also answers pi-ai's `pi-messages` API (`POST /v1/messages`): the cases run
//! a second time through pi-ai's own `pi-messages` client under Node and through our
//! `pi_providers::api::pi_messages::PiMessages`, compared the same way (a JavaScript stack trace and
//! clock in an error diagnostic aside; after a client-side abort the reference drops the
//! content streamed so far and pi-rs keeps it, so there only the ending is compared).
//! Prints one line ending in `ok`, or the first difference.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use futures::StreamExt;
use pi_providers::api::pi_messages::PiMessages;
use pi_providers::faux::{
    faux_assistant_message, faux_text, faux_thinking, faux_tool_call, FauxProvider, FauxRequest, FauxResponse,
    FauxResponseFn,
};
use pi_proxy::server::Limits;
use pi_proxy::ProxyStreamFn;
use pi_types::CancellationToken;
use pi_types::{AssistantMessage, Message, Model, StopReason, StreamFn, StreamOptions, TranscriptContext};
use serde_json::{json, Value};

use crate::proxy_common::{first_difference, normalize, start, TOKEN};

const PACKAGES: [&str; 2] = ["@earendil-works/pi-agent-core@1.6.0", "@earendil-works/pi-ai@1.6.0"];

const SCRIPT: &str = r#"import { streamProxy } from "@earendil-works/pi-agent-core";
import { piMessagesApi } from "@earendil-works/pi-ai/api/pi-messages.lazy";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const input = JSON.parse(text);
const out = {};
for (const c of input.cases) {
  const controller = new AbortController();
  const events = [];
  const options = { proxyUrl: input.url, authToken: c.token, signal: controller.signal };
  for await (const event of streamProxy(c.model, c.context, options)) {
    events.push(JSON.parse(JSON.stringify(event)));
    if (c.abortAfter && events.length === c.abortAfter) controller.abort();
  }
  out[c.name] = events;
}
const piMessages = piMessagesApi();
out.piMessages = {};
for (const c of input.piMessagesCases) {
  const controller = new AbortController();
  const events = [];
  const options = { apiKey: c.token, signal: controller.signal };
  for await (const event of piMessages.streamSimple(c.model, c.context, options)) {
    events.push(JSON.parse(JSON.stringify(event)));
    if (c.abortAfter && events.length === c.abortAfter) controller.abort();
  }
  out.piMessages[c.name] = events;
}
process.stdout.write(JSON.stringify(out));
"#;

/// One scripted request.
struct Case {
    name: &'static str,
    /// Served by the paced provider (so an abort lands between events).
    slow: bool,
    /// Cancel after this many events.
    abort_after: Option<usize>,
    token: &'static str,
    /// Ask for a model id the server does not serve.
    unknown_model: bool,
}

fn cases() -> Vec<Case> {
    let case = |name| Case { name, slow: false, abort_after: None, token: TOKEN, unknown_model: false };
    vec![
        case("text"),
        case("thinking"),
        case("parallel tool calls"),
        case("length"),
        case("error"),
        case("upstream aborted"),
        Case { slow: true, abort_after: Some(5), ..case("abort mid-stream") },
        Case { token: "not-the-token-0123456789", ..case("wrong token") },
        Case { unknown_model: true, ..case("unknown model") },
    ]
}

fn object(value: Value) -> pi_types::JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

/// The scripted answer to a case, picked by the text of the request's last message.
fn answer(name: &str) -> Result<AssistantMessage, pi_types::BoxError> {
    Ok(match name {
        "text" => faux_assistant_message(
            vec![faux_text("Hello through the proxy: \u{e9}, \u{1f600}, \"quotes\",\nand a second line.")],
            StopReason::Stop,
        ),
        "thinking" => faux_assistant_message(
            vec![
                faux_thinking("The user wants the weather; I should answer briefly."),
                faux_text("Sunny, 21 \u{b0}C."),
            ],
            StopReason::Stop,
        ),
        "parallel tool calls" => faux_assistant_message(
            vec![
                faux_text("Checking both."),
                faux_tool_call("call_1", "weather", object(json!({"city": "Oslo", "days": [1, 2, 3]}))),
                faux_tool_call("call_2", "time", object(json!({"zone": {"name": "Europe/Oslo", "dst": true}}))),
            ],
            StopReason::ToolUse,
        ),
        "length" => faux_assistant_message(vec![faux_text("This answer is cut sho")], StopReason::Length),
        "error" => AssistantMessage {
            error_message: Some("Upstream exploded".into()),
            ..faux_assistant_message(vec![faux_text("Partial answer before the failure")], StopReason::Error)
        },
        "upstream aborted" => AssistantMessage {
            error_message: Some("Request was aborted".into()),
            ..faux_assistant_message(vec![faux_thinking("Half a thought")], StopReason::Aborted)
        },
        "abort mid-stream" => faux_assistant_message(
            vec![faux_text("A long answer that the client abandons after a few events, one token at a time.")],
            StopReason::Stop,
        ),
        other => return Err(format!("no script for {other}").into()),
    })
}

fn scripted(faux: &FauxProvider) {
    let build: FauxResponseFn = Arc::new(|request: &FauxRequest| {
        let name = match request.context.messages().last() {
            Some(Message::User(user)) => user.content.text(),
            _ => String::new(),
        };
        Box::pin(async move { answer(&name) })
    });
    faux.set_responses(std::iter::repeat_n(FauxResponse::Build(build), 1000));
}

fn context(name: &str) -> Value {
    json!({"messages": [{"role": "user", "content": name, "timestamp": 1}]})
}

fn model_for(case: &Case, fast: &Model, slow: &Model) -> Model {
    let model = if case.slow { slow } else { fast };
    if case.unknown_model {
        Model { id: "faux-unknown".into(), ..model.clone() }
    } else {
        model.clone()
    }
}

/// An event without the live `partial` of a non-terminal event.
fn without_partial(mut event: Value) -> Value {
    if let Some(map) = event.as_object_mut() {
        map.remove("partial");
    }
    event
}

/// Install the reference client in `dir` unless it is there already.
fn install(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("interop.mjs"), SCRIPT).map_err(|e| format!("interop.mjs: {e}"))?;
    if dir.join("node_modules/@earendil-works/pi-agent-core/dist/proxy.js").is_file() {
        return Ok(());
    }
    let manifest = r#"{"name": "pi-rs-proxy-interop", "private": true, "type": "module"}"#;
    std::fs::write(dir.join("package.json"), manifest).map_err(|e| format!("package.json: {e}"))?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent"])
        .args(PACKAGES)
        .current_dir(dir)
        .status()
        .map_err(|e| format!("cannot run npm: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("npm install failed: {status}"))
    }
}

/// Run the reference client over every case.
fn run_reference(dir: &Path, input: &Value) -> Result<Value, String> {
    let mut child = Command::new("node")
        .arg("interop.mjs")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run node: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.to_string().as_bytes()).map_err(|e| format!("node stdin: {e}"))?;
    }
    let output = child.wait_with_output().map_err(|e| format!("node: {e}"))?;
    if !output.status.success() {
        return Err(format!("node interop.mjs failed: {}", output.status));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("node output: {e}"))
}

/// The model as a pi-messages client names it: the server's `/v1` base, the model as
/// `provider/id` (both faux providers serve the same ids).
fn pi_messages_model(model: &Model, url: &str) -> Model {
    Model {
        id: format!("{}/{}", model.provider, model.id).into(),
        api: pi_providers::api::pi_messages::API.into(),
        base_url: format!("{url}/v1"),
        ..model.clone()
    }
}

/// Run our client (the proxy client, or with `pi_messages` the pi-messages adapter) over one case.
async fn run_ours(url: &str, case: &Case, model: &Model, pi_messages: bool) -> Result<Vec<Value>, String> {
    let client: Box<dyn StreamFn> =
        if pi_messages { Box::new(PiMessages) } else { Box::new(ProxyStreamFn::new(url, case.token)) };
    let cancel = CancellationToken::new();
    let api_key = pi_messages.then(|| case.token.to_owned());
    let options = StreamOptions { cancel: Some(cancel.clone()), api_key, ..Default::default() };
    let messages = vec![serde_json::from_value::<Message>(context(case.name)["messages"][0].clone())
        .map_err(|e| format!("context: {e}"))?];
    let mut stream = client.stream(model, TranscriptContext::from_messages(messages), options);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(serde_json::to_value(&event).map_err(|e| format!("event JSON: {e}"))?);
        if case.abort_after == Some(events.len()) {
            cancel.cancel();
        }
    }
    Ok(events)
}

async fn compare(dir: PathBuf) -> Result<String, String> {
    let fast = crate::proxy_common::faux("faux", 1, None);
    let slow = crate::proxy_common::faux("faux-slow", 1, Some(20.0));
    scripted(&fast);
    scripted(&slow);
    let server = start(&[&fast, &slow], Limits::default()).await?;
    let (fast_model, slow_model) = (fast.model(), slow.model());
    let cases = cases();
    let input = json!({
        "url": server.url,
        "cases": cases.iter().map(|c| json!({
            "name": c.name,
            "model": model_for(c, &fast_model, &slow_model),
            "context": context(c.name),
            "token": c.token,
            "abortAfter": c.abort_after,
        })).collect::<Vec<_>>(),
        "piMessagesCases": cases.iter().map(|c| json!({
            "name": c.name,
            "model": pi_messages_model(&model_for(c, &fast_model, &slow_model), &server.url),
            "context": context(c.name),
            "token": c.token,
            "abortAfter": c.abort_after,
        })).collect::<Vec<_>>(),
    });
    let reference = tokio::task::spawn_blocking(move || run_reference(&dir, &input))
        .await
        .map_err(|e| format!("node task: {e}"))??;
    let mut total = 0;
    for case in &cases {
        let ours = run_ours(&server.url, case, &model_for(case, &fast_model, &slow_model), false).await?;
        let theirs = reference[case.name].as_array().cloned().unwrap_or_default();
        total += ours.len();
        let ours = normalize(Value::Array(ours.into_iter().map(without_partial).collect()));
        let theirs = normalize(Value::Array(theirs.into_iter().map(without_partial).collect()));
        if let Some(difference) = first_difference("", &ours, &theirs) {
            return Err(format!("case `{}`: ours vs reference at {difference}", case.name));
        }
    }
    let mut pi_total = 0;
    for case in &cases {
        let model = pi_messages_model(&model_for(case, &fast_model, &slow_model), &server.url);
        let ours = run_ours(&server.url, case, &model, true).await?;
        let theirs = reference["piMessages"][case.name].as_array().cloned().unwrap_or_default();
        pi_total += ours.len();
        let (ours, theirs) = match case.abort_after {
            // The reference drops the content on an abort; compare the ending only.
            Some(_) => (ending(&ours), ending(&theirs)),
            None => (
                normalize(Value::Array(ours.into_iter().map(without_partial).map(without_runtime).collect())),
                normalize(Value::Array(theirs.into_iter().map(without_partial).map(without_runtime).collect())),
            ),
        };
        if let Some(difference) = first_difference("", &ours, &theirs) {
            return Err(format!("pi-messages case `{}`: ours vs reference at {difference}", case.name));
        }
    }
    if pi_total < 3 * cases.len() {
        return Err(format!("pi-messages: only {pi_total} events in {} cases: requests refused?", cases.len()));
    }
    Ok(format!(
        "proxy-interop: {} cases, {total} events equal to the reference streamProxy; {} cases, {pi_total} events \
         equal to the reference pi-messages client: ok",
        cases.len(),
        cases.len()
    ))
}

/// An error diagnostic without what only the runtime that wrote it has: a JavaScript stack
/// trace and a clock reading.
fn without_runtime(mut event: Value) -> Value {
    for key in ["message", "error"] {
        if let Some(Value::Array(diagnostics)) = event.get_mut(key).and_then(|m| m.get_mut("diagnostics")) {
            for diagnostic in diagnostics {
                if let Some(Value::Object(error)) = diagnostic.get_mut("error") {
                    error.remove("stack");
                }
                if let Some(Value::Object(details)) = diagnostic.get_mut("details") {
                    details.remove("timestampMs");
                }
            }
        }
    }
    event
}

/// The last event's type, stop reason and error text.
fn ending(events: &[Value]) -> Value {
    let last = events.last().cloned().unwrap_or(Value::Null);
    let message = if last["type"] == "done" { &last["message"] } else { &last["error"] };
    json!({"type": last["type"], "stopReason": message["stopReason"], "errorMessage": message["errorMessage"]})
}

/// The command: install, run, compare, print one line.
pub fn run(target_dir: &Path) -> Result<String, String> {
    let dir = target_dir.join("proxy-interop");
    install(&dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(compare(dir))
}
