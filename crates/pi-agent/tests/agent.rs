//! Behaviour of the stateful agent under concurrency, aborts, failing listeners and drops.
//! Everything runs on the scripted faux provider with in-process tools; timeouts only guard
//! against hangs.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_agent::{Agent, AgentError, AgentOptions, QueueMode, SetHooks};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, AgentMessage, AgentTool, AgentToolResult, FnTool, StopReason, Tool, ToolSpec, UserMessage};
use serde_json::{json, Map, Value};
use tokio::sync::Notify;

const GUARD: Duration = Duration::from_secs(20);

async fn guarded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, future).await.expect("hang guard: the test did not finish")
}

fn text(reply: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(reply)], StopReason::Stop))
}

fn call(id: &str, name: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_tool_call(id, name, Map::new())], StopReason::ToolUse))
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec::new(Tool {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: json!({"type": "object", "properties": {}}).into(),
        constrained_sampling: None,
    })
    .expect("valid schema")
}

/// A tool that reports when it starts, then waits for `release` (or for cancellation when
/// `abortable`).
fn gate_tool(name: &str, started: Arc<Notify>, release: Arc<Notify>, abortable: bool) -> Arc<dyn AgentTool> {
    let label = name.to_owned();
    Arc::new(FnTool::new(spec(name), move |_args: Value, ctx| {
        let started = Arc::clone(&started);
        let release = Arc::clone(&release);
        let label = label.clone();
        async move {
            started.notify_one();
            if abortable {
                tokio::select! {
                    _ = release.notified() => {}
                    _ = ctx.cancel.cancelled() => return Err(format!("Tool {label} aborted").into()),
                }
            } else {
                release.notified().await;
            }
            Ok(AgentToolResult::text(format!("{label} done")))
        }
    }))
}

fn faux(responses: Vec<FauxResponse>) -> FauxProvider {
    let faux = FauxProvider::default();
    faux.set_responses(responses);
    faux
}

fn agent_with(faux: &FauxProvider, tools: Vec<Arc<dyn AgentTool>>) -> Agent {
    Agent::new(
        AgentOptions::new(Arc::new(faux.clone()))
            .with_model(faux.model())
            .with_system_prompt("Test.")
            .with_tools(tools),
    )
}

fn user(text: &str) -> AgentMessage {
    UserMessage::text(text).into()
}

fn last_assistant(agent: &Agent) -> pi_types::AssistantMessage {
    agent.messages().iter().rev().find_map(|m| m.as_assistant().cloned()).expect("an assistant message")
}

/// Records event type names.
fn record(agent: &Agent) -> (Arc<Mutex<Vec<&'static str>>>, pi_agent::Subscription) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let subscription = agent.subscribe_fn(move |event| sink.lock().unwrap().push(event.type_name()));
    (events, subscription)
}

#[test]
fn agent_is_clone_send_sync() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<Agent>();
    assert_traits::<pi_agent::WeakAgent>();
    fn assert_send<T: Send + 'static>() {}
    assert_send::<pi_agent::RunHandle>();
    assert_send::<pi_agent::Subscription>();
}

