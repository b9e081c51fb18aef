//! Agent-level scenarios: drive a [`pi_agent::Agent`] through the scenario's `ops`, with the
//! actions fired from inside its listener (see the conformance README, "Agent level").

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use pi_agent::{Agent, AgentInitialState, AgentOptions, PromptInput, QueueMode, RunHandle, WeakAgent};
use pi_types::{AgentEvent, ThinkingLevel};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::normalize::canonical_line;
use crate::replay::{parse_message, parse_messages, scenario_hooks, ActionCounter, ReplayError, Setup, Trace};
use crate::scenario::{ActionJson, Scenario, ScenarioError};

fn queue_mode(mode: Option<&str>) -> Result<QueueMode, ScenarioError> {
    mode.map_or(Ok(QueueMode::OneAtATime), |m| m.parse().map_err(ScenarioError))
}

fn prompt_input(text: Option<&String>, messages: Option<&Vec<Value>>) -> Result<PromptInput, ScenarioError> {
    match (text, messages) {
        (Some(text), _) => Ok(PromptInput::from(text.as_str())),
        (None, Some(messages)) => Ok(PromptInput::Messages(parse_messages(messages)?)),
        (None, None) => Err(ScenarioError("prompt needs text or messages".into())),
    }
}

fn state_line(agent: &Agent) -> String {
    let state = agent.state();
    canonical_line(&json!({
        "kind": "state",
        "messages": state.messages,
        "systemPrompt": state.system_prompt(),
        "errorMessage": state.error_message,
        "isStreaming": state.is_streaming,
        "pendingToolCalls": *state.pending_tool_calls,
        "hasQueuedMessages": agent.has_queued_messages(),
    }))
}

fn error_line(message: &str) -> String {
    canonical_line(&json!({"kind": "error", "message": message}))
}

/// Calls made inside the listener that settle later (`prompt`/`continue`).
#[derive(Clone, Default)]
struct PendingSettles(Arc<Mutex<Vec<JoinHandle<()>>>>);

impl PendingSettles {
    /// Reserve the trace slot now; fill it with the call's error, or drop it on success.
    fn settle_in_place(&self, trace: &Trace, mut handle: RunHandle) {
        let slot = trace.reserve();
        match (&mut handle).now_or_never() {
            Some(outcome) => trace.fill(slot, outcome.err().map(|e| error_line(&e.to_string()))),
            None => {
                let trace = trace.clone();
                let task = tokio::spawn(async move {
                    let outcome = handle.await;
                    trace.fill(slot, outcome.err().map(|e| error_line(&e.to_string())));
                });
                self.0.lock().unwrap_or_else(|p| p.into_inner()).push(task);
            }
        }
    }

    async fn join(&self) {
        loop {
            let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
            if tasks.is_empty() {
                return;
            }
            for task in tasks {
                let _ = task.await;
            }
        }
    }
}

fn fire(agent: &Agent, trace: &Trace, settles: &PendingSettles, action: &ActionJson) -> Result<(), ScenarioError> {
    let message =
        || action.message.as_ref().ok_or_else(|| ScenarioError(format!("{}: message required", action.action)));
    match action.action.as_str() {
        "abort" => agent.abort(),
        "steer" => agent.steer(parse_message(message()?)?),
        "followUp" => agent.follow_up(parse_message(message()?)?),
        "prompt" => {
            let input = prompt_input(action.text.as_ref(), action.messages.as_ref())?;
            settles.settle_in_place(trace, agent.prompt(input));
        }
        "continue" => settles.settle_in_place(trace, agent.continue_run()),
        "reset" => {
            if let Err(error) = agent.reset() {
                trace.error(&error.to_string());
            }
        }
        other => return Err(ScenarioError(format!("unknown action \"{other}\""))),
    }
    Ok(())
}

