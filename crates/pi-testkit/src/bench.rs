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

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use pi_loop::{AgentContext, LoopConfig};
use pi_providers::faux::{
    faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxRequest, FauxResponse,
};
use pi_providers::{Models, Provider};
use pi_types::transcript::to_tool_declaration;
use pi_types::{
    AgentMessage, AssistantMessageEventStream, Message, Model, StopReason, StreamFn, StreamOptions, SystemContent,
    SystemMessage, TranscriptContext, UserMessage,
};
use serde_json::json;

use crate::bench_support::{
    check_last, ok_tool, run_agents, status_kb, text, Counters, Fleet, FINAL_TEXT, SYSTEM_PROMPT, USER_PROMPT,
};
pub use crate::bench_support::{peak_rss_mb, BenchLine, BenchOptions};

const AGENT_FINAL_TEXT_CHARS: usize = 200;

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

/// Run one workload once on the given runtime and check it: a faux workload, or with the
/// `sse-bench` feature an HTTP one (`sse-*`, against the server at `BENCH_SSE_URL`).
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
    run_faux(workload, size, runtime, options)
}

/// Run one faux workload ([`WORKLOADS`]) once on the given runtime and check it. A binary that
/// calls only this links none of the HTTP stack, so its resident memory is the runtime's.
pub fn run_faux(
    workload: &str,
    size: usize,
    runtime: &tokio::runtime::Runtime,
    options: BenchOptions,
) -> Result<BenchLine, String> {
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
