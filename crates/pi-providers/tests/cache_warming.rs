//! The cache-warming policy against pi-ai 1.6.1's own numbers: `fixtures/cache_warming/golden.json`
//! is printed by `fixtures/cache_warming/reference_cache_warming.mjs` on the reference's
//! `cache-warming.js` for the inputs in `inputs.json` (models, prompt sizes, phases, lifetimes).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pi_providers::cache_warming::{
    cache_warming_delay_ms, cache_warming_request_options, evaluate_cache_warming, is_cache_warming_replayable,
    prompt_cache_ttl_ms, CacheWarmingPhase, IDLE_CONTINUATION_PROBABILITY, MAX_AGE_MS, MAX_IDLE_AGE_MS,
    MINIMUM_EXPECTED_SAVINGS,
};
use pi_types::{CacheRetention, Model, StreamOptions, ThinkingLevel};
use serde_json::{json, Value};

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cache_warming").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn models() -> Vec<Model> {
    fixture("inputs.json")["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| serde_json::from_value(m.clone()).unwrap())
        .collect()
}

fn model(id: &str) -> Model {
    models().into_iter().find(|m| m.id == id).unwrap()
}

/// JSON equality with numbers compared by value (`0 == 0.0`), bit for bit.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The reference's `SimpleStreamOptions` subset the inputs use.
fn options(value: &Value, env: Option<&str>) -> StreamOptions {
    StreamOptions {
        cache_retention: value
            .get("cacheRetention")
            .map(|r| serde_json::from_value::<CacheRetention>(r.clone()).unwrap()),
        reasoning: value.get("reasoning").map(|r| serde_json::from_value::<ThinkingLevel>(r.clone()).unwrap()),
        env: Some(Arc::new(env.map(|v| [("PI_CACHE_RETENTION".to_owned(), v.to_owned())].into()).unwrap_or_default())),
        ..Default::default()
    }
}

#[test]
fn constants_match_the_reference() {
    let golden = fixture("golden.json");
    let constants = &golden["constants"];
    assert_eq!(constants["CACHE_WARMING_MAX_AGE_MS"], json!(MAX_AGE_MS));
    assert_eq!(constants["CACHE_WARMING_MAX_IDLE_AGE_MS"], json!(MAX_IDLE_AGE_MS));
    assert_eq!(constants["CACHE_WARMING_MINIMUM_EXPECTED_SAVINGS"], json!(MINIMUM_EXPECTED_SAVINGS));
    assert_eq!(constants["CACHE_WARMING_IDLE_CONTINUATION_PROBABILITY"], json!(IDLE_CONTINUATION_PROBABILITY));
}

#[test]
fn every_decision_matches_the_reference_to_the_last_bit() {
    let golden = fixture("golden.json");
    let expected = golden["evaluations"].as_array().unwrap();
    assert_eq!(expected.len(), 70);
    let mut warm = 0;
    for case in expected {
        let model = model(case["model"].as_str().unwrap());
        let tokens = case["promptTokens"].as_u64().unwrap();
        let phase = match case["decision"]["phase"].as_str().unwrap() {
            "idle" => CacheWarmingPhase::Idle,
            _ => CacheWarmingPhase::Streaming,
        };
        let decision = serde_json::to_value(evaluate_cache_warming(&model, tokens, phase)).unwrap();
        assert!(
            same(&decision, &case["decision"]),
            "{} at {tokens} tokens: {decision} != {}",
            model.id,
            case["decision"]
        );
        warm += usize::from(decision["action"] == "warm");
    }
    // The inputs reach both answers.
    assert!(warm > 0 && warm < expected.len());
}

#[test]
fn delays_lifetimes_and_replayability_match_the_reference() {
    let golden = fixture("golden.json");
    for case in golden["delays"].as_array().unwrap() {
        let ttl = case["ttlMs"].as_u64().unwrap();
        assert_eq!(json!(cache_warming_delay_ms(ttl)), case["delayMs"], "ttl {ttl}");
    }
    for case in golden["ttls"].as_array().unwrap() {
        let options = options(&case["options"], case["env"].as_str());
        let ttl = prompt_cache_ttl_ms(&model(case["model"].as_str().unwrap()), &options);
        assert_eq!(json!(ttl), case["ttlMs"], "{case}");
    }
    for case in golden["replayable"].as_array().unwrap() {
        let options = options(&case["options"], None);
        let replayable = is_cache_warming_replayable(&model(case["model"].as_str().unwrap()), &options);
        assert_eq!(json!(replayable), case["replayable"], "{case}");
    }
}

#[test]
fn a_refresh_asks_for_one_token_without_retries_or_continuation_and_keeps_the_rest() {
    let golden = fixture("golden.json");
    let original = StreamOptions {
        max_tokens: Some(4096),
        max_retries: Some(3),
        session_id: Some("s".into()),
        temperature: Some(0.2),
        ..Default::default()
    };
    let refresh = cache_warming_request_options(&original, None);
    let expected = &golden["requestOptions"];
    assert_eq!(json!(refresh.max_tokens), expected["maxTokens"]);
    assert_eq!(json!(refresh.max_retries), expected["maxRetries"]);
    assert_eq!(json!(refresh.session_id), expected["sessionId"]);
    assert_eq!(json!(refresh.temperature), expected["temperature"]);
    assert_eq!(json!(refresh.disable_continuation), expected["disableContinuation"]);
}
