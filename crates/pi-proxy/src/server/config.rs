//! Server configuration from a JSON file and the environment.
//!
//! File (all fields optional):
//! ```json
//! {
//!   "tokens": [{"id": "web", "token": "..."}, {"id": "ci", "tokenEnv": "PI_PROXY_TOKEN_CI"}],
//!   "providers": ["anthropic", "openai"],
//!   "customProviders": [{"id": "local", "apiKeyEnv": "LOCAL_API_KEY",
//!                        "models": [{"id": "qwen3", "api": "openai-completions",
//!                                    "baseUrl": "http://10.0.0.5:8000/v1"}]}],
//!   "allowHeaders": ["anthropic-beta"],
//!   "allowSamplingParams": ["top_p"],
//!   "limits": {"maxBodyBytes": 8388608, "maxBodyBytesInFlight": 67108864, "maxStreams": 1024, "maxStreamsPerToken": 64,
//!              "maxConnections": 4096, "maxIdleConnections": 1024,
//!              "maxIdleConnectionsPerPeer": 256, "idleTimeoutUnderPressureMs": 2000,
//!              "upstreamTimeoutMs": 600000,
//!              "upstreamHeadersTimeoutMs": 60000, "upstreamIdleTimeoutMs": 120000,
//!              "bodyReadTimeoutMs": 10000, "headerReadTimeoutMs": 30000,
//!              "keepaliveMs": 15000, "shutdownGraceMs": 30000, "retryAfterSecs": 1,
//!              "requestsPerMinute": 60, "tokensPerDay": 2000000}
//! }
//! ```
//! Environment (read after the file, adding to or overriding it): `PI_PROXY_TOKENS`
//! (`id:secret,id:secret`), `PI_PROXY_TOKEN` (one secret, id `default`),
//! `PI_PROXY_PROVIDERS` (comma list), `PI_PROXY_ALLOW_HEADERS` (comma list),
//! `PI_PROXY_MAX_STREAMS`, `PI_PROXY_MAX_STREAMS_PER_TOKEN`, `PI_PROXY_MAX_BODY_BYTES`,
//! `PI_PROXY_UPSTREAM_TIMEOUT_MS`, `PI_PROXY_SHUTDOWN_GRACE_MS`. Provider keys come from each
//! provider's usual variables (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, ...) at request time.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pi_providers::{Auth, Models, Provider};
use pi_types::Model;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Limits, ProxyToken, Redaction, ServerConfig, DEFAULT_SAMPLING_PARAMS};
use crate::ProxyError;

/// A token entry of the file: the secret inline or in an environment variable.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenEntry {
    /// Id used in logs and per-token limits.
    pub id: String,
    /// The secret.
    #[serde(default)]
    pub token: Option<String>,
    /// The environment variable holding the secret.
    #[serde(default)]
    pub token_env: Option<String>,
}

/// A provider the server defines itself (a local vLLM, a company gateway, ...).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomProvider {
    /// Provider id (the `provider` of its models).
    pub id: String,
    /// The environment variable holding its API key (none: no key is sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Its models: `Model` JSON; `name`, `provider`, `input`, `cost`, `reasoning`,
    /// `contextWindow` and `maxTokens` may be left out.
    #[serde(default)]
    pub models: Vec<Map<String, Value>>,
}

/// Limits as written in the file (milliseconds).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileLimits {
    max_body_bytes: Option<usize>,
    max_body_bytes_in_flight: Option<usize>,
    max_streams: Option<usize>,
    max_streams_per_token: Option<usize>,
    max_connections: Option<usize>,
    max_idle_connections: Option<usize>,
    max_idle_connections_per_peer: Option<usize>,
    idle_timeout_under_pressure_ms: Option<u64>,
    upstream_timeout_ms: Option<u64>,
    upstream_headers_timeout_ms: Option<u64>,
    upstream_idle_timeout_ms: Option<u64>,
    body_read_timeout_ms: Option<u64>,
    header_read_timeout_ms: Option<u64>,
    keepalive_ms: Option<u64>,
    shutdown_grace_ms: Option<u64>,
    retry_after_secs: Option<u64>,
    requests_per_minute: Option<u64>,
    tokens_per_day: Option<u64>,
}

/// The configuration file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileConfig {
    /// Bearer tokens.
    #[serde(default)]
    pub tokens: Vec<TokenEntry>,
    /// Built-in providers to serve (default: all of the catalog).
    #[serde(default)]
    pub providers: Option<Vec<String>>,
    /// Providers defined here.
    #[serde(default)]
    pub custom_providers: Vec<CustomProvider>,
    /// Client header names passed on.
    #[serde(default)]
    pub allow_headers: Option<Vec<String>>,
    /// Sampling parameter keys passed on.
    #[serde(default)]
    pub allow_sampling_params: Option<Vec<String>>,
    /// Limits.
    #[serde(default)]
    pub limits: FileLimits,
}

fn config_error(message: impl Into<String>) -> ProxyError {
    ProxyError::Config(message.into())
}