#[tokio::test]
async fn initial_state_and_reset_keep_the_replayed_system_baseline() {
    let faux = faux(vec![text("one")]);
    let agent = agent_with(&faux, vec![gate_tool("t", Arc::default(), Arc::default(), false)]);
    assert_eq!(agent.system_prompt(), "Test.");
    assert_eq!(agent.messages().len(), 1);
    guarded(agent.prompt("hi")).await.unwrap();
    assert_eq!(agent.messages().len(), 3);
    assert_eq!(last_assistant(&agent).thinking_level, Some(pi_types::ThinkingLevel::Off));
    agent.follow_up(user("later"));
    agent.reset().unwrap();
    assert!(!agent.has_queued_messages());
    assert_eq!(agent.messages().len(), 1);
    assert_eq!(agent.system_prompt(), "Test.");
    // No prompt, no tools: no leading system message; continue has nothing to continue from.
    let bare = Agent::new(AgentOptions::new(Arc::new(faux.clone())));
    assert!(bare.messages().is_empty());
    assert_eq!(bare.model().id, "unknown");
    assert_eq!(guarded(bare.continue_run()).await, Err(AgentError::NoMessagesToContinue));
    assert_eq!(guarded(agent.continue_run()).await, Err(AgentError::NoMessagesToContinue));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_rejected_while_a_run_is_active() {
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let faux = faux(vec![call("c1", "gate"), text("done")]);
    let agent = agent_with(&faux, vec![gate_tool("gate", Arc::clone(&started), Arc::clone(&release), false)]);
    let run = agent.prompt("go");
    guarded(started.notified()).await;
    assert!(agent.is_streaming());
    assert_eq!(agent.pending_tool_calls().iter().collect::<Vec<_>>(), vec!["c1"]);
    assert_eq!(guarded(agent.prompt("again")).await, Err(AgentError::AlreadyProcessingPrompt));
    assert_eq!(guarded(agent.continue_run()).await, Err(AgentError::AlreadyProcessingContinue));
    assert_eq!(agent.reset(), Err(AgentError::AlreadyProcessingReset));
    // A refused call does not disturb the active run.
    release.notify_one();
    guarded(run).await.unwrap();
    assert!(!agent.is_streaming());
    assert!(agent.pending_tool_calls().is_empty());
    assert_eq!(last_assistant(&agent).text(), "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_from_another_task_while_a_tool_runs() {
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let faux = faux(vec![call("c1", "gate"), text("after tool"), text("after steering")]);
    let agent = agent_with(&faux, vec![gate_tool("gate", Arc::clone(&started), Arc::clone(&release), false)]);
    let run = agent.prompt("go");
    let other = {
        let agent = agent.clone();
        let started = Arc::clone(&started);
        let release = Arc::clone(&release);
        tokio::spawn(async move {
            started.notified().await;
            agent.steer(user("steered"));
            assert!(agent.has_queued_messages());
            release.notify_one();
        })
    };
    guarded(run).await.unwrap();
    guarded(other).await.unwrap();
    let roles: Vec<String> = agent.messages().iter().map(|m| m.role().to_owned()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "toolResult", "user", "assistant"]);
    assert_eq!(last_assistant(&agent).text(), "after tool");
    // The steering message came after the tool turn; one response is still queued.
    assert_eq!(faux.pending_response_count(), 1);
    assert!(!agent.has_queued_messages());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_from_another_task_while_a_tool_runs() {
    let started = Arc::new(Notify::new());
    let faux = faux(vec![call("c1", "gate"), text("never")]);
    let agent = agent_with(&faux, vec![gate_tool("gate", Arc::clone(&started), Arc::default(), true)]);
    let run = agent.prompt("go");
    let other = {
        let agent = agent.clone();
        let started = Arc::clone(&started);
        tokio::spawn(async move {
            started.notified().await;
            agent.abort();
        })
    };
    guarded(run).await.unwrap();
    guarded(other).await.unwrap();
    let messages = agent.messages();
    let result = messages.iter().find_map(|m| match m {
        AgentMessage::ToolResult(result) => Some((**result).clone()),
        _ => None,
    });
    let result = result.expect("tool result");
    assert!(result.is_error);
    let last = last_assistant(&agent);
    assert_eq!(last.stop_reason, StopReason::Aborted);
    assert_eq!(agent.error_message().as_deref(), last.error_message.as_deref());
    assert!(!agent.is_streaming());
    assert!(agent.cancellation_token().is_none());
}

#[tokio::test]
async fn abort_from_a_listener_while_streaming() {
    let faux = faux(vec![text("a long answer that streams in many small chunks"), text("next")]);
    let agent = agent_with(&faux, vec![]);
    let weak = agent.downgrade();
    let updates = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&updates);
    let _abort = agent.subscribe(move |event, cancel| {
        let weak = weak.clone();
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            if let AgentEvent::MessageUpdate { .. } = event {
                if seen.fetch_add(1, Ordering::SeqCst) == 2 {
                    let agent = weak.upgrade().expect("agent alive");
                    // State is readable from inside a listener.
                    assert!(agent.is_streaming());
                    assert!(agent.streaming_message().is_some());
                    agent.abort();
                    assert!(cancel.is_cancelled());
                }
            }
            Ok(())
        })
    });
    guarded(agent.prompt("go")).await.unwrap();
    let last = last_assistant(&agent);
    assert_eq!(last.stop_reason, StopReason::Aborted);
    assert!(!last.text().is_empty() && last.text().len() < "a long answer that streams in many small chunks".len());
    assert_eq!(agent.error_message().as_deref(), Some("Request was aborted"));
    // The next prompt runs normally and clears the error.
    guarded(agent.prompt("again")).await.unwrap();
    assert_eq!(last_assistant(&agent).text(), "next");
    assert_eq!(agent.error_message(), None);
}

