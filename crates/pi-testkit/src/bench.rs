//! The benchmark workloads of `shared/bench/WORKLOADS.md`, run on the Rust runtime.
//!
//! Each run builds a `Models` registry with one faux provider (`tokenSize` 1, no pacing:
//! it yields to the scheduler once per request, not per delta), agents with the `echo`
//! tool (`write` for `args`) and one counting listener each, prompts them, checks the event
//! count and the transcripts, and reports the reference's output line. `loopstream` drives
//! the loop's `Stream` form directly, with no agent.
//!
//! [`BenchOptions::usage_estimate`] off hands the provider an empty transcript, so its
//! usage estimate (O(transcript) per request by design) costs nothing and what remains is
//! the runtime's own work per turn or prompt.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use pi_agent::{Agent, AgentOptions, Subscription};
use pi_loop::{AgentContext, LoopConfig};
use pi_providers::faux::{
    faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxRequest, FauxResponse,
};
use pi_providers::{Models, Provider};
use pi_types::transcript::to_tool_declaration;
use pi_types::{
    AgentEvent, AgentMessage, AgentToolResult, AssistantMessageEventStream, FnTool, Message, Model, StopReason,
    StreamFn, StreamOptions, SystemContent, SystemMessage, Tool, ToolExecutionMode, ToolSpec, TranscriptContext,
    UserMessage,
};
use serde_json::json;

const SYSTEM_PROMPT: &str = "You are a benchmark agent.";
const USER_PROMPT: &str = "Run the benchmark.";
pub(crate) const FINAL_TEXT: &str = "done";
const AGENT_FINAL_TEXT_CHARS: usize = 200;

/// The result line of one run.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchLine {
    /// Workload name.
    pub workload: String,
    /// Size parameter.
    pub size: usize,
    /// Wall time in ms (agent construction to the last prompt resolving).
    pub wall_ms: f64,
    /// Listener calls.
    pub events: usize,
    /// Events per second.
    pub events_per_sec: u64,
    /// Peak resident set in MB.
    pub peak_rss_mb: f64,
    /// Worker threads of a multi-thread runtime (absent: `current_thread`, the primary figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// `true` when the provider's usage estimate was switched off (absent: on, as the reference).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_usage_estimate: bool,
    /// `agents`: growth of the resident set during the run per agent, in KB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_per_agent_kb: Option<f64>,
    /// HTTP workloads: requests the server answered during the run (its `/stats`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// HTTP workloads: connections that carried those requests (its `/stats`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
}

/// How to run a workload.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    /// The faux provider estimates usage from the whole transcript per request (the
    /// reference's behaviour; default on).
    pub usage_estimate: bool,
    /// Worker threads, recorded in the output line (the runtime is the caller's).
    pub threads: Option<usize>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self { usage_estimate: true, threads: None }
    }
}

/// The workloads.
pub const WORKLOADS: [&str; 7] = ["stream", "tools", "turns", "agents", "args", "loopstream", "prompts"];

/// Default size of a workload (with the `sse-bench` feature, also of the HTTP workloads).
pub fn default_size(workload: &str) -> Option<usize> {
    #[cfg(feature = "sse-bench")]
    if let Some(size) = crate::bench_sse::default_size(workload) {
        return Some(size);
    }
    Some(match workload {
        "stream" | "loopstream" => 1_000_000,
        "tools" => 1_000,
        "turns" | "prompts" => 2_000,
        "agents" => 10_000,
        "args" => 400_000,
        _ => return None,
    })
}

/// `text(n)` of the workloads: the alphabet repeated, cut at `n` characters (ASCII).
pub(crate) fn text(n: usize) -> String {
    const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyz";
    let mut text = ALPHABET.repeat(n.div_ceil(ALPHABET.len()));
    text.truncate(n);
    text
}

fn tool_call(i: usize) -> pi_types::AssistantContent {
    let n = format!("{i:08}");
    let mut arguments = serde_json::Map::new();
    arguments.insert("n".into(), json!(n));
    faux_tool_call(format!("call_{n}"), "echo", arguments)
}

fn tool_message(calls: impl IntoIterator<Item = usize>) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(calls.into_iter().map(tool_call).collect(), StopReason::ToolUse))
}

fn text_message(body: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(body)], StopReason::Stop))
}

