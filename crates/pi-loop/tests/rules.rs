//! Loop rules that no conformance scenario pins down.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use pi_loop::{
    agent_loop, run_agent_loop, run_tool_call, AfterToolCallResult, AgentContext, AgentEventSink, BeforeToolCallResult,
    FnSink, LoopConfig, LoopError, RunToolCallOptions, SetHooks, TurnDecision,
};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
use pi_types::CancellationToken;
use pi_types::{
    AgentEvent, AgentMessage, AgentTool, AgentToolResult, AssistantMessage, AssistantMessageEvent,
    AssistantMessageEventStream, FnTool, Model, StopReason, StreamOptions, Tool, ToolCall, ToolExecutionMode,
    ToolResultMessage, ToolSpec, TranscriptContext, UserContent, UserMessage,
};
use serde_json::{json, Value};

fn args(value: Value) -> pi_types::JsonObject {
    value.as_object().cloned().unwrap()
}

fn tool_response(calls: &[(&str, &str)]) -> FauxResponse {
    let content = calls.iter().map(|(id, name)| faux_tool_call(*id, *name, args(json!({})))).collect();
    FauxResponse::Message(faux_assistant_message(content, StopReason::ToolUse))
}

fn text_response(text: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(text)], StopReason::Stop))
}

fn faux(responses: Vec<FauxResponse>) -> FauxProvider {
    let faux = FauxProvider::new(FauxOptions { record_requests: true, ..FauxOptions::default().with_token_size(1) });
    faux.set_responses(responses);
    faux
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec::new(Tool {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: json!({"type": "object", "properties": {}}).into(),
        constrained_sampling: None,
    })
    .unwrap()
}

fn echo_tool(name: &str) -> Arc<dyn AgentTool> {
    Arc::new(FnTool::new(spec(name), |_args, _ctx| async { Ok(AgentToolResult::text("ok")) }))
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<AgentEvent>>,
}

impl Recorder {
    fn types(&self) -> Vec<&'static str> {
        self.events.lock().unwrap().iter().map(AgentEvent::type_name).collect()
    }

    fn tool_ends(&self) -> Vec<(String, String)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolExecutionEnd { tool_call_id, result, .. } => {
                    let text = match &result.content[0] {
                        UserContent::Text(t) => t.text.clone(),
                        UserContent::Image(_) => String::new(),
                    };
                    Some((tool_call_id.to_string(), text))
                }
                _ => None,
            })
            .collect()
    }
}

impl AgentEventSink for Recorder {
    fn deliver(&self, event: AgentEvent, _info: pi_loop::EventInfo) -> pi_loop::Delivery {
        self.events.lock().unwrap().push(event);
        pi_loop::Delivery::done()
    }
}

fn prompt() -> Vec<AgentMessage> {
    vec![UserMessage::text("go").into()]
}

