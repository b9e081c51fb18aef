//! Event-grammar properties over random scripts, at the loop and the agent level.
//!
//! Each case is a random conformance scenario (the contract in `fixtures/conformance/README.md`):
//! text, thinking and tool calls to known and unknown tools; tools that succeed, fail, stall
//! (abortable or not), send updates and terminate; random `beforeToolCall` / `afterToolCall` /
//! `finishTurn` decisions (including throwing hooks); steering and follow-up injections; an
//! abort at a random event. The replayed trace must obey `pi_testkit::grammar` and end every
//! run. The checker itself is checked against every vendored golden, and against corrupted
//! goldens it must reject.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use pi_testkit::grammar::check_runs;
use pi_testkit::replay::replay;
use pi_testkit::scenario::Scenario;
use pi_types::AgentEvent;
use proptest::prelude::*;
use serde_json::{json, Value};

const EVENT_TYPES: [&str; 9] = [
    "agent_start",
    "turn_start",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "turn_end",
];

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 0})
}

fn tool_behavior() -> impl Strategy<Value = Value> {
    (
        "[a-z ]{0,8}",
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of("[a-z]{1,6}"),
        prop_oneof![4 => Just(0u64), 1 => 1u64..4],
        any::<bool>(),
        prop::collection::vec("[a-z]{0,4}", 0..3),
        any::<bool>(),
    )
        .prop_map(|(text, is_error, terminate, throw, delay, abortable, updates, echo)| {
            let mut behavior = json!({"text": text, "delayMs": delay, "abortable": abortable, "echoArgs": echo});
            if let Some(flag) = is_error {
                behavior["isError"] = json!(flag);
            }
            if let Some(flag) = terminate {
                behavior["terminate"] = json!(flag);
            }
            if let Some(message) = throw {
                behavior["throw"] = json!(message);
            }
            behavior["updates"] = Value::Array(updates.into_iter().map(|t| json!({"text": t})).collect());
            behavior
        })
}

fn tools() -> impl Strategy<Value = Vec<Value>> {
    (tool_behavior(), tool_behavior(), any::<bool>()).prop_map(|(a, b, sequential)| {
        let parameters = json!({"type": "object", "properties": {"n": {"type": "number"}}});
        let mut beta = json!({"name": "beta", "description": "b", "parameters": parameters, "behavior": b});
        if sequential {
            beta["executionMode"] = json!("sequential");
        }
        vec![json!({"name": "alpha", "description": "a", "parameters": parameters, "behavior": a}), beta]
    })
}

