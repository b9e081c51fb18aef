//! The conformance scenarios replayed with the proxy in the middle: the scenario runner streams
//! each scripted response from a faux provider registered in a pi-proxy server, through the
//! proxy client, and the traces equal the reference's goldens.

use std::path::Path;
use std::sync::Arc;

use pi_providers::faux::{FauxOptions, FauxProvider, FauxResponse};
use pi_providers::{Auth, Models, Provider};
use pi_proxy::server::{serve, ProxyToken, ServerConfig};
use pi_proxy::ProxyStreamFn;
use pi_types::{AssistantMessage, StreamFn};
use serde_json::Value;

const TOKEN: &str = "conformance-token-0123456789";

/// A proxy server on a loopback port serving a faux provider scripted with `responses`, and
/// the proxy client pointed at it (the server lives as long as the replay's runtime).
fn via_proxy(responses: Vec<AssistantMessage>, token_size: usize) -> Arc<dyn StreamFn> {
    let faux = FauxProvider::new(FauxOptions {
        api: "faux".into(),
        provider: "faux".into(),
        tokens_per_second: Some(1e9),
        ..FauxOptions::default().with_token_size(token_size)
    });
    faux.set_responses(responses.into_iter().map(FauxResponse::Message));
    let provider = Provider::new(faux.provider_id())
        .with_auth(Auth::None)
        .with_models(faux.models())
        .with_api(faux.api(), Arc::new(faux.clone()));
    let models = Models::new();
    models.set_provider(provider);
    let config = ServerConfig::new(Arc::new(models), vec![ProxyToken::new("conformance", TOKEN)]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
    tokio::spawn(serve(config, listener, std::future::pending::<()>()));
    Arc::new(ProxyStreamFn::new(url, TOKEN))
}

/// Without what the proxy protocol does not carry: the faux provider puts a response's error
/// text on its partials before the response ends; the proxy's events carry it only at the end.
fn without_pending_error_text(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(without_pending_error_text).collect()),
        Value::Object(mut map) => {
            if map.get("role").and_then(Value::as_str) == Some("assistant")
                && map.get("stopReason").and_then(Value::as_str) == Some("pending")
            {
                map.shift_remove("errorMessage");
            }
            Value::Object(map.into_iter().map(|(k, v)| (k, without_pending_error_text(v))).collect())
        }
        other => other,
    }
}

#[test]
fn conformance_scenarios_replay_identically_through_the_proxy() {
    let replay = |path: &Path| {
        let trace = pi_testkit::replay::replay_file_with(path, &via_proxy).map_err(|e| e.to_string())?;
        // A cancelled request ends with the proxy client's own wording, the reference
        // `streamProxy`'s (before the response started, and while it streamed).
        Ok(trace
            .replace("This operation was aborted", "Request was aborted")
            .replace("Request aborted by user", "Request was aborted"))
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for dir in ["conformance", "conformance-extra"] {
        match pi_integration_tests::check_scenarios(&fixtures.join(dir), "", &replay, &without_pending_error_text) {
            Ok(count) => assert!(count > 0, "no scenarios in {dir}"),
            Err(failures) => panic!("{dir}: {failures}"),
        }
    }
}
