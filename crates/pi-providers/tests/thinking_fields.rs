//! The reasoning / thinking request fields per adapter, with the values pi-ai 1.6.1 sends for
//! the same model and options (taken from the reference oracle's request traces, see
//! `tests/fixtures/providers/golden/*/x_*.jsonl`).

#![allow(clippy::unwrap_used)]

use pi_types::transcript::normalize_context;
use pi_types::{Context, Message, Model, StreamOptions, ThinkingLevel, ThinkingLevelMap, UserMessage};
use serde_json::{json, Value};

fn model(id: &str, api: &str, provider: &str, map: &[(ThinkingLevel, Option<&str>)]) -> Model {
    let mut model = Model::new(id).with_api(api).with_provider(provider);
    model.base_url = "http://127.0.0.1:1/v1".into();
    model.reasoning = true;
    model.context_window = 200_000;
    model.max_tokens = 32_000;
    if !map.is_empty() {
        let map: ThinkingLevelMap = map.iter().map(|(l, v)| (*l, v.map(str::to_owned))).collect();
        model.thinking_level_map = Some(map);
    }
    model
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage {
            content: pi_types::UserMessageContent::Text("Hi".into()),
            timestamp: 0,
        })],
        tools: None,
    })
}

fn options(max_tokens: u64, reasoning: Option<ThinkingLevel>) -> StreamOptions {
    StreamOptions { max_tokens: Some(max_tokens), reasoning, ..Default::default() }
}

fn pick(body: &Value, keys: &[&str]) -> Value {
    Value::Object(keys.iter().filter_map(|k| body.get(*k).map(|v| ((*k).to_owned(), v.clone()))).collect())
}

#[test]
fn openai_completions_reasoning_fields() {
    use pi_providers::api::openai::completions::build_request_body;
    let keys = ["reasoning_effort", "reasoning", "thinking", "max_tokens", "max_completion_tokens"];
    let m = model("gpt-5.2", "openai-completions", "openai", &[(ThinkingLevel::Xhigh, Some("xhigh"))]);
    let body = build_request_body(&m, &context(), &options(1000, Some(ThinkingLevel::Xhigh)));
    assert_eq!(pick(&body, &keys), json!({"reasoning_effort": "xhigh", "max_completion_tokens": 1000}));
    assert_eq!(body["messages"][0]["role"], "developer");
    let m = model("gpt-5.2-mini", "openai-completions", "openai", &[]);
    let body = build_request_body(&m, &context(), &options(1000, Some(ThinkingLevel::Max)));
    assert_eq!(pick(&body, &keys), json!({"reasoning_effort": "high", "max_completion_tokens": 1000}));
    let m = model("deepseek-v4", "openai-completions", "deepseek", &[(ThinkingLevel::High, Some("max"))]);
    let body = build_request_body(&m, &context(), &options(500, Some(ThinkingLevel::High)));
    assert_eq!(
        pick(&body, &keys),
        json!({"reasoning_effort": "max", "thinking": {"type": "enabled"}, "max_tokens": 500})
    );
    let body = build_request_body(&m, &context(), &options(500, None));
    assert_eq!(pick(&body, &keys), json!({"thinking": {"type": "disabled"}, "max_tokens": 500}));
    let m = model("anthropic/claude-x", "openai-completions", "openrouter", &[(ThinkingLevel::Off, Some("none"))]);
    let body = build_request_body(&m, &context(), &options(800, None));
    assert_eq!(pick(&body, &keys), json!({"reasoning": {"effort": "none"}, "max_completion_tokens": 800}));
}