fn results(messages: &[AgentMessage]) -> Vec<&ToolResultMessage> {
    messages
        .iter()
        .filter_map(|m| match m {
            AgentMessage::ToolResult(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

fn result_text(result: &ToolResultMessage) -> &str {
    match &result.content[0] {
        UserContent::Text(t) => &t.text,
        UserContent::Image(_) => "",
    }
}

#[tokio::test]
async fn cancellation_before_preparation_gives_aborted_results_for_every_call() {
    let faux = faux(vec![tool_response(&[("a", "echo"), ("b", "echo")])]);
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    // Abort when the assistant message ends, before any tool is prepared.
    let sink = FnSink(move |event: &AgentEvent| {
        if matches!(event, AgentEvent::MessageEnd { message: AgentMessage::Assistant(_) }) {
            token.cancel();
        }
    });
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let context = AgentContext::new(vec![], vec![echo_tool("echo")]);
    let messages = run_agent_loop(prompt(), context, config, Arc::new(sink), cancel).await.unwrap();
    let results = results(&messages);
    assert_eq!(results.len(), 2, "every call gets a result");
    assert!(results.iter().all(|r| r.is_error && result_text(r) == "Operation aborted"));
}

#[tokio::test]
async fn cancellation_inside_before_tool_call_aborts_that_call() {
    let faux = faux(vec![tool_response(&[("a", "echo")]), text_response("done")]);
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).before_tool_call(move |_ctx, _cancel| {
        token.cancel();
        async { Ok(None) }
    });
    let context = AgentContext::new(vec![], vec![echo_tool("echo")]);
    let recorder = Arc::new(Recorder::default());
    let messages = run_agent_loop(prompt(), context, config, recorder.clone(), cancel).await.unwrap();
    assert_eq!(result_text(results(&messages)[0]), "Operation aborted");
    // The next request sees the cancelled token and ends as aborted.
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.stop_reason, StopReason::Aborted);
    assert_eq!(last.error_message.as_deref(), Some("Request was aborted"));
}

#[tokio::test]
async fn cancellation_before_parallel_execution_aborts_calls_not_yet_started() {
    let faux = faux(vec![tool_response(&[("a", "first"), ("b", "second")]), text_response("done")]);
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    // The first tool cancels the run synchronously when it starts.
    let first: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("first"), move |_args, _ctx| {
        token.cancel();
        async { Ok(AgentToolResult::text("first ran")) }
    }));
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let context = AgentContext::new(vec![], vec![first, echo_tool("second")]);
    let recorder = Arc::new(Recorder::default());
    let messages = run_agent_loop(prompt(), context, config, recorder.clone(), cancel).await.unwrap();
    let texts: Vec<&str> = results(&messages).into_iter().map(result_text).collect();
    assert_eq!(texts, ["first ran", "Operation aborted"]);
}

#[tokio::test]
async fn panicking_before_tool_call_becomes_an_error_result() {
    let faux = faux(vec![tool_response(&[("a", "echo"), ("b", "echo")]), text_response("done")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).before_tool_call(|ctx, _cancel| {
        if ctx.tool_call.id == "a" {
            panic!("hook exploded");
        }
        async { Ok(None) }
    });
    let context = AgentContext::new(vec![], vec![echo_tool("echo")]);
    let messages = run_agent_loop(prompt(), context, config, Arc::new(Recorder::default()), CancellationToken::new())
        .await
        .unwrap();
    let results = results(&messages);
    assert_eq!(results.len(), 2, "no tool call left without a result");
    assert!(results[0].is_error);
    assert_eq!(result_text(results[0]), "hook exploded");
    assert_eq!(result_text(results[1]), "ok");
}

#[tokio::test]
async fn panicking_tool_becomes_an_error_result() {
    let faux = faux(vec![tool_response(&[("a", "boom")]), text_response("done")]);
    let boom: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("boom"), |_args, _ctx| async {
        if true {
            panic!("{}", String::from("tool exploded"));
        }
        Ok(AgentToolResult::text("unreachable"))
    }));
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let context = AgentContext::new(vec![], vec![boom]);
    let messages = run_agent_loop(prompt(), context, config, Arc::new(Recorder::default()), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result_text(results(&messages)[0]), "The tool panicked: tool exploded");
}

