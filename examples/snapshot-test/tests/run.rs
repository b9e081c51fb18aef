//! A snapshot of the weather assistant's run: the model calls the tool, the user steers while
//! the tool runs, and the model answers with the steering message in its context.
//!
//! `pi_testkit::snapshot::EventRecorder` records the events in their compact view (each event
//! once, no partial messages, timestamps/usage/ids redacted) and checks the run grammar; the
//! snapshot lives in `tests/snapshots/`. After an intended change, review it with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p snapshot-test`).

use std::sync::Arc;

use pi_agent::pi_types::{AgentEvent, AgentMessage, JsonObject, StopReason};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
use pi_testkit::snapshot::EventRecorder;

fn arguments(city: &str) -> JsonObject {
    let mut arguments = JsonObject::new();
    arguments.insert("city".into(), city.into());
    arguments
}

#[tokio::test]
async fn a_steered_weather_run() {
    // Fixed chunk sizes: the default chunking is random, which would make the deltas vary.
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(4));
    faux.set_responses([
        FauxResponse::Message(faux_assistant_message(
            vec![faux_text("Let me check."), faux_tool_call("call-1", "get_weather", arguments("Oslo"))],
            StopReason::ToolUse,
        )),
        FauxResponse::Message(faux_assistant_message(
            vec![faux_text("Oslo: 12°C (53.6°F), light rain.")],
            StopReason::Stop,
        )),
    ]);
    let agent = snapshot_test::weather_agent(Arc::new(faux.clone()), faux.model()).expect("agent");
    let recorder = EventRecorder::attach(&agent);

    // The user types while the tool runs: the message reaches the model after the tool result.
    let weak = agent.downgrade();
    agent.subscribe_fn(move |event| {
        if let (AgentEvent::ToolExecutionStart { .. }, Some(agent)) = (event, weak.upgrade()) {
            agent.steer("Fahrenheit too, please.");
        }
    });

    agent.prompt("Weather in Oslo?").await.expect("run");

    let messages = agent.messages();
    let roles: Vec<&str> = messages.iter().map(AgentMessage::role).collect();
    assert_eq!(roles, ["system", "user", "assistant", "toolResult", "user", "assistant"]);
    insta::assert_yaml_snapshot!(recorder.snapshot());
}