pub(crate) async fn replay_agent(
    scenario: &Scenario,
    provider: Option<&crate::replay::ProviderFactory>,
) -> Result<String, ReplayError> {
    let setup = Arc::new(Setup::new(scenario, provider)?);
    let ops = scenario.ops.clone().ok_or_else(|| ScenarioError("agent level: ops required".into()))?;
    // Tool lists are checked up front, as the reference runner does.
    for list in ops.iter().filter(|op| op.op == "setTools").filter_map(|op| op.tools.as_ref()) {
        setup.resolve_tools(list)?;
    }
    for rule in scenario.config.prepare_next_turn.iter().flatten() {
        if let Some(list) = rule.get("tools").and_then(Value::as_array) {
            setup.resolve_tools(list)?;
        }
    }

    // Agent level installs the scenario's prepareNextTurn as prepareNextTurnWithContext, which
    // is the agent's `prepare_next_turn`.
    let mut options = AgentOptions::new(Arc::clone(&setup.stream_fn)).with_hooks(scenario_hooks(&setup, scenario));
    options.initial_state = AgentInitialState {
        system_prompt: scenario.system_prompt.clone(),
        model: Some(Arc::new(setup.model.clone())),
        thinking_level: scenario.thinking_level.unwrap_or(ThinkingLevel::Off),
        tools: setup.initial_tools.clone(),
        messages: parse_messages(&scenario.messages)?,
    };
    options.tool_execution = scenario.config.tool_execution.unwrap_or_default();
    options.steering_mode = queue_mode(scenario.config.steering_mode.as_deref())?;
    options.follow_up_mode = queue_mode(scenario.config.follow_up_mode.as_deref())?;
    let agent = Agent::new(options);

    let trace = setup.trace.clone();
    let settles = PendingSettles::default();
    let counter = Arc::new(ActionCounter::default());
    let failures: Arc<Mutex<Option<ScenarioError>>> = Arc::default();
    let subscription = {
        let weak: WeakAgent = agent.downgrade();
        let scenario = Arc::new(scenario.clone());
        let trace = trace.clone();
        let settles = settles.clone();
        let failures = Arc::clone(&failures);
        agent.subscribe_fn(move |event: &AgentEvent| {
            trace.record(&json!({"kind": "event", "event": event}));
            let Some(agent) = weak.upgrade() else { return };
            for action in counter.fire(&scenario, event) {
                if let Err(error) = fire(&agent, &trace, &settles, action) {
                    failures.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(error);
                }
            }
        })
    };

    for op in &ops {
        let outcome: Result<(), String> = match op.op.as_str() {
            "prompt" => {
                let input = prompt_input(op.text.as_ref(), op.messages.as_ref())?;
                agent.prompt(input).await.map_err(|e| e.to_string())
            }
            "continue" => agent.continue_run().await.map_err(|e| e.to_string()),
            "steer" | "followUp" => {
                let message =
                    op.message.as_ref().ok_or_else(|| ScenarioError(format!("{}: message required", op.op)))?;
                let message = parse_message(message)?;
                if op.op == "steer" {
                    agent.steer(message);
                } else {
                    agent.follow_up(message);
                }
                Ok(())
            }
            "reset" => agent.reset().map_err(|e| e.to_string()),
            "setTools" => {
                let tools = op.tools.as_ref().ok_or_else(|| ScenarioError("setTools: tools required".into()))?;
                agent.set_tools(setup.resolve_tools(tools)?);
                Ok(())
            }
            "state" => {
                trace.push(state_line(&agent));
                Ok(())
            }
            other => return Err(ScenarioError(format!("unknown op \"{other}\"")).into()),
        };
        if let Err(message) = outcome {
            trace.error(&message);
        }
        agent.wait_for_idle().await;
    }
    settles.join().await;
    trace.push(state_line(&agent));
    subscription.unsubscribe();
    if let Some(error) = failures.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(error.into());
    }
    Ok(trace.text())
}

#[cfg(test)]
mod tests {
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
            match crate::replay::replay_file(&path) {
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