/// A tool with one required string parameter that returns "ok" at once.
pub(crate) fn ok_tool(name: &str, parameter: &str) -> Result<Arc<dyn pi_types::AgentTool>, String> {
    let spec = ToolSpec::new(Tool {
        name: name.into(),
        description: name.into(),
        parameters: json!({
            "type": "object", "properties": {parameter: {"type": "string"}}, "required": [parameter],
            "additionalProperties": false
        })
        .into(),
        constrained_sampling: None,
    })
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(FnTool::new(spec, |_args, _ctx| std::future::ready(Ok(AgentToolResult::text("ok"))))))
}

/// Peak resident set of this process in MB (Linux `VmHWM`; 0 elsewhere).
pub fn peak_rss_mb() -> f64 {
    (status_kb("VmHWM:") / 1024.0 * 10.0).round() / 10.0
}

fn status_kb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

struct Expect {
    events: usize,
    transcript: usize,
}

fn expectation(workload: &str, size: usize) -> Expect {
    let assistant_events = |chars: usize| 2 + 2 + chars.div_ceil(4).max(1);
    match workload {
        "stream" => Expect { events: size.div_ceil(4) + 10, transcript: 3 },
        "loopstream" => Expect { events: size.div_ceil(4) + 10, transcript: 2 },
        "tools" => Expect { events: 10 * size + 15, transcript: size + 4 },
        "turns" => Expect { events: 14 * size + 11, transcript: 2 * size + 3 },
        "args" => Expect {
            events: 4 + assistant_events(size + 14) + 4 + 1 + 1 + assistant_events(FINAL_TEXT.len()) + 1 + 1,
            transcript: 5,
        },
        "prompts" => Expect { events: 11 * size, transcript: 1 + 2 * size },
        _ => Expect { events: 88 * size, transcript: 7 },
    }
}

fn script(workload: &str, size: usize, faux: &FauxProvider) {
    match workload {
        "stream" | "loopstream" => faux.set_responses([text_message(&text(size))]),
        "tools" => faux.set_responses([tool_message(0..size), text_message(FINAL_TEXT)]),
        "turns" => {
            faux.set_responses((0..size).map(|k| tool_message([k])).chain([text_message(FINAL_TEXT)]));
        }
        "args" => {
            let mut arguments = serde_json::Map::new();
            arguments.insert("content".into(), json!(text(size)));
            let call = faux_tool_call("call_write", "write", arguments);
            faux.set_responses([
                FauxResponse::Message(faux_assistant_message(vec![call], StopReason::ToolUse)),
                text_message(FINAL_TEXT),
            ]);
        }
        "prompts" => faux.set_responses((0..size).map(|_| text_message(FINAL_TEXT))),
        _ => {
            // As the reference's harness: one step per agent queued, a step that answers with a
            // tool call queues the agent's next one (so the queue holds at most SIZE steps), and
            // each step picks a prebuilt response from the request's own transcript.
            let step = AgentStep {
                faux: faux.clone(),
                responses: Arc::new([
                    faux_assistant_message(vec![tool_call(0)], StopReason::ToolUse),
                    faux_assistant_message(vec![tool_call(1)], StopReason::ToolUse),
                    faux_assistant_message(vec![faux_text(text(AGENT_FINAL_TEXT_CHARS))], StopReason::Stop),
                ]),
            };
            let first = step.into_response_fn();
            faux.set_responses((0..size).map(|_| FauxResponse::Build(Arc::clone(&first))));
        }
    }
}

/// The `agents` workload's scripted step.
#[derive(Clone)]
struct AgentStep {
    faux: FauxProvider,
    responses: Arc<[pi_types::AssistantMessage; 3]>,
}

impl AgentStep {
    fn into_response_fn(self) -> pi_providers::faux::FauxResponseFn {
        Arc::new(move |request: &FauxRequest| {
            let results = request.context.messages().iter().filter(|m| matches!(m, Message::ToolResult(_))).count();
            if results < 2 {
                self.faux.append_responses([FauxResponse::Build(self.clone().into_response_fn())]);
            }
            let response = self.responses[results.min(2)].clone();
            Box::pin(std::future::ready(Ok(response)))
        })
    }
}

/// The registry's stream function, handing the provider an empty transcript: the faux
/// provider's usage estimate then costs nothing (the runtime still builds the transcript).
struct WithoutTranscript(Arc<dyn StreamFn>);

impl StreamFn for WithoutTranscript {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        drop(context);
        self.0.stream(model, TranscriptContext::default(), options)
    }
}