#[derive(Clone, Debug)]
enum Block {
    Text(String),
    Thinking(String),
    Call(&'static str, Value),
}

fn block() -> impl Strategy<Value = Block> {
    let args = prop_oneof![
        (0i64..100).prop_map(|n| json!({"n": n})),
        Just(json!({"n": "7"})),
        Just(json!({"n": "seven"})),
        Just(json!({})),
    ];
    prop_oneof![
        3 => "[a-z ]{0,12}".prop_map(Block::Text),
        1 => "[a-z ]{0,8}".prop_map(Block::Thinking),
        3 => (prop::sample::select(vec!["alpha", "beta", "ghost"]), args).prop_map(|(n, a)| Block::Call(n, a)),
    ]
}

fn responses() -> impl Strategy<Value = Vec<Value>> {
    let response = (prop::collection::vec(block(), 0..4), 0u8..10);
    prop::collection::vec(response, 1..6).prop_map(|responses| {
        responses
            .into_iter()
            .enumerate()
            .map(|(r, (blocks, pick))| {
                let has_call = blocks.iter().any(|b| matches!(b, Block::Call(..)));
                let content: Vec<Value> = blocks
                    .into_iter()
                    .enumerate()
                    .map(|(i, b)| match b {
                        Block::Text(text) => json!({"type": "text", "text": text}),
                        Block::Thinking(thinking) => json!({"type": "thinking", "thinking": thinking}),
                        Block::Call(name, arguments) => {
                            json!({"type": "toolCall", "id": format!("c{r}_{i}"), "name": name, "arguments": arguments})
                        }
                    })
                    .collect();
                let stop = match pick {
                    0 => "error",
                    1 => "length",
                    2 => "aborted",
                    3 => "stop",
                    _ if has_call => "toolUse",
                    _ => "stop",
                };
                let mut response = json!({"content": content, "stopReason": stop});
                if matches!(stop, "error" | "aborted") {
                    response["errorMessage"] = json!("scripted failure");
                }
                response
            })
            .collect()
    })
}

fn config() -> impl Strategy<Value = Value> {
    let before = prop_oneof![
        Just(json!({"tool": "alpha", "block": true, "reason": "no alpha"})),
        Just(json!({"tool": "beta", "terminate": true})),
        Just(json!({"block": true})),
        Just(json!({"tool": "alpha", "throw": "before failed"})),
    ];
    let after = prop_oneof![
        Just(json!({"tool": "alpha", "content": [{"type": "text", "text": "rewritten"}]})),
        Just(json!({"isError": true})),
        Just(json!({"tool": "beta", "terminate": true})),
        Just(json!({"tool": "beta", "throw": "after failed"})),
    ];
    let finish = (1u64..4, prop_oneof![Just("end"), Just("continue"), Just("throw")]).prop_map(|(turn, action)| {
        if action == "throw" {
            json!({"turn": turn, "throw": "finish failed"})
        } else {
            json!({"turn": turn, "action": action})
        }
    });
    (
        any::<bool>(),
        prop::option::of(prop::collection::vec(before, 1..3)),
        prop::option::of(prop::collection::vec(after, 1..3)),
        prop::option::of(prop::collection::vec(finish, 1..3)),
    )
        .prop_map(|(sequential, before, after, finish)| {
            let mut config = json!({"toolExecution": if sequential { "sequential" } else { "parallel" }});
            if let Some(rules) = before {
                config["beforeToolCall"] = Value::Array(rules);
            }
            if let Some(rules) = after {
                config["afterToolCall"] = Value::Array(rules);
            }
            if let Some(rules) = finish {
                config["finishTurn"] = Value::Array(rules);
            }
            config
        })
}

fn trigger() -> impl Strategy<Value = Value> {
    (prop::sample::select(EVENT_TYPES.to_vec()), 1u64..6).prop_map(|(event, nth)| json!({"event": event, "nth": nth}))
}

fn injections() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(
        (1u64..5, "[a-z]{1,6}").prop_map(|(poll, text)| json!({"poll": poll, "messages": [user(&text)]})),
        0..3,
    )
}

fn loop_scenario() -> impl Strategy<Value = Value> {
    (tools(), responses(), config(), injections(), injections(), prop::option::of(trigger()), 1u64..3).prop_map(
        |(tools, responses, config, steering, follow_ups, abort, token_size)| {
            let mut scenario = json!({
                "name": "prop-loop",
                "level": "loop",
                "tokenSize": token_size,
                "tools": tools,
                "responses": responses,
                "config": config,
                "prompts": [user("go")],
                "steering": steering,
                "followUps": follow_ups,
            });
            if let Some(on) = abort {
                scenario["actions"] = json!([{"on": on, "do": "abort"}]);
            }
            scenario
        },
    )
}

fn agent_action() -> impl Strategy<Value = Value> {
    (trigger(), prop::sample::select(vec!["abort", "steer", "followUp", "prompt", "continue"]), "[a-z]{1,6}").prop_map(
        |(on, action, text)| match action {
            "steer" | "followUp" => json!({"on": on, "do": action, "message": user(&text)}),
            "prompt" => json!({"on": on, "do": action, "text": text}),
            _ => json!({"on": on, "do": action}),
        },
    )
}

fn agent_op() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => "[a-z]{1,6}".prop_map(|text| json!({"op": "prompt", "text": text})),
        1 => Just(json!({"op": "continue"})),
        1 => "[a-z]{1,6}".prop_map(|text| json!({"op": "steer", "message": user(&text)})),
        1 => "[a-z]{1,6}".prop_map(|text| json!({"op": "followUp", "message": user(&text)})),
        1 => Just(json!({"op": "reset"})),
        1 => Just(json!({"op": "state"})),
    ]
}

