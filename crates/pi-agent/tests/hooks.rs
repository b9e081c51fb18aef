//! Every hook set through the builders of `AgentOptions` reaches the agent's runs.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use pi_agent::{Agent, AgentOptions, SetHooks};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxResponse};
use pi_types::{
    AgentEvent, AgentToolResult, AssistantMessageEventStream, FnTool, Model, StopReason, StreamFn, StreamOptions, Tool,
    ToolSpec, TranscriptContext,
};
use serde_json::json;

type Calls = Arc<Mutex<Vec<&'static str>>>;

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

/// A tool call, then an answer.
fn scripted() -> FauxProvider {
    let faux = FauxProvider::default();
    faux.set_responses([
        FauxResponse::Message(faux_assistant_message(
            vec![faux_tool_call("c1", "echo", serde_json::Map::new())],
            StopReason::ToolUse,
        )),
        FauxResponse::Message(faux_assistant_message(vec![faux_text("done")], StopReason::Stop)),
    ]);
    faux
}

/// A closure that records `name` in `calls`.
fn recorder(calls: &Calls, name: &'static str) -> impl Fn() + Send + Sync + 'static {
    let calls = Arc::clone(calls);
    move || calls.lock().unwrap().push(name)
}

#[tokio::test]
async fn every_hook_set_through_the_builders_is_called() {
    let faux = scripted();
    let calls: Calls = Arc::default();
    let (convert, transform, key) =
        (recorder(&calls, "convert_to_llm"), recorder(&calls, "transform_context"), recorder(&calls, "get_api_key"));
    let (finish, request, next) =
        (recorder(&calls, "finish_turn"), recorder(&calls, "prepare_request"), recorder(&calls, "prepare_next_turn"));
    let (before, after) = (recorder(&calls, "before_tool_call"), recorder(&calls, "after_tool_call"));
    let (payload, response, event) =
        (recorder(&calls, "on_payload"), recorder(&calls, "on_response"), recorder(&calls, "on_provider_stream_event"));
    let options = AgentOptions::new(Arc::new(provider(faux.clone())))
        .with_model(faux.model())
        .with_tools([echo_tool()])
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
        .finish_turn(move |_turn, _cancel| {
            finish();
            async { Ok(None) }
        })
        .prepare_request(move |_request, _cancel| {
            request();
            async { Ok(None) }
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
        .after_tool_call(move |_ctx, _cancel| {
            after();
            async { Ok(None) }
        })
        .on_payload(move |_payload, _model| {
            payload();
            async { None }
        })
        .on_response(move |_response, _model| {
            response();
            async {}
        })
        .on_provider_stream_event(move |_event, _model| {
            event();
            async {}
        });
    let agent = Agent::new(options);
    agent.prompt("go").await.unwrap();
    assert_eq!(agent.messages().last().and_then(|m| m.as_assistant().map(|a| a.text())).as_deref(), Some("done"));
    let request = [
        "prepare_request",
        "transform_context",
        "convert_to_llm",
        "get_api_key",
        "on_payload",
        "on_provider_stream_event",
        "on_response",
    ];
    let mut expected = request.to_vec();
    expected.extend(["before_tool_call", "after_tool_call", "finish_turn", "prepare_next_turn"]);
    expected.extend(request);
    expected.push("finish_turn");
    assert_eq!(*calls.lock().unwrap(), expected);
}

/// The reference reads `prepareNextTurn` from the agent when a turn is prepared: a hook
/// replaced during the run is the one called.
#[tokio::test]
async fn prepare_next_turn_replaced_during_a_run_is_the_one_called() {
    let faux = scripted();
    let calls: Calls = Arc::default();
    let first = recorder(&calls, "set at the start");
    let agent = Agent::new(
        AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_tools([echo_tool()]).prepare_next_turn(
            move |_turn, _cancel| {
                first();
                async { Ok(None) }
            },
        ),
    );
    let weak = agent.downgrade();
    let replaced = Arc::new(recorder(&calls, "replaced"));
    let _replacer = agent.subscribe_fn(move |event| {
        if let AgentEvent::TurnEnd { .. } = event {
            let replaced = Arc::clone(&replaced);
            weak.upgrade().unwrap().update_options(|options| {
                options.prepare_next_turn(move |_turn, _cancel| {
                    replaced();
                    async { Ok(None) }
                })
            });
        }
    });
    agent.prompt("go").await.unwrap();
    assert_eq!(*calls.lock().unwrap(), ["replaced"]);
}