/// The listener's counts: a plain load and store per addition, exact for counts only one caller
/// adds to at a time (an agent calls its listener for one event at a time), like the
/// reference's JavaScript additions; a read-modify-write would add a locked instruction per
/// event that the reference does not pay.
#[derive(Default)]
struct Counts {
    events: AtomicUsize,
    type_chars: AtomicUsize,
}

impl Counts {
    pub(crate) fn count(&self, event: &AgentEvent) {
        let add = |counter: &AtomicUsize, amount: usize| {
            counter.store(counter.load(Ordering::Relaxed).wrapping_add(amount), Ordering::Relaxed);
        };
        add(&self.events, 1);
        add(&self.type_chars, black_box(event.type_name()).len());
    }
}

/// The totals, one cache line of their own (the `loopstream` consumer counts into them
/// directly; agents' listeners add their tallies at the end).
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct Counters(Counts);

impl Counters {
    /// Events counted, and the length of their type names added up.
    #[cfg(feature = "sse-bench")]
    pub(crate) fn totals(&self) -> (usize, usize) {
        (self.0.events.load(Ordering::Relaxed), self.0.type_chars.load(Ordering::Relaxed))
    }
}

/// One agent's listener counts, kept in the listener's own allocation (not cache-line aligned
/// as the totals are) and added to the totals when the listener is dropped: with `--threads`
/// the workers do not serialize on one shared cache line.
struct Tally {
    own: Counts,
    total: Arc<Counters>,
}