#[tokio::test]
async fn a_failing_listener_fails_the_run_with_a_failure_message() {
    let faux = faux(vec![text("hello"), text("second")]);
    let agent = agent_with(&faux, vec![]);
    let failures = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&failures);
    let failing = agent.subscribe(move |event, _cancel| {
        let count = Arc::clone(&count);
        Box::pin(async move {
            let assistant_start = matches!(event, AgentEvent::MessageStart { message: AgentMessage::Assistant(_) });
            if assistant_start && count.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err("listener exploded".into());
            }
            Ok(())
        })
    });
    let (events, _recorder) = record(&agent);
    guarded(agent.prompt("go")).await.unwrap();
    // The failure (and not the response the listener choked on) ends the transcript.
    let last = last_assistant(&agent);
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(last.error_message.as_deref(), Some("listener exploded"));
    assert_eq!(last.text(), "");
    assert_eq!(last.thinking_level, None);
    assert_eq!(agent.error_message().as_deref(), Some("listener exploded"));
    let events = events.lock().unwrap().clone();
    assert_eq!(&events[events.len() - 4..], ["message_start", "message_end", "turn_end", "agent_end"]);
    assert!(!agent.is_streaming());
    failing.unsubscribe();
    guarded(agent.prompt("again")).await.unwrap();
    assert_eq!(last_assistant(&agent).text(), "second");
}

#[tokio::test]
async fn a_listener_failing_again_while_the_failure_is_reported_fails_the_prompt() {
    let faux = faux(vec![text("hello"), text("second")]);
    let agent = agent_with(&faux, vec![]);
    let always = agent.subscribe(|event, _cancel| {
        let fail = matches!(event, AgentEvent::MessageStart { message: AgentMessage::Assistant(_) });
        Box::pin(async move {
            if fail {
                return Err("always failing".into());
            }
            Ok(())
        })
    });
    assert_eq!(guarded(agent.prompt("go")).await, Err(AgentError::Listener("always failing".into())));
    assert!(!agent.is_streaming());
    always.unsubscribe();
    guarded(agent.prompt("again")).await.unwrap();
    assert_eq!(last_assistant(&agent).text(), "second");
}

#[tokio::test]
async fn a_panicking_listener_is_a_failing_listener() {
    let faux = faux(vec![text("hello")]);
    let agent = agent_with(&faux, vec![]);
    let fired = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&fired);
    let _panicking = agent.subscribe_fn(move |event| {
        if matches!(event, AgentEvent::TurnEnd { .. }) && count.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("listener panicked");
        }
    });
    guarded(agent.prompt("go")).await.unwrap();
    assert_eq!(agent.error_message().as_deref(), Some("listener panicked"));
    let last = last_assistant(&agent);
    assert_eq!(last.stop_reason, StopReason::Error);
    // The completed reply stays in the transcript before the failure message.
    let messages = agent.messages();
    assert_eq!(messages[messages.len() - 2].as_assistant().map(|m| m.text()), Some("hello".to_owned()));
    assert!(!agent.is_streaming());
}

#[tokio::test]
async fn a_failing_hook_ends_the_run_as_the_reference() {
    let faux = faux(vec![text("hello")]);
    let agent = agent_with(&faux, vec![]);
    agent.update_options(|options| options.transform_context(|_messages, _cancel| async { Err("no context".into()) }));
    let (events, _recorder) = record(&agent);
    guarded(agent.prompt("go")).await.unwrap();
    let last = last_assistant(&agent);
    assert_eq!((last.stop_reason, last.error_message.as_deref()), (StopReason::Error, Some("no context")));
    assert_eq!((last.api.as_str(), last.model.as_str()), ("faux", "faux-1"));
    let events = events.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end"
        ]
    );
    // The script was not touched: no request was made.
    assert_eq!(faux.pending_response_count(), 1);
}

