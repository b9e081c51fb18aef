//! Small behaviours of public types: secrets kept out of `Debug`, lossless tool-result JSON,
//! cancellation shared between clones.
#![allow(clippy::unwrap_used)]

use indexmap::IndexMap;
use pi_types::{AgentToolResult, CancellationToken, Model};
use serde_json::json;

#[test]
fn model_debug_shows_header_names_but_never_values() {
    let mut model = Model::new("m").with_api("openai-completions").with_provider("p");
    let mut headers = IndexMap::new();
    headers.insert("x-api-key".to_owned(), "sk-secret-value".to_owned());
    model.headers = Some(headers);
    let debug = format!("{model:?}");
    assert!(!debug.contains("sk-secret-value"), "{debug}");
    assert!(debug.contains("\"x-api-key\": \"<redacted>\""), "{debug}");
    let pretty = format!("{model:#?}");
    assert!(!pretty.contains("sk-secret-value"), "{pretty}");
}

#[test]
fn tool_result_null_flags_and_other_members_round_trip() {
    let wire = json!({"content": [], "details": {}, "isError": null, "terminate": true, "note": 1});
    let result: AgentToolResult = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(result.is_error, None);
    assert_eq!(result.terminate, Some(true));
    assert_eq!(result.extra.get("isError"), Some(&serde_json::Value::Null));
    assert_eq!(serde_json::to_value(&result).unwrap(), wire);
}

#[tokio::test]
async fn every_waiter_ends_when_a_clone_cancels() {
    let token = CancellationToken::new();
    let waiters: Vec<_> = (0..3).map(|_| tokio::spawn(token.clone().cancelled_owned())).collect();
    tokio::task::yield_now().await;
    token.clone().cancel();
    for waiter in waiters {
        assert!(waiter.await.is_ok());
    }
    assert!(token.is_cancelled());
}

#[test]
fn a_cancel_guard_cancels_when_dropped_unless_disarmed() {
    let token = CancellationToken::new();
    drop(token.clone().drop_guard());
    assert!(token.is_cancelled());
    let kept = CancellationToken::new();
    let back = kept.clone().drop_guard().disarm();
    assert!(!kept.is_cancelled() && !back.is_cancelled());
}

#[test]
fn a_tool_declared_from_json_and_the_text_of_a_result() {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let tool = pi_types::Tool::new("weather", "Weather in a city", schema.clone());
    assert_eq!((tool.name.as_str(), tool.description.as_str()), ("weather", "Weather in a city"));
    assert_eq!(*tool.parameters, schema);
    assert!(pi_types::ToolSpec::new(tool).is_ok());

    let result: pi_types::ToolResultMessage = serde_json::from_value(json!({
        "role": "toolResult", "toolCallId": "c1", "toolName": "weather", "isError": false, "timestamp": 0,
        "content": [{"type": "text", "text": "12°C"}, {"type": "image", "data": "AA==", "mimeType": "image/png"},
                    {"type": "text", "text": "rain"}]
    }))
    .unwrap();
    assert_eq!(result.text(), "12°C\nrain");
}