#[tokio::test]
async fn panicking_finish_turn_fails_the_run_with_its_message() {
    let faux = faux(vec![text_response("hi")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()))
        .finish_turn(|_turn, _cancel| -> std::future::Ready<_> { panic!("finish exploded") });
    let recorder = Arc::new(Recorder::default());
    let error = run_agent_loop(prompt(), AgentContext::default(), config, recorder.clone(), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(error, LoopError::Hook("finish exploded".into()));
    assert!(!recorder.types().contains(&"turn_end"), "events after the failure never appear");
}

#[tokio::test]
async fn empty_block_reason_uses_the_default_text() {
    let faux = faux(vec![tool_response(&[("a", "echo")]), text_response("done")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).before_tool_call(|_ctx, _cancel| async {
        Ok(Some(BeforeToolCallResult { block: true, reason: Some(String::new()), terminate: None }))
    });
    let context = AgentContext::new(vec![], vec![echo_tool("echo")]);
    let messages = run_agent_loop(prompt(), context, config, Arc::new(Recorder::default()), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result_text(results(&messages)[0]), "Tool execution was blocked");
}

#[tokio::test]
async fn after_tool_call_null_fields_keep_the_original_and_content_drops_structured_content() {
    let faux = faux(vec![tool_response(&[("a", "rich"), ("b", "rich")]), text_response("done")]);
    let rich: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("rich"), |_args, _ctx| async {
        Ok(AgentToolResult {
            content: vec![UserContent::text("original")],
            details: Some(json!({"kept": true})),
            structured_content: Some(json!({"n": 1})),
            ..Default::default()
        })
    }));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).after_tool_call(|ctx, _cancel| {
        let replace_content = ctx.tool_call.id == "b";
        async move {
            Ok(Some(AfterToolCallResult {
                content: replace_content.then(|| vec![UserContent::text("replaced")]),
                details: Some(Value::Null),
                ..Default::default()
            }))
        }
    });
    let recorder_seen = Arc::clone(&seen);
    let sink = FnSink(move |event: &AgentEvent| {
        if let AgentEvent::ToolExecutionEnd { result, .. } = event {
            recorder_seen.lock().unwrap().push(result.clone());
        }
    });
    let context = AgentContext::new(vec![], vec![rich]);
    run_agent_loop(prompt(), context, config, Arc::new(sink), CancellationToken::new()).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].details, Some(json!({"kept": true})), "null keeps the original (??)");
    assert_eq!(seen[0].structured_content, Some(json!({"n": 1})));
    assert_eq!(seen[1].content, vec![UserContent::text("replaced")]);
    assert_eq!(seen[1].structured_content, None, "new content without structured content drops it");
}

#[tokio::test]
async fn empty_api_key_from_the_hook_falls_back_to_the_configured_key() {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&keys);
    let stream_fn = move |model: &Model, _ctx: TranscriptContext, options: StreamOptions| {
        seen.lock().unwrap().push(options.api_key.clone());
        let message = AssistantMessage {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            stop_reason: StopReason::Stop,
            ..Default::default()
        };
        AssistantMessageEventStream::from_events([AssistantMessageEvent::Done {
            reason: StopReason::Stop,
            message: Arc::new(message),
        }])
    };
    for (hook_key, expected) in [(Some(""), "configured"), (None, "configured"), (Some("fresh"), "fresh")] {
        let mut config =
            LoopConfig::new(Model::new("m").with_api("test").with_provider("test"), Arc::new(stream_fn.clone()));
        config.options.api_key = Some("configured".into());
        let hook_key = hook_key.map(str::to_owned);
        let config = config.get_api_key(move |_provider| std::future::ready(Ok(hook_key.clone())));
        run_agent_loop(
            prompt(),
            AgentContext::default(),
            config,
            Arc::new(Recorder::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(keys.lock().unwrap().pop().flatten().as_deref(), Some(expected));
    }
}

#[tokio::test]
async fn a_stream_without_terminal_event_ends_as_an_error_message() {
    let stream_fn = |model: &Model, _ctx: TranscriptContext, _options: StreamOptions| {
        let partial = Arc::new(AssistantMessage {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            content: vec![faux_text("half")],
            ..Default::default()
        });
        AssistantMessageEventStream::from_events([AssistantMessageEvent::Start { partial }])
    };
    let config = LoopConfig::new(Model::new("m").with_api("test").with_provider("test"), Arc::new(stream_fn));
    let recorder = Arc::new(Recorder::default());
    let messages =
        run_agent_loop(prompt(), AgentContext::default(), config, recorder.clone(), CancellationToken::new())
            .await
            .unwrap();
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(last.error_message.as_deref(), Some("Stream ended without a terminal event"));
    assert_eq!((last.api.as_str(), last.model.as_str()), ("test", "m"));
    assert_eq!(recorder.types().last(), Some(&"agent_end"));
}

#[tokio::test]
async fn parallel_ends_follow_completion_order_and_results_source_order() {
    let faux = faux(vec![tool_response(&[("slow", "wait"), ("fast", "wait")]), text_response("done")]);
    let wait: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("wait"), |_args, ctx| async move {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        if ctx.call_id == "slow" {
            // Finish only after the other call had a chance to finish.
            tokio::spawn(async move {
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                let _ = tx.send(());
            });
            let _ = rx.await;
        }
        Ok(AgentToolResult::text(ctx.call_id))
    }));
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let context = AgentContext::new(vec![], vec![wait]);
    let recorder = Arc::new(Recorder::default());
    let messages = run_agent_loop(prompt(), context, config, recorder.clone(), CancellationToken::new()).await.unwrap();
    let ends: Vec<String> = recorder.tool_ends().into_iter().map(|(id, _)| id).collect();
    assert_eq!(ends, ["fast", "slow"]);
    let ids: Vec<&str> = results(&messages).iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["slow", "fast"]);
}