#[tokio::test]
async fn dropping_the_prompt_future_aborts_and_the_agent_settles() {
    let started = Arc::new(Notify::new());
    let faux = faux(vec![call("c1", "gate"), text("never"), text("next")]);
    let agent = agent_with(&faux, vec![gate_tool("gate", Arc::clone(&started), Arc::default(), true)]);
    let (events, _recorder) = record(&agent);
    let run = agent.prompt("go");
    guarded(started.notified()).await;
    drop(run);
    guarded(agent.wait_for_idle()).await;
    assert!(!agent.is_streaming());
    assert_eq!(events.lock().unwrap().last(), Some(&"agent_end"));
    assert_eq!(last_assistant(&agent).stop_reason, StopReason::Aborted);
    guarded(agent.prompt("again")).await.unwrap();
    assert_eq!(last_assistant(&agent).text(), "next");
}

#[tokio::test]
async fn a_detached_run_keeps_going() {
    let faux = faux(vec![text("background")]);
    let agent = agent_with(&faux, vec![]);
    agent.prompt("go").detach();
    guarded(agent.wait_for_idle()).await;
    assert_eq!(last_assistant(&agent).text(), "background");
}

struct Alive(Arc<AtomicUsize>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn dropping_the_agent_mid_run_leaks_no_task() {
    let alive = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(Notify::new());
    let tool: Arc<dyn AgentTool> = {
        let alive = Arc::clone(&alive);
        let started = Arc::clone(&started);
        // Ignores cancellation and never finishes on its own.
        Arc::new(FnTool::new(spec("stuck"), move |_args: Value, _ctx| {
            alive.fetch_add(1, Ordering::SeqCst);
            let guard = Alive(Arc::clone(&alive));
            let started = Arc::clone(&started);
            async move {
                let _guard = guard;
                started.notify_one();
                std::future::pending::<()>().await;
                Ok(AgentToolResult::text("unreachable"))
            }
        }))
    };
    let faux = faux(vec![call("c1", "stuck")]);
    let stream_fn = Arc::new(faux.clone());
    let agent = Agent::new(AgentOptions::new(stream_fn.clone()).with_model(faux.model()).with_tools([tool]));
    let run = agent.prompt("go");
    guarded(started.notified()).await;
    assert_eq!(alive.load(Ordering::SeqCst), 1);
    let baseline = Arc::strong_count(&stream_fn);
    assert!(baseline > 1, "the run holds the stream function");
    drop(agent);
    assert_eq!(guarded(run).await, Err(AgentError::AgentDropped));
    guarded(async {
        while alive.load(Ordering::SeqCst) != 0 || Arc::strong_count(&stream_fn) != 1 {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn listeners_are_awaited_in_order_and_settle_before_idle() {
    let faux = faux(vec![text("hi")]);
    let agent = agent_with(&faux, vec![]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let subscriptions: Vec<_> = (0..2)
        .map(|n| {
            let log = Arc::clone(&log);
            agent.subscribe(move |event, _cancel| {
                let log = Arc::clone(&log);
                let end = matches!(event, AgentEvent::AgentEnd { .. });
                Box::pin(async move {
                    if end {
                        // Yield a few times: the run must still wait for this listener.
                        for _ in 0..10 {
                            tokio::task::yield_now().await;
                        }
                        log.lock().unwrap().push(n);
                    }
                    Ok(())
                })
            })
        })
        .collect();
    let run = agent.prompt("go");
    guarded(agent.wait_for_idle()).await;
    assert_eq!(*log.lock().unwrap(), [0, 1]);
    guarded(run).await.unwrap();
    drop(subscriptions);
}

#[tokio::test]
async fn continue_drains_the_queues_by_mode() {
    let faux = faux(vec![text("first"), text("steered"), text("followed")]);
    let agent = agent_with(&faux, vec![]);
    guarded(agent.prompt("go")).await.unwrap();
    assert_eq!(guarded(agent.continue_run()).await, Err(AgentError::ContinueFromAssistant));
    agent.set_steering_mode(QueueMode::All);
    agent.steer(user("s1"));
    agent.steer(user("s2"));
    agent.follow_up(user("f1"));
    assert_eq!(agent.peek_queued_messages().len(), 2);
    guarded(agent.continue_run()).await.unwrap();
    // Both steering messages went in as one prompt; the follow-up ran when the agent would stop.
    let roles: Vec<String> = agent.messages().iter().map(|m| m.role().to_owned()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "user", "assistant", "user", "assistant"]);
    assert!(!agent.has_queued_messages());
}

#[tokio::test]
async fn listeners_added_or_removed_during_delivery_follow_set_iteration() {
    let faux = faux(vec![text("hi")]);
    let agent = agent_with(&faux, vec![]);
    let late_events = Arc::new(Mutex::new(Vec::new()));
    let removed_events = Arc::new(AtomicUsize::new(0));
    let removed_slot: Arc<Mutex<Option<pi_agent::Subscription>>> = Arc::default();
    let first = {
        let weak = agent.downgrade();
        let late_events = Arc::clone(&late_events);
        let removed_slot = Arc::clone(&removed_slot);
        agent.subscribe_fn(move |event| {
            if matches!(event, AgentEvent::AgentStart) {
                let agent = weak.upgrade().unwrap();
                let sink = Arc::clone(&late_events);
                agent.subscribe_fn(move |event| sink.lock().unwrap().push(event.type_name()));
                if let Some(removed) = removed_slot.lock().unwrap().take() {
                    removed.unsubscribe();
                }
            }
        })
    };
    let counter = Arc::clone(&removed_events);
    *removed_slot.lock().unwrap() = Some(agent.subscribe_fn(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    guarded(agent.prompt("go")).await.unwrap();
    assert_eq!(removed_events.load(Ordering::SeqCst), 0);
    assert_eq!(late_events.lock().unwrap().first(), Some(&"agent_start"));
    first.unsubscribe();
}

#[tokio::test]
async fn prepare_next_turn_is_looked_up_when_a_turn_is_prepared() {
    let faux = faux(vec![call("c1", "gate"), text("done"), call("c2", "gate"), text("done again")]);
    let release = Arc::new(Notify::new());
    let agent = agent_with(&faux, vec![gate_tool("gate", Arc::default(), Arc::clone(&release), false)]);
    release.notify_one();
    let first_calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&first_calls);
    agent.update_options(|options| {
        options.prepare_next_turn(move |_turn, cancel| {
            counter.fetch_add(1, Ordering::SeqCst);
            assert!(!cancel.is_cancelled());
            async { Ok(None) }
        })
    });
    guarded(agent.prompt("go")).await.unwrap();
    assert_eq!(first_calls.load(Ordering::SeqCst), 1);
    // A replaced hook is the one the next run calls; it sees the completed turn.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    agent.update_options(|options| {
        options.prepare_next_turn(move |turn, _cancel| {
            sink.lock().unwrap().push(turn.tool_results.len());
            async { Ok(Some(pi_loop::TurnUpdate { messages: Some(vec![user("injected")]), ..Default::default() })) }
        })
    });
    release.notify_one();
    guarded(agent.prompt("again")).await.unwrap();
    assert_eq!(first_calls.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().unwrap(), [1]);
    let messages = agent.messages();
    assert_eq!(messages[messages.len() - 2].role(), "user");
}

#[tokio::test]
async fn the_streaming_message_follows_every_update() {
    let mut arguments = Map::new();
    arguments.insert("city".into(), json!("Oslo, with a fairly long name to stream"));
    arguments.insert("days".into(), json!(3));
    let response = faux_assistant_message(
        vec![
            pi_providers::faux::faux_thinking("thinking about the weather for a while"),
            faux_text("Let me check the weather for you, one moment."),
            faux_tool_call("w1", "weather", arguments),
        ],
        StopReason::ToolUse,
    );
    let faux = faux(vec![FauxResponse::Message(response), text("done")]);
    let tool: Arc<dyn AgentTool> =
        Arc::new(FnTool::new(spec("weather"), |_args: Value, _ctx| async { Ok(AgentToolResult::text("sunny")) }));
    let agent = agent_with(&faux, vec![tool]);
    let weak = agent.downgrade();
    let checked = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&checked);
    let mismatches = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&mismatches);
    let _check = agent.subscribe_fn(move |event| {
        let agent = weak.upgrade().unwrap();
        match event {
            AgentEvent::MessageUpdate { message, assistant_message_event } => {
                count.fetch_add(1, Ordering::SeqCst);
                let streaming = agent.streaming_message();
                if streaming.as_ref().and_then(|m| m.as_assistant()) != Some(&**message) {
                    sink.lock().unwrap().push(assistant_message_event.type_name());
                }
            }
            AgentEvent::MessageEnd { .. } | AgentEvent::AgentEnd { .. } => {
                assert!(agent.streaming_message().is_none());
            }
            _ => {}
        }
    });
    guarded(agent.prompt("weather?")).await.unwrap();
    assert!(checked.load(Ordering::SeqCst) > 10);
    assert!(mismatches.lock().unwrap().is_empty(), "{:?}", mismatches.lock().unwrap());
}
