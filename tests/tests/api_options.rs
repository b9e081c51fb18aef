//! API-specific options through an agent: an agent carries `AnthropicOptions` (a forced tool
//! and an effort level) in `AgentOptions::api_options`, and the request body its Anthropic
//! adapter sends over HTTP carries them; options scoped to another model are not applied.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../crates/pi-providers/tests/loopback/mod.rs"]
mod loopback;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopback::{sse_head, Server, Step};
use pi_agent::{Agent, AgentOptions};
use pi_providers::api::anthropic::{AnthropicEffort, AnthropicMessages, AnthropicOptions, AnthropicToolChoice};
use pi_types::{ApiOptions, Model, StopReason};
use serde_json::{json, Value};

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/providers/cases/anthropic-messages/x_adaptive_effort.json")).unwrap()
}

/// The fixture's adaptive-thinking Claude model, served at `url`.
fn model(url: &str) -> Model {
    let mut json = fixture()["model"].clone();
    json["baseUrl"] = Value::String(url.to_owned());
    serde_json::from_value(json).unwrap()
}

/// One prompt on an agent with `api_options`; the request body its adapter sent.
async fn request_body(url: &str, api_options: ApiOptions) -> Value {
    let sent: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = Arc::clone(&sent);
    let mut options = AgentOptions::new(Arc::new(AnthropicMessages))
        .with_model(model(url))
        .get_api_key(|_provider| async { Ok(Some("sk-ant-api-test".to_owned())) })
        .on_payload(move |body, _model| {
            record.lock().unwrap().push(body.clone());
            async { None }
        });
    options.api_options = api_options;
    let agent = Agent::new(options);
    tokio::time::timeout(Duration::from_secs(20), agent.prompt("Weather in Paris?")).await.expect("no hang").unwrap();
    let reply = agent.messages().iter().filter_map(|m| m.as_assistant().cloned()).next_back().unwrap();
    assert_eq!(reply.stop_reason, StopReason::Stop, "{:?}", reply.error_message);
    let bodies = sent.lock().unwrap();
    assert_eq!(bodies.len(), 1);
    bodies[0].clone()
}

#[tokio::test]
async fn an_agent_sends_its_anthropic_options() {
    let body = fixture()["response"]["body"].as_str().unwrap().as_bytes().to_vec();
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body)]).await;
    let anthropic = AnthropicOptions {
        tool_choice: Some(AnthropicToolChoice::Tool("get_weather".into())),
        thinking_enabled: Some(true),
        effort: Some(AnthropicEffort::High),
        ..Default::default()
    };

    // For every Anthropic model of the agent.
    let body = request_body(&server.url, ApiOptions::new().with(anthropic.clone())).await;
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "get_weather"}));
    assert_eq!(body["output_config"], json!({"effort": "high"}));
    assert_eq!(body["thinking"], json!({"type": "adaptive", "display": "summarized"}));

    // For this model only: another model's options stay unused, this one's win.
    let scoped = ApiOptions::new().with_model("anthropic", "claude-other", anthropic.clone()).with_model(
        "anthropic",
        "claude-adaptive",
        AnthropicOptions { effort: Some(AnthropicEffort::Low), ..anthropic },
    );
    let body = request_body(&server.url, scoped).await;
    assert_eq!(body["output_config"], json!({"effort": "low"}));
    let unscoped = ApiOptions::new().with_model("anthropic", "claude-other", AnthropicOptions::default());
    let body = request_body(&server.url, unscoped).await;
    assert_eq!(body.get("tool_choice"), None);
    assert_eq!(body.get("output_config"), None);
}
