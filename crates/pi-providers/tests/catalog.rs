//! The catalog holds every field of every reference model: each model parsed into
//! [`pi_types::Model`] serializes back to the JSON the reference's `getBuiltinModels` returned
//! (numbers compared by value, object members in any order).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use indexmap::IndexMap;
use pi_providers::catalog;
use serde_json::Value;

fn same(a: &Value, b: &Value, path: &str) -> Result<(), String> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => Ok(()),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().try_for_each(|(i, (x, y))| same(x, y, &format!("{path}[{i}]")))
        }
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                match (x.get(key), y.get(key)) {
                    (Some(x), Some(y)) => same(x, y, &format!("{path}.{key}"))?,
                    (x, y) => return Err(format!("{path}.{key}: {x:?} != {y:?}")),
                }
            }
            Ok(())
        }
        _ if a == b => Ok(()),
        _ => Err(format!("{path}: {a} != {b}")),
    }
}

#[test]
fn every_model_round_trips_every_field() {
    let raw: IndexMap<String, Vec<Value>> =
        serde_json::from_str(include_str!("../src/catalog/catalog.json")).expect("catalog.json");
    assert_eq!(raw.len(), 43);
    assert_eq!(raw.values().map(Vec::len).sum::<usize>(), 1696);
    let parsed = catalog::catalog();
    assert_eq!(raw.keys().collect::<Vec<_>>(), parsed.keys().collect::<Vec<_>>(), "provider order");
    for (provider, models) in &raw {
        let ours = &parsed[provider];
        assert_eq!(models.len(), ours.len(), "{provider}");
        for (reference, model) in models.iter().zip(ours) {
            let back = serde_json::to_value(model).unwrap();
            if let Err(diff) = same(reference, &back, &format!("{provider}/{}", model.id)) {
                panic!("{diff}");
            }
        }
    }
}

#[test]
fn every_catalog_api_has_an_adapter() {
    let models = pi_providers::Models::with_builtins();
    for (provider, list) in catalog::catalog() {
        for model in list {
            let registered = models.provider(provider).expect("builtin provider");
            assert!(registered.api(&model.api).is_some(), "{provider}/{}: no adapter for {}", model.id, model.api);
        }
    }
}

#[test]
fn builtin_cloudflare_providers_fill_their_account_before_streaming() {
    if std::env::var_os("CLOUDFLARE_ACCOUNT_ID").is_some() {
        return;
    }
    let models = pi_providers::Models::with_builtins();
    let model = catalog::models("cloudflare-workers-ai").into_iter().next().expect("a model");
    let options = pi_types::StreamOptions { api_key: Some("cf-key".into()), ..Default::default() };
    let reply = futures::executor::block_on(models.complete(&model, pi_types::Context::default(), options));
    assert_eq!(
        reply.and_then(|m| m.error_message).as_deref(),
        Some("Provider cloudflare-workers-ai is not configured: set CLOUDFLARE_ACCOUNT_ID")
    );
}