impl FileConfig {
    /// Read a configuration file.
    pub fn read(path: &Path) -> Result<Self, ProxyError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| config_error(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| config_error(format!("{}: {e}", path.display())))
    }
}

/// A custom model with the optional fields filled in.
fn custom_model(provider: &str, mut fields: Map<String, Value>) -> Result<Model, ProxyError> {
    let id = fields.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
    let defaults = [
        ("name", Value::String(id.clone())),
        ("provider", Value::String(provider.to_owned())),
        ("reasoning", Value::Bool(false)),
        ("input", serde_json::json!(["text"])),
        ("cost", serde_json::json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0})),
        ("contextWindow", Value::from(128_000)),
        ("maxTokens", Value::from(16_384)),
    ];
    for (key, value) in defaults {
        fields.entry(key).or_insert(value);
    }
    if fields.get("provider").and_then(Value::as_str) != Some(provider) {
        return Err(config_error(format!("model {id}: provider must be {provider}")));
    }
    serde_json::from_value(Value::Object(fields)).map_err(|e| config_error(format!("provider {provider}: {e}")))
}

fn env_list(name: &str) -> Option<Vec<String>> {
    let value = std::env::var(name).ok()?;
    Some(value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
}

fn env_number(name: &str) -> Result<Option<u64>, ProxyError> {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().map(Some).map_err(|_| config_error(format!("{name} is not a number"))),
        Err(_) => Ok(None),
    }
}

/// `PI_PROXY_TOKENS` entries: `id:secret`, or a bare secret named `token<n>`.
fn parse_token_list(value: &str) -> Vec<ProxyToken> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .enumerate()
        .map(|(index, entry)| match entry.split_once(':') {
            Some((id, secret)) => ProxyToken::new(id, secret),
            None => ProxyToken::new(format!("token{}", index + 1), entry),
        })
        .collect()
}

impl ServerConfig {
    /// The configuration of `PI_PROXY_CONFIG` (a file, if set) and the environment.
    pub fn from_env() -> Result<Self, ProxyError> {
        let file = std::env::var_os("PI_PROXY_CONFIG").map(std::path::PathBuf::from);
        Self::load(file.as_deref())
    }

    /// The configuration of a file (if any), then the environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ProxyError> {
        let file = match file {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        Self::from_file_config(file)
    }