impl Drop for Tally {
    fn drop(&mut self) {
        let (own, total) = (&self.own, &self.total.0);
        total.events.fetch_add(own.events.load(Ordering::Relaxed), Ordering::Relaxed);
        total.type_chars.fetch_add(own.type_chars.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

pub(crate) fn check_last<'a>(
    workload: &str,
    size: usize,
    mut messages: impl DoubleEndedIterator<Item = &'a AgentMessage> + ExactSizeIterator,
    expected: usize,
) -> Result<(), String> {
    let len = messages.len();
    if len != expected {
        return Err(format!("{workload} {size}: transcript of {len} messages, expected {expected}"));
    }
    match messages.next_back() {
        Some(AgentMessage::Assistant(m)) if m.stop_reason == StopReason::Stop && m.error_message.is_none() => Ok(()),
        other => Err(format!("{workload} {size}: last message {other:?}")),
    }
}

/// Run one workload once on the given runtime and check it.
pub fn run(
    workload: &str,
    size: usize,
    runtime: &tokio::runtime::Runtime,
    options: BenchOptions,
) -> Result<BenchLine, String> {
    #[cfg(feature = "sse-bench")]
    if workload.starts_with("sse-") {
        let url = std::env::var("BENCH_SSE_URL").map_err(|_| {
            format!("{workload}: BENCH_SSE_URL is not set (start `node sse-server.mjs --port 0` or use `cargo xtask bench`)")
        })?;
        return crate::bench_sse::run(workload, size, runtime, options, &url);
    }
    if !WORKLOADS.contains(&workload) {
        return Err(format!("unknown workload `{workload}` (one of {})", WORKLOADS.join(", ")));
    }
    if (workload == "agents" || workload == "args") && !options.usage_estimate {
        return Err(format!("{workload}: the usage estimate can be switched off for turns and prompts only"));
    }
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    script(workload, size, &faux);
    let models = Models::new();
    // One model shared by every agent, as the reference's agents share one object.
    let model = Arc::new(faux.model());
    models.set_provider(
        Provider::new(faux.provider_id()).with_model((*model).clone()).with_api(faux.api(), Arc::new(faux.clone())),
    );
    let mut stream_fn: Arc<dyn StreamFn> = Arc::new(models);
    if !options.usage_estimate {
        stream_fn = Arc::new(WithoutTranscript(stream_fn));
    }
    let tool = if workload == "args" { ok_tool("write", "content")? } else { ok_tool("echo", "n")? };
    let counters = Arc::new(Counters::default());
    let expect = expectation(workload, size);
    let rss_before_kb = status_kb("VmRSS:");

    let started = Instant::now();
    let agents = if workload == "loopstream" {
        let messages = runtime.block_on(loop_stream(model, stream_fn, tool, &counters))?;
        check_last(workload, size, messages.iter(), expect.transcript)?;
        Vec::new()
    } else {
        let agent_count = if workload == "agents" { size } else { 1 };
        let prompt_count = if workload == "prompts" { size } else { 1 };
        run_agents(
            runtime,
            &Fleet { stream_fn: &stream_fn, model: &model, tool: &tool, counters: &counters },
            agent_count,
            prompt_count,
        )?
    };
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;

    let events = counters.0.events.load(Ordering::Relaxed);
    if events != expect.events {
        return Err(format!("{workload} {size}: expected {} events, got {events}", expect.events));
    }
    if counters.0.type_chars.load(Ordering::Relaxed) == 0 {
        return Err("listener saw no event types".into());
    }
    for agent in &agents {
        check_last(workload, size, agent.messages().iter(), expect.transcript)?;
    }
    if faux.pending_response_count() != 0 {
        return Err(format!("{workload} {size}: scripted responses left"));
    }
    let peak_rss_mb = peak_rss_mb();
    let rss_per_agent_kb = (workload == "agents")
        .then(|| ((peak_rss_mb * 1024.0 - rss_before_kb).max(0.0) / size as f64 * 10.0).round() / 10.0);
    Ok(BenchLine {
        workload: workload.to_owned(),
        size,
        wall_ms: (wall_ms * 10.0).round() / 10.0,
        events,
        events_per_sec: (events as f64 / (wall_ms / 1000.0)).round() as u64,
        peak_rss_mb,
        threads: options.threads,
        no_usage_estimate: !options.usage_estimate,
        rss_per_agent_kb,
        requests: None,
        connections: None,
    })
}

/// What every agent of a run shares: the stream function, the model, the tool and the totals.
pub(crate) struct Fleet<'a> {
    pub stream_fn: &'a Arc<dyn StreamFn>,
    pub model: &'a Arc<Model>,
    pub tool: &'a Arc<dyn pi_types::AgentTool>,
    pub counters: &'a Arc<Counters>,
}

/// The timed part of an agent workload: `agent_count` agents constructed, each with its counting
/// listener, then prompted `prompt_count` times, all agents at once.
pub(crate) fn run_agents(
    runtime: &tokio::runtime::Runtime,
    fleet: &Fleet<'_>,
    agent_count: usize,
    prompt_count: usize,
) -> Result<Vec<Agent>, String> {
    runtime.block_on(async {
        let mut agents = Vec::with_capacity(agent_count);
        let mut subscriptions = Vec::with_capacity(agent_count);
        for _ in 0..agent_count {
            let options = AgentOptions::new(Arc::clone(fleet.stream_fn))
                .with_system_prompt(SYSTEM_PROMPT)
                .with_model(Arc::clone(fleet.model))
                .with_tools([Arc::clone(fleet.tool)])
                .with_tool_execution(ToolExecutionMode::Parallel);
            let agent = Agent::new(options);
            let tally = Tally { own: Counts::default(), total: Arc::clone(fleet.counters) };
            subscriptions.push(agent.subscribe_fn(move |event| tally.own.count(event)));
            agents.push(agent);
        }
        for _ in 0..prompt_count {
            // Every prompt starts its run as a task of its own, so waiting for the runs in
            // turn lets them all go on at once, as `Promise.all` does, without a joined
            // future (and its bookkeeping) per agent.
            let runs: Vec<_> = agents.iter().map(|a| a.prompt(USER_PROMPT)).collect();
            for run in runs {
                run.await.map_err(|e| e.to_string())?;
            }
        }
        // The runs are over (their tasks, and the listener views they held, are gone): each
        // listener, dropped when it is unsubscribed, adds its tally to the totals.
        subscriptions.into_iter().for_each(Subscription::unsubscribe);
        Ok::<_, String>(agents)
    })
}

/// `loopstream`: the loop's `Stream` form, the counting listener called per event.
async fn loop_stream(
    model: Arc<Model>,
    stream_fn: Arc<dyn StreamFn>,
    tool: Arc<dyn pi_types::AgentTool>,
    counters: &Counters,
) -> Result<Vec<AgentMessage>, String> {
    let system = SystemMessage {
        content: SystemContent::Text(SYSTEM_PROMPT.into()),
        tools_added: Some(vec![to_tool_declaration(&tool.spec().declaration)]),
        timestamp: pi_types::now_ms(),
        ..Default::default()
    };
    let context = AgentContext::new(vec![system.into()], vec![tool]);
    let config = LoopConfig::new(model, stream_fn);
    let prompts = vec![UserMessage::text(USER_PROMPT).into()];
    let mut stream = pi_loop::agent_loop(prompts, context, config, Default::default());
    while let Some(event) = stream.next().await {
        counters.0.count(&event);
    }
    stream.result().await.map_err(|e| e.to_string())
}