fn agent_scenario() -> impl Strategy<Value = Value> {
    (
        tools(),
        responses(),
        config(),
        prop::collection::vec(agent_op(), 1..4),
        prop::collection::vec(agent_action(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(tools, responses, config, ops, actions, all)| {
            let mut config = config;
            let mode = if all { "all" } else { "one-at-a-time" };
            config["steeringMode"] = json!(mode);
            config["followUpMode"] = json!(mode);
            json!({
                "name": "prop-agent",
                "level": "agent",
                "systemPrompt": "Be brief.",
                "tools": tools,
                "responses": responses,
                "config": config,
                "ops": ops,
                "actions": actions,
            })
        })
}

/// The `event` lines of a trace.
fn events_of(trace: &str) -> Vec<AgentEvent> {
    trace
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["kind"] == "event")
        .map(|record| serde_json::from_value(record["event"].clone()).unwrap())
        .collect()
}

fn replay_checked(scenario: &Value) -> Result<(String, usize), TestCaseError> {
    let parsed = Scenario::parse(&scenario.to_string(), None)
        .map_err(|e| TestCaseError::fail(format!("generated an invalid scenario: {e}\n{scenario}")))?;
    let trace = replay(&parsed).map_err(|e| TestCaseError::fail(format!("replay failed: {e}\n{scenario}")))?;
    let events = events_of(&trace);
    let failed = trace.lines().last().is_some_and(|line| line.starts_with(r#"{"kind":"error""#));
    let runs = match check_runs(&events) {
        Ok(runs) => runs,
        // A loop whose hook throws rejects without `agent_end` (as the reference's does): its
        // events must still be a correct prefix of a run.
        Err(error) if failed && error.index == events.len() => 0,
        Err(error) => {
            return Err(TestCaseError::fail(format!("grammar: {error}\nscenario: {scenario}\ntrace:\n{trace}")))
        }
    };
    Ok((trace, runs))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn loop_runs_obey_the_grammar(scenario in loop_scenario()) {
        let (trace, runs) = replay_checked(&scenario)?;
        prop_assert!(runs <= 1);
        let last: Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
        // The run returns its messages (or fails with an error line), always as the last line.
        prop_assert!(last["kind"] == "result" || last["kind"] == "error", "{}", last);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn agent_runs_obey_the_grammar(scenario in agent_scenario()) {
        let (trace, _) = replay_checked(&scenario)?;
        let last: Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
        prop_assert_eq!(&last["kind"], "state");
        prop_assert_eq!(&last["isStreaming"], false);
    }
}

fn goldens() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut paths: Vec<PathBuf> = ["conformance/golden", "conformance-extra/golden"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    paths
}

/// The checker accepts every reference trace.
#[test]
fn every_golden_obeys_the_grammar() {
    let paths = goldens();
    assert!(paths.len() >= 27, "{} goldens", paths.len());
    for path in &paths {
        let events = events_of(&std::fs::read_to_string(path).unwrap());
        let runs = check_runs(&events).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // A scenario may end without any run (an agent scenario of state ops only).
        assert!(runs >= 1 || events.is_empty(), "{}", path.display());
    }
}

/// The checker is not vacuous: dropping any single structural event of a golden is caught.
#[test]
fn corrupted_goldens_are_rejected() {
    let structural = ["agent_start", "agent_end", "turn_start", "turn_end", "message_start", "message_end"];
    let mut rejected = 0;
    for path in goldens() {
        let events = events_of(&std::fs::read_to_string(&path).unwrap());
        for (index, event) in events.iter().enumerate() {
            if !structural.contains(&event.type_name()) && event.type_name() != "tool_execution_end" {
                continue;
            }
            let mut corrupted = events.clone();
            corrupted.remove(index);
            assert!(
                check_runs(&corrupted).is_err(),
                "{}: dropping event {index} ({}) passed",
                path.display(),
                event.type_name()
            );
            rejected += 1;
        }
    }
    assert!(rejected > 100, "{rejected}");
}

/// What a Rust tool does in [`loop_with_rust_tools_obeys_the_grammar`].
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    Succeed,
    Fail,
    Panic,
    Stall,
    Update,
    Terminate,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop::sample::select(vec![
        Behaviour::Succeed,
        Behaviour::Fail,
        Behaviour::Panic,
        Behaviour::Stall,
        Behaviour::Update,
        Behaviour::Terminate,
    ])
}

fn rust_tool(name: &str, behaviour: Behaviour) -> std::sync::Arc<dyn pi_types::AgentTool> {
    use pi_types::{AgentToolResult, FnTool, Tool, ToolSpec};
    let spec = ToolSpec::new(Tool {
        name: name.into(),
        description: "t".into(),
        parameters: json!({"type": "object", "properties": {}}).into(),
        constrained_sampling: None,
    })
    .unwrap();
    std::sync::Arc::new(FnTool::new(spec, move |_args, ctx| async move {
        match behaviour {
            Behaviour::Succeed => Ok(AgentToolResult::text("ok")),
            Behaviour::Fail => Err("tool failed".into()),
            Behaviour::Panic => panic!("tool panicked"),
            Behaviour::Stall => {
                // Stalls until the run is cancelled, or a while.
                tokio::select! {
                    () = ctx.cancel.cancelled() => Err("cancelled".into()),
                    () = tokio::time::sleep(std::time::Duration::from_millis(2)) => Ok(AgentToolResult::text("late")),
                }
            }
            Behaviour::Update => {
                (ctx.on_update)(AgentToolResult::text("progress"));
                Ok(AgentToolResult::text("updated"))
            }
            Behaviour::Terminate => Ok(AgentToolResult { terminate: Some(true), ..AgentToolResult::text("bye") }),
        }
    }))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Rust tools that panic or stall, with a cancellation at a random event (or none).
    #[test]
    fn loop_with_rust_tools_obeys_the_grammar(
        behaviours in prop::collection::vec(behaviour(), 3),
        turns in prop::collection::vec(prop::collection::vec(0usize..4, 0..4), 1..4),
        cancel_at in prop::option::of(0usize..40),
        sequential in any::<bool>(),
    ) {
        use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
        use pi_types::{AgentMessage, StopReason, ToolExecutionMode, UserMessage};
        let names = ["t0", "t1", "t2", "unknown"];
        let responses: Vec<FauxResponse> = turns
            .iter()
            .enumerate()
            .map(|(turn, calls)| {
                let mut content = vec![faux_text(format!("turn {turn}"))];
                for (i, tool) in calls.iter().enumerate() {
                    content.push(faux_tool_call(format!("c{turn}_{i}"), names[*tool], serde_json::Map::new()));
                }
                let stop = if calls.is_empty() { StopReason::Stop } else { StopReason::ToolUse };
                FauxResponse::Message(faux_assistant_message(content, stop))
            })
            .collect();
        let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
        faux.set_responses(responses);
        let tools = behaviours.iter().enumerate().map(|(i, b)| rust_tool(names[i], *b)).collect();
        let mut config = pi_loop::LoopConfig::new(faux.model(), std::sync::Arc::new(faux.clone()));
        if sequential {
            config.tool_execution = ToolExecutionMode::Sequential;
        }
        let cancel = pi_types::CancellationToken::new();
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (seen, trigger) = (std::sync::Arc::clone(&events), cancel.clone());
        let sink = pi_loop::FnSink(move |event: &AgentEvent| {
            let mut seen = seen.lock().unwrap();
            seen.push(event.clone());
            if Some(seen.len()) == cancel_at {
                trigger.cancel();
            }
        });
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let prompts = vec![AgentMessage::from(UserMessage::text("go"))];
        let result = runtime.block_on(pi_loop::run_agent_loop(
            prompts,
            pi_loop::AgentContext::new(vec![], tools),
            config,
            std::sync::Arc::new(sink),
            cancel,
        ));
        prop_assert!(result.is_ok(), "{:?}", result.err());
        let events = events.lock().unwrap();
        let runs = check_runs(&events).map_err(|e| TestCaseError::fail(format!("{e}: {events:#?}")))?;
        prop_assert_eq!(runs, 1);
        // Every tool call of the transcript has exactly one result (none lost, none doubled).
        let messages = result.unwrap();
        let calls: Vec<String> = messages
            .iter()
            .filter_map(AgentMessage::as_assistant)
            .filter(|m| m.stop_reason == StopReason::ToolUse)
            .flat_map(|m| m.tool_calls().map(|c| c.id.to_string()).collect::<Vec<_>>())
            .collect();
        for id in &calls {
            let results = messages
                .iter()
                .filter(|m| matches!(m, AgentMessage::ToolResult(r) if r.tool_call_id == id))
                .count();
            prop_assert_eq!(results, 1, "results for {}", id);
        }
    }
}