    /// Build from a parsed file, then apply the environment.
    pub fn from_file_config(file: FileConfig) -> Result<Self, ProxyError> {
        let mut tokens = Vec::new();
        for entry in &file.tokens {
            let secret = match (&entry.token, &entry.token_env) {
                (Some(secret), None) => secret.clone(),
                (None, Some(var)) => {
                    std::env::var(var).map_err(|_| config_error(format!("token {}: {var} is not set", entry.id)))?
                }
                _ => return Err(config_error(format!("token {}: give exactly one of token, tokenEnv", entry.id))),
            };
            tokens.push(ProxyToken::new(&entry.id, secret));
        }
        if let Ok(list) = std::env::var("PI_PROXY_TOKENS") {
            tokens.extend(parse_token_list(&list));
        }
        if let Ok(secret) = std::env::var("PI_PROXY_TOKEN") {
            tokens.push(ProxyToken::new("default", secret));
        }
        if let Some(token) = tokens.iter().find(|t| t.secret.len() < 16) {
            return Err(config_error(format!("token {}: secrets must have at least 16 characters", token.id)));
        }
        if tokens.is_empty() {
            return Err(config_error(
                "no bearer tokens: set PI_PROXY_TOKEN, PI_PROXY_TOKENS (id:secret,...) or tokens in the config file",
            ));
        }

        let models = Models::new();
        let builtins = env_list("PI_PROXY_PROVIDERS").or(file.providers.clone());
        let builtin_ids: Vec<String> = match builtins {
            Some(ids) => ids,
            None => pi_providers::catalog::provider_ids().iter().map(|s| (*s).to_owned()).collect(),
        };
        for id in &builtin_ids {
            let provider = Provider::builtin(id).ok_or_else(|| config_error(format!("unknown provider {id}")))?;
            models.set_provider(provider);
        }
        for custom in &file.custom_providers {
            let auth = match &custom.api_key_env {
                Some(var) => Auth::Env(vec![var.clone()]),
                None => Auth::None,
            };
            let mut provider = Provider::new(&custom.id).with_auth(auth).with_http_apis();
            for fields in &custom.models {
                provider = provider.with_model(custom_model(&custom.id, fields.clone())?);
            }
            models.set_provider(provider);
        }

        let mut limits = Limits::default();
        let l = &file.limits;
        let ms = Duration::from_millis;
        limits.max_body_bytes = l.max_body_bytes.unwrap_or(limits.max_body_bytes);
        limits.max_body_bytes_in_flight = l.max_body_bytes_in_flight.unwrap_or(limits.max_body_bytes_in_flight);
        limits.max_streams = l.max_streams.unwrap_or(limits.max_streams);
        limits.max_streams_per_token = l.max_streams_per_token.unwrap_or(limits.max_streams_per_token);
        limits.max_connections = l.max_connections.unwrap_or(limits.max_connections);
        limits.max_idle_connections = l.max_idle_connections.unwrap_or(limits.max_idle_connections);
        limits.max_idle_connections_per_peer =
            l.max_idle_connections_per_peer.unwrap_or(limits.max_idle_connections_per_peer);
        limits.idle_timeout_under_pressure =
            l.idle_timeout_under_pressure_ms.map_or(limits.idle_timeout_under_pressure, ms);
        limits.upstream_timeout = l.upstream_timeout_ms.map_or(limits.upstream_timeout, ms);
        limits.upstream_headers_timeout = l.upstream_headers_timeout_ms.map_or(limits.upstream_headers_timeout, ms);
        limits.upstream_idle_timeout = l.upstream_idle_timeout_ms.map_or(limits.upstream_idle_timeout, ms);
        limits.body_read_timeout = l.body_read_timeout_ms.map_or(limits.body_read_timeout, ms);
        limits.header_read_timeout = l.header_read_timeout_ms.map_or(limits.header_read_timeout, ms);
        limits.keepalive_interval = l.keepalive_ms.map_or(limits.keepalive_interval, ms);
        limits.shutdown_grace = l.shutdown_grace_ms.map_or(limits.shutdown_grace, ms);
        limits.retry_after_secs = l.retry_after_secs.unwrap_or(limits.retry_after_secs);
        limits.requests_per_minute = l.requests_per_minute.or(limits.requests_per_minute);
        limits.tokens_per_day = l.tokens_per_day.or(limits.tokens_per_day);
        let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        if let Some(v) = env_number("PI_PROXY_MAX_STREAMS")? {
            limits.max_streams = to_usize(v);
        }
        if let Some(v) = env_number("PI_PROXY_MAX_STREAMS_PER_TOKEN")? {
            limits.max_streams_per_token = to_usize(v);
        }
        if let Some(v) = env_number("PI_PROXY_MAX_BODY_BYTES")? {
            limits.max_body_bytes = to_usize(v);
        }
        if let Some(v) = env_number("PI_PROXY_UPSTREAM_TIMEOUT_MS")? {
            limits.upstream_timeout = ms(v);
        }
        if let Some(v) = env_number("PI_PROXY_SHUTDOWN_GRACE_MS")? {
            limits.shutdown_grace = ms(v);
        }

        let lower = |names: Vec<String>| names.into_iter().map(|n| n.to_ascii_lowercase()).collect::<Vec<_>>();
        let allowed_headers = lower(env_list("PI_PROXY_ALLOW_HEADERS").or(file.allow_headers).unwrap_or_default());
        let allowed_sampling_params = file
            .allow_sampling_params
            .unwrap_or_else(|| DEFAULT_SAMPLING_PARAMS.iter().map(|s| (*s).to_owned()).collect());
        let mut redaction = Redaction::with_default_env();
        redaction.env.extend(file.custom_providers.iter().filter_map(|p| p.api_key_env.clone()));
        Ok(Self { models: Arc::new(models), tokens, limits, allowed_headers, allowed_sampling_params, redaction })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn token_list() {
        let tokens = parse_token_list("web:aaaa, bbbb ,");
        assert_eq!(tokens.len(), 2);
        assert_eq!((tokens[0].id.as_str(), tokens[0].secret.as_str()), ("web", "aaaa"));
        assert_eq!(tokens[1].id, "token2");
    }

    #[test]
    fn custom_models_get_defaults() {
        let fields = serde_json::json!({"id": "qwen3", "api": "openai-completions", "baseUrl": "http://10.0.0.5/v1"});
        let model = custom_model("local", fields.as_object().unwrap().clone()).unwrap();
        assert_eq!(model.provider, "local");
        assert_eq!(model.name, "qwen3");
        assert_eq!(model.context_window, 128_000);
        let wrong = serde_json::json!({"id": "x", "api": "a", "baseUrl": "b", "provider": "other"});
        assert!(custom_model("local", wrong.as_object().unwrap().clone()).is_err());
    }

    #[test]
    fn file_config_parses() {
        let file: FileConfig = serde_json::from_value(serde_json::json!({
            "tokens": [{"id": "web", "token": "0123456789abcdef"}],
            "providers": ["anthropic"],
            "customProviders": [{"id": "local", "models": [{"id": "q", "api": "openai-completions", "baseUrl": "http://h/v1"}]}],
            "allowHeaders": ["Anthropic-Beta"],
            "limits": {"maxStreams": 3}
        }))
        .unwrap();
        let config = ServerConfig::from_file_config(file).unwrap();
        assert_eq!(config.limits.max_streams, 3);
        assert_eq!(config.allowed_headers, vec!["anthropic-beta".to_owned()]);
        assert!(config.models.get_model("local", "q").is_some());
        assert!(config.models.get_model("anthropic", "claude-sonnet-4-5").is_some());
        assert!(config.models.get_model("openai", "gpt-4o").is_none());
    }
}
