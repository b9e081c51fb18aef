//! The benchmark workloads of `shared/bench/WORKLOADS.md`, run on the Rust runtime.
//!
//! Each run builds a `Models` registry with one faux provider (`tokenSize` 1, no pacing:
//! it yields to the scheduler once per request, not per delta), agents with the `echo`
//! tool and one counting listener each, prompts them, checks the event count and the
//! transcripts, and reports the reference's output line.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{
    faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxRequest, FauxResponse,
};
use pi_providers::{Models, Provider};
use pi_types::{
    AgentMessage, AgentToolResult, FnTool, Message, StopReason, StreamFn, Tool, ToolExecutionMode, ToolSpec,
};
use serde_json::json;

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
}

/// The workloads.
pub const WORKLOADS: [&str; 4] = ["stream", "tools", "turns", "agents"];

/// Default size of a workload.
pub fn default_size(workload: &str) -> Option<usize> {
    Some(match workload {
        "stream" => 1_000_000,
        "tools" => 1_000,
        "turns" => 2_000,
        "agents" => 10_000,
        _ => return None,
    })
}

fn text(n: usize) -> String {
    "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(n).collect()
}

fn tool_call(i: usize) -> pi_types::AssistantContent {
    let n = format!("{i:08}");
    let arguments = json!({ "n": n }).as_object().cloned().unwrap_or_default();
    faux_tool_call(format!("call_{n}"), "echo", arguments)
}

fn tool_message(calls: impl IntoIterator<Item = usize>) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(calls.into_iter().map(tool_call).collect(), StopReason::ToolUse))
}

fn text_message(body: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(body)], StopReason::Stop))
}

fn echo_tool() -> Result<Arc<dyn pi_types::AgentTool>, String> {
    let spec = ToolSpec::new(Tool {
        name: "echo".into(),
        description: "Echo".into(),
        parameters: json!({
            "type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"], "additionalProperties": false
        }),
        constrained_sampling: None,
    })
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(FnTool::new(spec, |_args, _ctx| std::future::ready(Ok(AgentToolResult::text("ok"))))))
}

/// Peak resident set of this process in MB (Linux `VmHWM`; 0 elsewhere).
pub fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| (kb / 1024.0 * 10.0).round() / 10.0)
}

struct Expect {
    events: usize,
    transcript: usize,
}

fn expectation(workload: &str, size: usize) -> Expect {
    match workload {
        "stream" => Expect { events: size.div_ceil(4) + 10, transcript: 3 },
        "tools" => Expect { events: 10 * size + 15, transcript: size + 4 },
        "turns" => Expect { events: 14 * size + 11, transcript: 2 * size + 3 },
        _ => Expect { events: 88 * size, transcript: 7 },
    }
}

fn script(workload: &str, size: usize, faux: &FauxProvider) {
    match workload {
        "stream" => faux.set_responses([text_message(&text(size))]),
        "tools" => faux.set_responses([tool_message(0..size), text_message("done")]),
        "turns" => {
            faux.set_responses((0..size).map(|k| tool_message([k])).chain([text_message("done")]));
        }
        _ => {
            // Every agent gets the same three steps, chosen from its own transcript.
            let step: pi_providers::faux::FauxResponseFn = Arc::new(|request: FauxRequest| {
                let results = request.context.messages().iter().filter(|m| matches!(m, Message::ToolResult(_))).count();
                let response = match results {
                    0 => faux_assistant_message(vec![tool_call(0)], StopReason::ToolUse),
                    1 => faux_assistant_message(vec![tool_call(1)], StopReason::ToolUse),
                    _ => faux_assistant_message(vec![faux_text(text(200))], StopReason::Stop),
                };
                Box::pin(std::future::ready(Ok(response)))
            });
            faux.set_responses((0..3 * size).map(|_| FauxResponse::Build(Arc::clone(&step))));
        }
    }
}

/// Run one workload once on the given runtime and check it.
pub fn run(workload: &str, size: usize, runtime: &tokio::runtime::Runtime) -> Result<BenchLine, String> {
    if !WORKLOADS.contains(&workload) {
        return Err(format!("unknown workload `{workload}` (one of {})", WORKLOADS.join(", ")));
    }
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    script(workload, size, &faux);
    let models = Models::new();
    let model = faux.model();
    models.set_provider(
        Provider::new(faux.provider_id()).with_model(model.clone()).with_api(faux.api(), Arc::new(faux.clone())),
    );
    let stream_fn: Arc<dyn StreamFn> = Arc::new(models);
    let tool = echo_tool()?;
    let agents_count = if workload == "agents" { size } else { 1 };
    let events = Arc::new(AtomicUsize::new(0));
    let type_chars = Arc::new(AtomicUsize::new(0));

    let started = Instant::now();
    let agents = runtime.block_on(async {
        let mut agents = Vec::with_capacity(agents_count);
        let mut subscriptions = Vec::with_capacity(agents_count);
        for _ in 0..agents_count {
            let options = AgentOptions::new(Arc::clone(&stream_fn))
                .with_system_prompt("You are a benchmark agent.")
                .with_model(model.clone())
                .with_tools([Arc::clone(&tool)])
                .with_tool_execution(ToolExecutionMode::Parallel);
            let agent = Agent::new(options);
            let (events, type_chars) = (Arc::clone(&events), Arc::clone(&type_chars));
            subscriptions.push(agent.subscribe_fn(move |event| {
                events.fetch_add(1, Ordering::Relaxed);
                type_chars.fetch_add(black_box(event.type_name()).len(), Ordering::Relaxed);
            }));
            agents.push(agent);
        }
        let runs: Vec<_> = agents.iter().map(|a| a.prompt("Run the benchmark.")).collect();
        for outcome in futures::future::join_all(runs).await {
            outcome.map_err(|e| e.to_string())?;
        }
        drop(subscriptions);
        Ok::<_, String>(agents)
    })?;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;

    let expect = expectation(workload, size);
    let events = events.load(Ordering::Relaxed);
    if events != expect.events * if workload == "agents" { 1 } else { agents_count } {
        return Err(format!("{workload} {size}: expected {} events, got {events}", expect.events));
    }
    for agent in &agents {
        let messages = agent.messages();
        if messages.len() != expect.transcript {
            return Err(format!("{workload} {size}: transcript of {} messages", messages.len()));
        }
        match messages.last() {
            Some(AgentMessage::Assistant(m)) if m.stop_reason == StopReason::Stop && m.error_message.is_none() => {}
            other => return Err(format!("{workload} {size}: last message {other:?}")),
        }
    }
    if faux.pending_response_count() != 0 {
        return Err(format!("{workload} {size}: scripted responses left"));
    }
    Ok(BenchLine {
        workload: workload.to_owned(),
        size,
        wall_ms: (wall_ms * 10.0).round() / 10.0,
        events,
        events_per_sec: (events as f64 / (wall_ms / 1000.0)).round() as u64,
        peak_rss_mb: peak_rss_mb(),
    })
}
