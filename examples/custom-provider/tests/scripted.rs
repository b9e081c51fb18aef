//! The scripted provider streams its replies in pieces, with the events the builder derives.

use custom_provider::{pieces, ScriptedProvider};
use futures::StreamExt;
use pi_types::CancellationToken;
use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, JsonObject, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext,
};

fn model() -> Model {
    Model::new("scripted-1").with_api("scripted").with_provider("example")
}

fn run(provider: &ScriptedProvider, options: StreamOptions) -> Vec<AssistantMessageEvent> {
    let stream = provider.stream(&model(), TranscriptContext::default(), options);
    futures::executor::block_on(stream.collect())
}

fn summary(events: &[AssistantMessageEvent]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            AssistantMessageEvent::TextDelta { delta, .. }
            | AssistantMessageEvent::ThinkingDelta { delta, .. }
            | AssistantMessageEvent::ToolcallDelta { delta, .. } => format!("{} {delta}", event.type_name()),
            other => other.type_name().to_owned(),
        })
        .collect()
}

fn weather_reply() -> AssistantMessage {
    let mut arguments = JsonObject::new();
    arguments.insert("city".into(), "Oslo".into());
    AssistantMessage {
        content: vec![
            AssistantContent::thinking("Need data"),
            AssistantContent::text("Checking."),
            AssistantContent::tool_call("call_1", "weather", arguments),
        ],
        stop_reason: StopReason::ToolUse,
        ..Default::default()
    }
}

#[test]
fn streams_a_tool_call_in_pieces() {
    let provider = ScriptedProvider::new(5);
    provider.push_reply(weather_reply());
    let events = run(&provider, StreamOptions::default());
    assert_eq!(
        summary(&events),
        [
            "start",
            "thinking_start",
            "thinking_delta Need ",
            "thinking_delta data",
            "thinking_end",
            "text_start",
            "text_delta Check",
            "text_delta ing.",
            "text_end",
            "toolcall_start",
            "toolcall_delta {\"cit",
            "toolcall_delta y\":\"O",
            "toolcall_delta slo\"}",
            "toolcall_end",
            "done",
        ]
    );
    // The partial arguments grow with the pieces.
    let partial_city = |event: &AssistantMessageEvent| {
        event.partial().and_then(|p| p.tool_calls().next().and_then(|c| c.arguments.get("city").cloned()))
    };
    assert_eq!(partial_city(&events[11]), Some("O".into()));
    assert_eq!(partial_city(&events[12]), Some("Oslo".into()));
    let Some(AssistantMessageEvent::Done { message, reason: StopReason::ToolUse }) = events.last() else {
        panic!("expected done, got {:?}", summary(&events));
    };
    assert_eq!(
        (message.api.as_str(), message.provider.as_str(), message.model.as_str()),
        ("scripted", "example", "scripted-1")
    );
    assert_eq!(message.content.len(), 3);
    assert_eq!(message.text(), "Checking.");
    assert_eq!(provider.pending(), 0);
}

#[test]
fn a_cancelled_request_ends_aborted() {
    let provider = ScriptedProvider::new(5);
    provider.push_reply(weather_reply());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let events = run(&provider, StreamOptions { cancel: Some(cancel), ..Default::default() });
    assert_eq!(summary(&events), ["error"]);
    let AssistantMessageEvent::Error { error, reason: StopReason::Aborted } = &events[0] else {
        panic!("expected error")
    };
    assert_eq!(error.error_message.as_deref(), Some("Request was aborted"));
}

#[test]
fn an_empty_script_and_a_scripted_error() {
    let provider = ScriptedProvider::new(5);
    provider.push_reply(AssistantMessage {
        content: vec![AssistantContent::text("")],
        stop_reason: StopReason::Error,
        error_message: Some("boom".into()),
        ..Default::default()
    });
    let failed = run(&provider, StreamOptions::default());
    assert_eq!(summary(&failed), ["start", "text_start", "text_delta ", "text_end", "error"]);
    let Some(AssistantMessageEvent::Error { error, reason: StopReason::Error }) = failed.last() else {
        panic!("expected error")
    };
    assert_eq!(error.error_message.as_deref(), Some("boom"));

    let exhausted = run(&provider, StreamOptions::default());
    assert_eq!(summary(&exhausted), ["error"]);
    assert_eq!(
        exhausted[0].final_message().and_then(|m| m.error_message.clone()).as_deref(),
        Some("No more scripted replies queued")
    );
}

#[test]
fn pieces_count_utf16_units() {
    assert_eq!(pieces("", 4), [""]);
    assert_eq!(pieces("abcdef", 4), ["abcd", "ef"]);
    assert_eq!(pieces("a😀bc", 2), ["a😀", "bc"]);
}
