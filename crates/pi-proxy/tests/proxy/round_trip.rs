//! Our client against our server backed by the faux provider reproduces what the faux
//! provider streams directly, event for event (minus what the protocol does not carry).

use std::sync::Arc;

use futures::StreamExt;
use pi_providers::faux::{faux_assistant_message, faux_text, faux_thinking, faux_tool_call, FauxResponse};
use pi_proxy::ProxyStreamFn;
use pi_types::CancellationToken;
use pi_types::{AssistantMessage, Message, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage};
use serde_json::json;

use crate::support::{collect, config_with, faux, faux_provider, Stall, TestServer, TOKEN};

fn object(value: serde_json::Value) -> pi_types::JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

pub(crate) fn context() -> TranscriptContext {
    TranscriptContext::from_messages(vec![Message::from(UserMessage::text("What is the weather in Oslo?"))])
}

pub(crate) fn scripted() -> Vec<(&'static str, FauxResponse)> {
    let error = AssistantMessage {
        error_message: Some("upstream exploded".into()),
        ..faux_assistant_message(vec![faux_text("partial answer")], StopReason::Error)
    };
    let aborted = AssistantMessage {
        error_message: Some("Request was aborted".into()),
        ..faux_assistant_message(vec![faux_thinking("hmm")], StopReason::Aborted)
    };
    let failing: pi_providers::faux::FauxResponseFn =
        Arc::new(|_| Box::pin(async { Err::<AssistantMessage, _>("script failed".into()) }));
    vec![
        (
            "text",
            faux_assistant_message(vec![faux_text("Hello there, é 😀 and a longer tail of text.")], StopReason::Stop)
                .into(),
        ),
        (
            "thinking",
            faux_assistant_message(
                vec![faux_thinking("Let me think about it."), faux_text("Sunny.")],
                StopReason::Stop,
            )
            .into(),
        ),
        (
            "parallel tool calls",
            faux_assistant_message(
                vec![
                    faux_text("Checking both."),
                    faux_tool_call("call_1", "weather", object(json!({"city": "Oslo", "days": [1, 2, 3]}))),
                    faux_tool_call("call_2", "time", object(json!({"zone": {"name": "Europe/Oslo", "dst": true}}))),
                ],
                StopReason::ToolUse,
            )
            .into(),
        ),
        ("length", faux_assistant_message(vec![faux_text("cut sho")], StopReason::Length).into()),
        ("error", error.into()),
        ("aborted", aborted.into()),
        ("build error", FauxResponse::Build(failing)),
    ]
}

#[tokio::test]
async fn proxied_events_equal_direct_events() {
    let faux = faux();
    let server = TestServer::start(config_with(vec![faux_provider(&faux)])).await;
    let proxy = ProxyStreamFn::new(&server.url, TOKEN);
    let model = faux.model();
    for (name, response) in scripted() {
        faux.set_responses([response.clone(), response]);
        let direct = collect(faux.stream(&model, context(), StreamOptions::default())).await;
        let proxied = collect(proxy.stream(&model, context(), StreamOptions::default())).await;
        assert!(!direct.is_empty(), "{name}");
        assert_eq!(proxied, direct, "case {name}");
        if name == "parallel tool calls" {
            // Argument snapshots are part of what is compared: they did grow while streaming.
            let grown = proxied
                .iter()
                .filter(|e| e["type"] == "toolcall_delta")
                .any(|e| e["partial"]["content"][1]["arguments"].as_object().is_some_and(|a| !a.is_empty()));
            assert!(grown);
        }
    }
    // An exhausted script: one error event, no start.
    let direct = collect(faux.stream(&model, context(), StreamOptions::default())).await;
    let proxied = collect(proxy.stream(&model, context(), StreamOptions::default())).await;
    assert_eq!(proxied, direct);
    assert_eq!(proxied.len(), 1);
}

#[tokio::test]
async fn cancelling_mid_stream_ends_aborted_with_the_content_so_far() {
    let stall = Stall::default();
    let server = TestServer::start(config_with(vec![stall.provider()])).await;
    let proxy = ProxyStreamFn::new(&server.url, TOKEN);
    let cancel = CancellationToken::new();
    let options = StreamOptions { cancel: Some(cancel.clone()), ..Default::default() };
    let mut stream = proxy.stream(&Stall::model(), context(), options);
    let first = stream.next().await.map(|e| e.type_name());
    assert_eq!(first, Some("start"));
    cancel.cancel();
    let last = stream.next().await.expect("terminal event");
    let message = last.final_message().expect("final message");
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("Request aborted by user"));
    assert!(stream.next().await.is_none());
}
