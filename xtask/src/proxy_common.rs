//! Shared by `proxy-interop` and `proxy-load`: a proxy server on a loopback port in front of
//! faux providers, and event normalization for comparisons.

use std::sync::Arc;

use pi_providers::faux::{FauxOptions, FauxProvider};
use pi_providers::{Auth, Models, Provider};
use pi_proxy::server::{serve, Limits, ProxyToken, ServerConfig};
use serde_json::Value;

/// The bearer token of the loopback server.
pub const TOKEN: &str = "xtask-proxy-token-0123456789";

/// A faux provider registered as `provider` (chunks of `4 × token_size` characters).
pub fn faux(provider: &str, token_size: usize, tokens_per_second: Option<f64>) -> FauxProvider {
    FauxProvider::new(FauxOptions {
        provider: provider.into(),
        tokens_per_second,
        ..FauxOptions::default().with_token_size(token_size)
    })
}

fn registered(faux: &FauxProvider) -> Provider {
    Provider::new(faux.provider_id())
        .with_auth(Auth::None)
        .with_models(faux.models())
        .with_api(faux.api(), Arc::new(faux.clone()))
}

/// A running server; it stops when the returned sender is dropped or fired.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Start a server for `providers` on the current runtime.
pub async fn start(providers: &[&FauxProvider], limits: Limits) -> Result<Server, String> {
    let models = Models::new();
    for faux in providers {
        models.set_provider(registered(faux));
    }
    serve_models(models, limits).await
}

async fn serve_models(models: Models, limits: Limits) -> Result<Server, String> {
    let mut config = ServerConfig::new(Arc::new(models), vec![ProxyToken::new("xtask", TOKEN)]);
    config.limits = limits;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("bind: {e}"))?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| format!("bind: {e}"))?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(config, listener, async move {
        let _ = stopped.await;
    }));
    Ok(Server { url, _stop: stop })
}

/// Start a server whose one provider is `faux`'s, streamed by `adapter` (e.g. a wrapper of it).
pub async fn start_with(
    faux: &FauxProvider,
    adapter: Arc<dyn pi_types::StreamFn>,
    limits: Limits,
) -> Result<Server, String> {
    let models = Models::new();
    models.set_provider(registered(faux).with_api(faux.api(), adapter));
    serve_models(models, limits).await
}

/// An event as compared across clients: numbers as floats (JavaScript has one number type),
/// without `timestamp` and `durationMs` (clock readings).
pub fn normalize(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    *value = serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            Value::Object(map) => {
                map.remove("timestamp");
                map.remove("durationMs");
                map.values_mut().for_each(walk);
            }
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// The first difference between two JSON values, as a path and both sides.
pub fn first_difference(path: &str, left: &Value, right: &Value) -> Option<String> {
    match (left, right) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys()) {
                let (x, y) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                if let Some(difference) = first_difference(&format!("{path}.{key}"), x, y) {
                    return Some(difference);
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                if let Some(difference) = first_difference(&format!("{path}[{index}]"), x, y) {
                    return Some(difference);
                }
            }
            (a.len() != b.len()).then(|| format!("{path}: {} items vs {} items", a.len(), b.len()))
        }
        _ if left == right => None,
        _ => Some(format!("{path}: {left} vs {right}")),
    }
}

/// The command line of the proxy benchmarks: `--release` (refused in a debug build, which
/// would measure the wrong thing) and `--FLAG N` pairs, each handed to `set`, which rejects
/// flags it does not know.
pub(crate) fn parse_flags(
    args: &[String],
    command: &str,
    mut set: impl FnMut(&str, usize) -> Result<(), String>,
) -> Result<(), String> {
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if flag == "--release" {
            if cfg!(debug_assertions) {
                return Err(format!("--release: this is a debug build; run `cargo xtask {command}` (a release build)"));
            }
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: usize = value.parse().map_err(|_| format!("{flag}: not a number: {value}"))?;
        set(flag, number)?;
    }
    Ok(())
}

/// The runtime the proxy benchmarks run client and server on: `pi`'s (two workers, as the
/// machine the figures are taken on has two cores; idle blocking threads end after 500 ms).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_keep_alive(std::time::Duration::from_millis(500))
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))
}
