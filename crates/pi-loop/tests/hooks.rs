//! Every hook set through the builders of `LoopConfig` is called, with the run's token.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use pi_loop::{run_agent_loop, AgentContext, CancellationToken, LoopConfig, NullSink, SetHooks};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxResponse};
use pi_types::{
    AgentToolResult, AssistantMessageEventStream, FnTool, Model, StopReason, StreamFn, StreamOptions, Tool, ToolSpec,
    TranscriptContext, UserMessage,
};
use serde_json::json;

type Calls = Arc<Mutex<Vec<&'static str>>>;

fn record(calls: &Calls, name: &'static str) {
    calls.lock().unwrap().push(name);
}

/// The faux provider, calling the request's `on_payload` and `on_provider_stream_event` first
/// as an HTTP adapter would (the faux provider itself calls `on_response`).
fn provider(faux: FauxProvider) -> impl StreamFn {
    move |model: &Model, context: TranscriptContext, options: StreamOptions| {
        let (on_payload, on_event) = (options.on_payload.clone(), options.on_provider_stream_event.clone());
        let model = model.clone();
        let mut inner = faux.stream(&model, context, options);
        AssistantMessageEventStream::from_producer(move |tx| async move {
            if let Some(hook) = on_payload {
                assert_eq!(hook(&json!({"model": model.id}), &model).await, None);
            }
            if let Some(hook) = on_event {
                hook(&json!({"type": "message_start"}), &model).await;
            }
            while let Some(event) = inner.next().await {
                tx.send(event).await;
            }
        })
    }
}

fn echo_tool() -> Arc<dyn pi_types::AgentTool> {
    let spec = ToolSpec::new(Tool {
        name: "echo".into(),
        description: "echo tool".into(),
        parameters: json!({"type": "object", "properties": {}}).into(),
        constrained_sampling: None,
    })
    .unwrap();
    Arc::new(FnTool::new(spec, |_args, _ctx| async { Ok(AgentToolResult::text("ok")) }))
}

#[tokio::test]
async fn every_hook_set_through_the_builders_is_called() {
    let faux = FauxProvider::default();
    faux.set_responses([
        FauxResponse::Message(faux_assistant_message(
            vec![faux_tool_call("c1", "echo", serde_json::Map::new())],
            StopReason::ToolUse,
        )),
        FauxResponse::Message(faux_assistant_message(vec![faux_text("done")], StopReason::Stop)),
    ]);
    let calls: Calls = Arc::default();
    let c = |name| {
        let calls = Arc::clone(&calls);
        move || record(&calls, name)
    };
    let (steer, follow, convert, transform, key) =
        (c("steering"), c("follow_up"), c("convert_to_llm"), c("transform_context"), c("get_api_key"));
    let (finish, request, next, before, after) =
        (c("finish_turn"), c("prepare_request"), c("prepare_next_turn"), c("before_tool_call"), c("after_tool_call"));
    let (payload, response, event) = (c("on_payload"), c("on_response"), c("on_provider_stream_event"));
    let config = LoopConfig::new(faux.model(), Arc::new(provider(faux.clone())))
        .get_steering_messages(move || {
            steer();
            async { Vec::new() }
        })
        .get_follow_up_messages(move || {
            follow();
            async { Vec::new() }
        })
        .convert_to_llm(move |messages| {
            convert();
            let converted = pi_types::default_convert_to_llm(messages);
            async move { Ok(converted) }
        })
        .transform_context(move |messages, cancel| {
            transform();
            let messages = messages.to_vec();
            async move {
                assert!(!cancel.is_cancelled());
                Ok(messages)
            }
        })
        .get_api_key(move |provider| {
            key();
            async move { Ok(Some(format!("key-for-{provider}"))) }
        })
        .finish_turn(move |turn, _cancel| {
            finish();
            let stop_reason = turn.message.stop_reason;
            async move {
                assert_ne!(stop_reason, StopReason::Error);
                Ok(None)
            }
        })
        .prepare_request(move |ctx, _cancel| {
            request();
            let model = ctx.model.id.clone();
            async move {
                assert_eq!(model, "faux-1");
                Ok(None)
            }
        })
        .prepare_next_turn(move |turn, cancel| {
            next();
            let results = turn.tool_results.len();
            async move {
                assert_eq!((results, cancel.is_cancelled()), (1, false));
                Ok(None)
            }
        })
        .before_tool_call(move |ctx, _cancel| {
            before();
            let name = ctx.tool_call.name.clone();
            async move {
                assert_eq!(name, "echo");
                Ok(None)
            }
        })
        .after_tool_call(move |ctx, _cancel| {
            after();
            let is_error = ctx.is_error;
            async move {
                assert!(!is_error);
                Ok(None)
            }
        })
        .on_payload(move |_payload, _model| {
            payload();
            async { None }
        })
        .on_response(move |response_seen, _model| {
            response();
            assert_eq!(response_seen.status, 200);
            async {}
        })
        .on_provider_stream_event(move |_event, _model| {
            event();
            async {}
        });
    let context = AgentContext::new(vec![], vec![echo_tool()]);
    let cancel = CancellationToken::new();
    let messages = run_agent_loop(vec![UserMessage::text("go").into()], context, config, Arc::new(NullSink), cancel)
        .await
        .unwrap();
    assert_eq!(messages.len(), 5, "tool declarations, prompt, call, result, answer");
    assert_eq!(faux.call_count(), 2);
    // Each request: prepare_request, the transcript (transform, convert), the key, then the
    // provider's hooks; the tool call runs between its hooks; each turn ends with finish_turn
    // and a steering poll; the next starts with prepare_next_turn and its own poll.
    let request = [
        "prepare_request",
        "transform_context",
        "convert_to_llm",
        "get_api_key",
        "on_payload",
        "on_provider_stream_event",
        "on_response",
    ];
    let mut expected = vec!["steering"];
    expected.extend(request);
    expected.extend([
        "before_tool_call",
        "after_tool_call",
        "finish_turn",
        "steering",
        "prepare_next_turn",
        "steering",
    ]);
    expected.extend(request);
    expected.extend(["finish_turn", "steering", "follow_up"]);
    assert_eq!(*calls.lock().unwrap(), expected);
}