#[test]
fn anthropic_thinking_fields() {
    use pi_providers::api::anthropic::build_request_body;
    let keys = ["thinking", "output_config", "max_tokens"];
    let mut m = model("claude-x", "anthropic-messages", "anthropic", &[]);
    m.max_tokens = 8000;
    let body = build_request_body(&m, &context(), &options(4000, Some(ThinkingLevel::High)));
    assert_eq!(
        pick(&body, &keys),
        json!({"thinking": {"type": "enabled", "budget_tokens": 6976, "display": "summarized"}, "max_tokens": 8000})
    );
    let body = build_request_body(&m, &context(), &options(2000, Some(ThinkingLevel::Minimal)));
    assert_eq!(pick(&body, &keys)["thinking"]["budget_tokens"], 1024);
    assert_eq!(pick(&body, &keys)["max_tokens"], 3024);
    let body = build_request_body(&m, &context(), &options(2000, None));
    assert_eq!(pick(&body, &keys), json!({"thinking": {"type": "disabled"}, "max_tokens": 2000}));
    let mut adaptive = model(
        "claude-adaptive",
        "anthropic-messages",
        "anthropic",
        &[(ThinkingLevel::Off, None), (ThinkingLevel::Xhigh, Some("xhigh"))],
    );
    adaptive.compat = Some(json!({"forceAdaptiveThinking": true}).as_object().unwrap().clone());
    let body = build_request_body(&adaptive, &context(), &options(2000, Some(ThinkingLevel::Xhigh)));
    assert_eq!(
        pick(&body, &keys),
        json!({"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "xhigh"}, "max_tokens": 2000})
    );
    let body = build_request_body(&adaptive, &context(), &options(2000, None));
    assert_eq!(pick(&body, &keys), json!({"max_tokens": 2000}));
}

#[test]
fn openai_responses_reasoning_fields() {
    use pi_providers::api::openai::responses::build_request_body;
    let keys = ["reasoning", "include", "max_output_tokens"];
    let m = model(
        "gpt-5.2",
        "openai-responses",
        "openai",
        &[(ThinkingLevel::Minimal, Some("minimal")), (ThinkingLevel::Xhigh, Some("xhigh"))],
    );
    let body = build_request_body(&m, &context(), &options(8, Some(ThinkingLevel::Minimal)));
    assert_eq!(
        pick(&body, &keys),
        json!({"reasoning": {"effort": "minimal", "summary": "auto"}, "include": ["reasoning.encrypted_content"], "max_output_tokens": 16})
    );
    let body = build_request_body(&m, &context(), &options(8, None));
    assert_eq!(pick(&body, &keys), json!({"reasoning": {"effort": "none"}, "max_output_tokens": 16}));
    let m = model("gpt-5.2-nano", "openai-responses", "openai", &[(ThinkingLevel::Off, None)]);
    let body = build_request_body(&m, &context(), &options(100, None));
    assert_eq!(pick(&body, &keys), json!({"max_output_tokens": 100}));
}

#[test]
fn google_thinking_config() {
    use pi_providers::api::google::gemini::build_request_body;
    let config =
        |m: &Model, o: StreamOptions| build_request_body(m, &context(), &o).unwrap()["generationConfig"].clone();
    let m = model("gemini-3-pro-preview", "google-generative-ai", "google", &[]);
    assert_eq!(
        config(&m, options(1000, Some(ThinkingLevel::High))),
        json!({"maxOutputTokens": 1000, "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "HIGH"}})
    );
    let m = model("gemini-3-flash-preview", "google-generative-ai", "google", &[(ThinkingLevel::Off, None)]);
    assert_eq!(
        config(&m, options(1000, None)),
        json!({"maxOutputTokens": 1000, "thinkingConfig": {"thinkingLevel": "MINIMAL"}})
    );
    let m = model("gemini-2.5-pro", "google-generative-ai", "google", &[]);
    assert_eq!(
        config(&m, options(1000, Some(ThinkingLevel::Minimal))),
        json!({"maxOutputTokens": 1000, "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 128}})
    );
    assert_eq!(
        config(&m, options(1000, None)),
        json!({"maxOutputTokens": 1000, "thinkingConfig": {"thinkingBudget": 0}})
    );
}
