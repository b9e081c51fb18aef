//! What the faux and the HTTP workloads share: the result line, the options, the counting
//! listener and its totals, the agent fleet and the final-message check.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pi_agent::{Agent, AgentOptions, Subscription};
use pi_types::{
    AgentEvent, AgentMessage, AgentToolResult, FnTool, Model, StopReason, StreamFn, Tool, ToolExecutionMode, ToolSpec,
};
use serde_json::json;

pub(crate) const SYSTEM_PROMPT: &str = "You are a benchmark agent.";

pub(crate) const USER_PROMPT: &str = "Run the benchmark.";

pub(crate) const FINAL_TEXT: &str = "done";

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

/// `text(n)` of the workloads: the alphabet repeated, cut at `n` characters (ASCII).
pub(crate) fn text(n: usize) -> String {
    const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyz";
    let mut text = ALPHABET.repeat(n.div_ceil(ALPHABET.len()));
    text.truncate(n);
    text
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

pub(crate) fn status_kb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// The listener's counts: a plain load and store per addition, exact for counts only one caller
/// adds to at a time (an agent calls its listener for one event at a time), like the
/// reference's JavaScript additions; a read-modify-write would add a locked instruction per
/// event that the reference does not pay.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) events: AtomicUsize,
    pub(crate) type_chars: AtomicUsize,
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
pub(crate) struct Counters(pub(crate) Counts);

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
pub(crate) struct Tally {
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
