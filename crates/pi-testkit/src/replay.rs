//! Runs a conformance scenario and prints its normalized trace.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use pi_loop::{AgentContext, AgentEventSink, LoopConfig};
use pi_types::CancellationToken;
use pi_types::{AgentEvent, AgentMessage, ThinkingLevel};
use serde_json::json;

use crate::scenario::{Level, Scenario, ScenarioError};

pub use crate::error::ReplayError;

pub use crate::replay_setup::ProviderFactory;
use crate::replay_setup::{parse_messages, scenario_hooks, ActionCounter, Setup, Trace};

/// Replay a scenario file; the trace text (JSON lines).
pub fn replay_file(path: &Path) -> Result<String, ReplayError> {
    replay(&read_scenario(path)?)
}

/// Replay a scenario file with the scripted responses streamed by another provider (for
/// checking that a provider behaves as the faux provider does).
pub fn replay_file_with(path: &Path, provider: &ProviderFactory) -> Result<String, ReplayError> {
    run_on_runtime(replay_async(&read_scenario(path)?, Some(provider)))
}

fn read_scenario(path: &Path) -> Result<Scenario, ReplayError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ReplayError::Read { path: path.display().to_string(), source })?;
    let stem = path.file_stem().and_then(|s| s.to_str());
    Ok(Scenario::parse(&text, stem)?)
}

/// Replay a parsed scenario on a fresh current-thread runtime.
pub fn replay(scenario: &Scenario) -> Result<String, ReplayError> {
    run_on_runtime(replay_async(scenario, None))
}

fn run_on_runtime(
    replay: impl std::future::Future<Output = Result<String, ReplayError>>,
) -> Result<String, ReplayError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ScenarioError(format!("runtime: {e}")))?;
    runtime.block_on(replay)
}

struct LoopSink {
    scenario: Arc<Scenario>,
    trace: Trace,
    counter: ActionCounter,
    cancel: CancellationToken,
}

impl AgentEventSink for LoopSink {
    fn deliver(&self, event: AgentEvent, _info: pi_loop::EventInfo) -> pi_loop::Delivery {
        self.trace.record(&json!({"kind": "event", "event": event}));
        for action in self.counter.fire(&self.scenario, &event) {
            if action.action == "abort" {
                self.cancel.cancel();
            }
        }
        pi_loop::Delivery::done()
    }
}

async fn replay_async(scenario: &Scenario, provider: Option<&ProviderFactory>) -> Result<String, ReplayError> {
    match scenario.level {
        Level::Loop => replay_loop(scenario, provider).await,
        Level::Agent => crate::agent_replay::replay_agent(scenario, provider).await,
    }
}

/// A message source answering poll `n` with the entry for `n` (nothing when there is none).
fn poll_source(
    entries: &[crate::scenario::PollJson],
) -> Result<impl Fn() -> std::future::Ready<Vec<AgentMessage>> + Send + Sync + 'static, ScenarioError> {
    let mut by_poll = HashMap::new();
    for entry in entries {
        by_poll.entry(entry.poll).or_insert(parse_messages(&entry.messages)?);
    }
    let polls = Mutex::new(0usize);
    Ok(move || {
        let n = {
            let mut polls = polls.lock().unwrap_or_else(|p| p.into_inner());
            *polls += 1;
            *polls
        };
        std::future::ready(by_poll.get(&n).cloned().unwrap_or_default())
    })
}

async fn replay_loop(scenario: &Scenario, provider: Option<&ProviderFactory>) -> Result<String, ReplayError> {
    let setup = Arc::new(Setup::new(scenario, provider)?);
    let mut config = LoopConfig::new(setup.model.clone(), Arc::clone(&setup.stream_fn));
    config.options.reasoning = scenario.thinking_level.filter(|l| *l != ThinkingLevel::Off);
    config.tool_execution = scenario.config.tool_execution.unwrap_or_default();
    let config = config
        .get_steering_messages(poll_source(&scenario.steering)?)
        .get_follow_up_messages(poll_source(&scenario.follow_ups)?)
        .with_hooks(scenario_hooks(&setup, scenario));
    let context = AgentContext::new(parse_messages(&scenario.messages)?, setup.initial_tools.clone());
    let cancel = CancellationToken::new();
    let sink = Arc::new(LoopSink {
        scenario: Arc::new(scenario.clone()),
        trace: setup.trace.clone(),
        counter: ActionCounter::default(),
        cancel: cancel.clone(),
    });
    let outcome = match &scenario.prompts {
        Some(prompts) => {
            let prompts = parse_messages(prompts)?;
            pi_loop::run_agent_loop(prompts, context, config, sink, cancel).await
        }
        None => pi_loop::run_agent_loop_continue(context, config, sink, cancel).await,
    };
    match outcome {
        Ok(messages) => setup.trace.record(&json!({"kind": "result", "messages": messages})),
        Err(error) => setup.trace.error(&error.to_string()),
    }
    let _ = &setup.faux;
    Ok(setup.trace.text())
}

#[cfg(test)]
mod agent_scenarios {
    use std::path::Path;

    use serde_json::Value;

    fn parse_lines(text: &str) -> Vec<Value> {
        text.lines().map(|line| serde_json::from_str(line).unwrap_or(Value::Null)).collect()
    }

    /// The extra agent scenarios kept next to pi-agent, against their reference goldens.
    #[test]
    fn extra_agent_scenarios_match_the_reference() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pi-agent/tests/conformance");
        let mut entries: Vec<_> = std::fs::read_dir(root.join("scenarios"))
            .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        assert!(!entries.is_empty(), "no scenarios found");
        let mut failures = Vec::new();
        for path in entries {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else { continue };
            let golden = std::fs::read_to_string(root.join("golden").join(format!("{name}.jsonl"))).unwrap_or_default();
            match super::replay_file(&path) {
                Ok(trace) => {
                    let (expected, actual) = (parse_lines(&golden), parse_lines(&trace));
                    if expected != actual {
                        let at = expected.iter().zip(&actual).position(|(e, a)| e != a).unwrap_or(expected.len());
                        failures.push(format!("{name}: first difference at line {}", at + 1));
                    }
                }
                Err(error) => failures.push(format!("{name}: {error}")),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