#[tokio::test]
async fn updates_after_the_tool_returned_are_ignored() {
    let faux = faux(vec![tool_response(&[("a", "late")]), text_response("done")]);
    let keep = Arc::new(Mutex::new(None));
    let kept = Arc::clone(&keep);
    let late: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("late"), move |_args, ctx| {
        let kept = Arc::clone(&kept);
        async move {
            ctx.on_update.clone()(AgentToolResult::text("during"));
            *kept.lock().unwrap() = Some(ctx.on_update);
            Ok(AgentToolResult::text("done"))
        }
    }));
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let recorder = Arc::new(Recorder::default());
    let context = AgentContext::new(vec![], vec![late]);
    run_agent_loop(prompt(), context, config, recorder.clone(), CancellationToken::new()).await.unwrap();
    if let Some(update) = keep.lock().unwrap().take() {
        update(AgentToolResult::text("after"));
    }
    let updates = recorder.types().iter().filter(|t| **t == "tool_execution_update").count();
    assert_eq!(updates, 1);
}

#[tokio::test]
async fn should_stop_after_turn_ends_the_run() {
    let faux = faux(vec![tool_response(&[("a", "echo")]), text_response("never")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).should_stop_after_turn(|_turn| true);
    let context = AgentContext::new(vec![], vec![echo_tool("echo")]);
    run_agent_loop(prompt(), context, config, Arc::new(Recorder::default()), CancellationToken::new()).await.unwrap();
    assert_eq!(faux.call_count(), 1);
    assert_eq!(faux.pending_response_count(), 1);
}

#[tokio::test]
async fn finish_turn_continue_adds_one_context_only_request() {
    let faux = faux(vec![text_response("one"), text_response("two")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).finish_turn(|turn, _cancel| {
        let first = turn.new_messages.iter().filter(|m| m.as_assistant().is_some()).count() == 1;
        async move { Ok(first.then_some(TurnDecision::Continue)) }
    });
    let messages = run_agent_loop(
        prompt(),
        AgentContext::default(),
        config,
        Arc::new(Recorder::default()),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(faux.call_count(), 2);
    assert_eq!(messages.len(), 3);
}

#[tokio::test]
async fn continue_refuses_an_empty_transcript_and_a_last_assistant_message() {
    let faux = faux(vec![]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let sink = Arc::new(Recorder::default());
    let error = pi_loop::run_agent_loop_continue(
        AgentContext::default(),
        config.clone(),
        sink.clone(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.to_string(), "Cannot continue: no messages in context");
    let context = AgentContext::new(vec![faux_assistant_message(vec![], StopReason::Stop).into()], vec![]);
    let error =
        pi_loop::run_agent_loop_continue(context, config, sink.clone(), CancellationToken::new()).await.unwrap_err();
    assert_eq!(error.to_string(), "Cannot continue from message role: assistant");
}

#[tokio::test]
async fn stream_form_yields_the_same_events_and_the_new_messages() {
    let faux = faux(vec![text_response("hello")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let mut stream = agent_loop(prompt(), AgentContext::default(), config, CancellationToken::new());
    let mut types = Vec::new();
    while let Some(event) = stream.next().await {
        types.push(event.type_name());
    }
    assert_eq!(types.first(), Some(&"agent_start"));
    assert_eq!(types.last(), Some(&"agent_end"));
    assert_eq!(types.iter().filter(|t| **t == "message_update").count(), 4, "text_start, 2 deltas, text_end");
    assert_eq!(stream.result().await.unwrap().len(), 2);
}

#[tokio::test]
async fn exhausted_script_is_an_error_message_not_a_panic() {
    let faux = faux(vec![]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let messages = run_agent_loop(
        prompt(),
        AgentContext::default(),
        config,
        Arc::new(Recorder::default()),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.error_message.as_deref(), Some("No more faux responses queued"));
}

#[tokio::test]
async fn run_tool_call_runs_the_whole_pipeline_without_events() {
    let call = ToolCall { id: "x".into(), name: "echo".into(), ..Default::default() };
    let options = RunToolCallOptions {
        assistant_message: faux_assistant_message(vec![], StopReason::ToolUse),
        context: AgentContext::new(vec![], vec![echo_tool("echo")]),
        tools: None,
        hooks: Default::default(),
        cancel: CancellationToken::new(),
        on_update: None,
    };
    let outcome = run_tool_call(&call, options.clone()).await;
    assert!(!outcome.is_error);
    assert!(outcome.duration_ms.is_some());
    let unknown = ToolCall { name: "nope".into(), ..call.clone() };
    let outcome = run_tool_call(&unknown, options.clone()).await;
    assert_eq!(outcome.result.content, vec![UserContent::text("Tool nope not found")]);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = run_tool_call(&call, RunToolCallOptions { cancel, ..options }).await;
    assert_eq!(outcome.result.content, vec![UserContent::text("Operation aborted")]);
    assert_eq!(outcome.duration_ms, None);
}

#[tokio::test]
async fn sequential_mode_runs_start_end_result_per_call() {
    let faux = faux(vec![tool_response(&[("a", "echo"), ("b", "echo")]), text_response("done")]);
    let mut config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    config.tool_execution = ToolExecutionMode::Sequential;
    let recorder = Arc::new(Recorder::default());
    let context = AgentContext::new(vec![], vec![echo_tool("echo")]);
    run_agent_loop(prompt(), context, config, recorder.clone(), CancellationToken::new()).await.unwrap();
    let types = recorder.types();
    let tool_part: Vec<&str> = types.iter().copied().skip_while(|t| *t != "tool_execution_start").take(8).collect();
    assert_eq!(
        tool_part,
        [
            "tool_execution_start",
            "tool_execution_end",
            "message_start",
            "message_end",
            "tool_execution_start",
            "tool_execution_end",
            "message_start",
            "message_end"
        ]
    );
}

/// An update reaches the sink inside the tool's `on_update` call: a sink that aborts on it is
/// seen by the tool's next cancellation check, though the tool never waits.
#[tokio::test]
async fn an_update_is_delivered_before_the_tool_goes_on() {
    let faux = faux(vec![tool_response(&[("a", "check")]), text_response("never")]);
    let check: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("check"), |_args, ctx| async move {
        (ctx.on_update)(AgentToolResult::text("starting"));
        let seen = if ctx.cancel.is_cancelled() { "cancelled" } else { "running" };
        Ok(AgentToolResult::text(seen))
    }));
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let sink = FnSink(move |event: &AgentEvent| {
        if matches!(event, AgentEvent::ToolExecutionUpdate { .. }) {
            token.cancel();
        }
    });
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let context = AgentContext::new(vec![], vec![check]);
    let messages = run_agent_loop(prompt(), context, config, Arc::new(sink), cancel).await.unwrap();
    assert_eq!(result_text(results(&messages)[0]), "cancelled");
}

/// Every call of a parallel batch starts before any call goes on: both synchronous updates
/// come before the first `tool_execution_end`, though neither tool waits.
#[tokio::test]
async fn a_parallel_batch_starts_every_call_before_any_ends() {
    let faux = faux(vec![tool_response(&[("a", "quick"), ("b", "quick")]), text_response("done")]);
    let quick: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("quick"), |_args, ctx| async move {
        (ctx.on_update)(AgentToolResult::text("started"));
        Ok(AgentToolResult::text("done"))
    }));
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let recorder = Arc::new(Recorder::default());
    let context = AgentContext::new(vec![], vec![quick]);
    run_agent_loop(prompt(), context, config, recorder.clone(), CancellationToken::new()).await.unwrap();
    let tools: Vec<&str> = recorder.types().into_iter().filter(|t| t.starts_with("tool_execution")).collect();
    assert_eq!(
        tools,
        [
            "tool_execution_start",
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_update",
            "tool_execution_end",
            "tool_execution_end"
        ]
    );
}

/// The `Stream` form with a batch larger than the batch's small-join threshold (the batch then
/// polls only the calls that were woken): every call's emits, progress updates included, are
/// woken when the consumer takes their events, so the run completes.
#[tokio::test]
async fn stream_form_completes_a_large_parallel_batch_with_progress_updates() {
    let calls: Vec<(String, &str)> = (0..40).map(|i| (format!("call_{i}"), "slow")).collect();
    let calls: Vec<(&str, &str)> = calls.iter().map(|(id, name)| (id.as_str(), *name)).collect();
    let faux = faux(vec![tool_response(&calls), text_response("done")]);
    let slow: Arc<dyn AgentTool> = Arc::new(FnTool::new(spec("slow"), |_args, ctx| async move {
        (ctx.on_update)(AgentToolResult::text("half way"));
        tokio::task::yield_now().await;
        Ok(AgentToolResult::text("ok"))
    }));
    let mut config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    config.tool_execution = ToolExecutionMode::Parallel;
    let context = AgentContext::new(vec![], vec![slow]);
    let mut stream = agent_loop(prompt(), context, config, CancellationToken::new());
    let drained = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        let mut types = Vec::new();
        while let Some(event) = stream.next().await {
            types.push(event.type_name());
        }
        types
    })
    .await
    .expect("the stream must not hang");
    let count = |name: &str| drained.iter().filter(|t| **t == name).count();
    assert_eq!(count("tool_execution_start"), 40);
    assert_eq!(count("tool_execution_update"), 40);
    assert_eq!(count("tool_execution_end"), 40);
    assert_eq!(drained.last(), Some(&"agent_end"));
    let messages = stream.result().await.unwrap();
    let roles: Vec<_> = messages.iter().map(|m| m.role()).collect();
    // The declaration of the tool (a system message), the prompt, the calls, 40 results, the answer.
    assert_eq!(roles.len(), 1 + 1 + 1 + 40 + 1, "{roles:?}");
}

/// The messages a run added are its own, whatever the transcript becomes: a `prepare_request`
/// that replaces the context with one lacking them changes neither the run's result nor
/// `agent_end`, and the messages added after the replacement join them.
#[tokio::test]
async fn new_messages_survive_a_replaced_context() {
    let faux = faux(vec![tool_response(&[("a", "echo")]), text_response("done")]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone())).prepare_request(|request, _cancel| {
        // Replace the transcript with its last message only, at every request.
        let last: Vec<AgentMessage> = request.context.messages.last().cloned().into_iter().collect();
        let context = AgentContext::new(last, request.context.tools.clone());
        async move { Ok(Some(pi_loop::RequestUpdate { context: Some(context), model: None, thinking_level: None })) }
    });
    let context = AgentContext::new(vec![UserMessage::text("earlier").into()], vec![echo_tool("echo")]);
    let recorder = Arc::new(Recorder::default());
    let messages = run_agent_loop(prompt(), context, config, recorder.clone(), CancellationToken::new()).await.unwrap();
    let roles: Vec<&str> = messages.iter().map(AgentMessage::role).collect();
    // The tools are declared before the prompt, and again after the tool result: the replaced
    // transcript no longer holds the first declaration.
    assert_eq!(roles, ["system", "user", "assistant", "toolResult", "system", "assistant"]);
    let ended = recorder.events.lock().unwrap().iter().find_map(|event| match event {
        AgentEvent::AgentEnd { messages } => Some(messages.clone()),
        _ => None,
    });
    assert_eq!(ended.unwrap(), messages);
}
