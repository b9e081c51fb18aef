//! Custom providers from a `models.json` file, in the reference's format (pi's
//! `~/.pi/agent/models.json`):
//!
//! ```json
//! {"providers": {"local": {"baseUrl": "http://localhost:8000/v1", "api": "openai-completions",
//!   "apiKey": "$LOCAL_KEY", "headers": {"x-team": "pi"}, "compat": {...},
//!   "models": [{"id": "qwen3", "contextWindow": 32768}]}}}
//! ```
//!
//! A model takes the provider's `api` and `baseUrl` unless it names its own, and the
//! reference's defaults: `name` = `id`, `reasoning` false, `input` `["text"]`, zero cost,
//! `contextWindow` 128,000 and `maxTokens` 16,384; the provider's `compat` is merged under the
//! model's. `apiKey` is a literal key or `$NAME` (the environment variable). With the `http`
//! feature, [`ModelsFile`] is a [`ModelSource`](super::ModelSource) that re-reads the file on
//! each refresh, so edits show without a restart. Not supported (an error names them):
//! `!command` keys, `oauth`, `modelOverrides` and comments in the file.

use std::path::{Path, PathBuf};

use pi_types::Model;
use serde_json::{json, Map, Value};

use super::ModelsStoreError;

fn invalid(path: &Path, reason: impl std::fmt::Display) -> ModelsStoreError {
    ModelsStoreError::Source(format!("Invalid models.json: {reason}\n\nFile: {}", path.display()))
}

/// The `providers` object of the file at `path`; an empty one when the file does not exist.
pub fn read_providers(path: &Path) -> Result<Map<String, Value>, ModelsStoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(ModelsStoreError::Source(format!(
                "Failed to load models.json: {e}\n\nFile: {}",
                path.display()
            )))
        }
    };
    let parsed: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).map_err(|e| {
        ModelsStoreError::Source(format!("Failed to parse models.json: {e}\n\nFile: {}", path.display()))
    })?;
    match parsed.get("providers") {
        Some(Value::Object(providers)) => Ok(providers.clone()),
        _ => Err(invalid(path, "providers: expected an object")),
    }
}

/// The models of provider `id` of a `providers` entry, with the reference's defaults.
pub fn provider_models(id: &str, config: &Value) -> Result<Vec<Model>, String> {
    for unsupported in ["oauth", "modelOverrides"] {
        if config.get(unsupported).is_some() {
            return Err(format!("Provider {id}: \"{unsupported}\" is not supported"));
        }
    }
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut models = Vec::new();
    for definition in config.get("models").and_then(Value::as_array).into_iter().flatten() {
        let model_id =
            text(definition, "id").filter(|m| !m.is_empty()).ok_or(format!("Provider {id}: a model has no id"))?;
        let api = text(definition, "api").or_else(|| text(config, "api")).ok_or_else(|| {
            format!("Provider {id}, model {model_id}: no \"api\" specified. Set at provider or model level.")
        })?;
        let base_url = text(definition, "baseUrl")
            .or_else(|| text(config, "baseUrl"))
            .ok_or(format!("Provider {id}: \"baseUrl\" is required when defining custom models."))?;
        for limit in ["contextWindow", "maxTokens"] {
            if definition.get(limit).and_then(Value::as_f64).is_some_and(|n| n <= 0.0) {
                return Err(format!("Provider {id}, model {model_id}: invalid {limit}"));
            }
        }
        let mut model = definition.as_object().cloned().unwrap_or_default();
        model.remove("headers");
        let mut defaults = json!({
            "id": model_id, "name": model_id, "api": api, "provider": id, "baseUrl": base_url,
            "reasoning": false, "input": ["text"],
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 128_000, "maxTokens": 16_384,
        });
        if let Some(Value::Object(defaults)) = Some(&mut defaults) {
            for (key, value) in model {
                if !matches!(key.as_str(), "api" | "baseUrl" | "provider") {
                    defaults.insert(key, value);
                }
            }
            let compat = merge_compat(config.get("compat"), definition.get("compat"));
            match compat {
                Some(compat) => defaults.insert("compat".into(), compat),
                None => defaults.remove("compat"),
            };
            let headers: Map<String, Value> = [config.get("headers"), definition.get("headers")]
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
                .flat_map(|h| h.iter().map(|(k, v)| (k.clone(), v.clone())))
                .collect();
            if !headers.is_empty() {
                defaults.insert("headers".into(), Value::Object(headers));
            }
        }
        let model: Model =
            serde_json::from_value(defaults).map_err(|e| format!("Provider {id}, model {model_id}: {e}"))?;
        models.push(model);
    }
    Ok(models)
}

fn merge_compat(base: Option<&Value>, over: Option<&Value>) -> Option<Value> {
    match (base.and_then(Value::as_object), over.and_then(Value::as_object)) {
        (None, None) => None,
        (Some(one), None) | (None, Some(one)) => Some(Value::Object(one.clone())),
        (Some(base), Some(over)) => {
            let mut merged = base.clone();
            merged.extend(over.iter().map(|(k, v)| (k.clone(), v.clone())));
            Some(Value::Object(merged))
        }
    }
}

/// The key source of a provider entry: `$NAME` reads the variable, anything else is the key.
pub fn provider_auth(id: &str, config: &Value) -> Result<crate::registry::Auth, String> {
    use crate::registry::Auth;
    Ok(match config.get("apiKey").and_then(Value::as_str) {
        None => Auth::None,
        Some(command) if command.starts_with('!') => {
            return Err(format!("Provider {id}: \"!command\" keys are not supported"))
        }
        Some(var) if var.starts_with('$') && var.len() > 1 => Auth::Env(vec![var[1..].to_owned()]),
        Some(key) => Auth::ApiKey(key.to_owned()),
    })
}

/// A file's providers: each with its models, key source and name, the HTTP adapters, and a
/// [`ModelsFile`] source, in the file's order.
#[cfg(feature = "http")]
pub fn load(path: impl Into<PathBuf>) -> Result<Vec<crate::registry::Provider>, ModelsStoreError> {
    let path = path.into();
    let mut providers = Vec::new();
    for (id, config) in read_providers(&path)? {
        let models = provider_models(&id, &config).map_err(|e| invalid(&path, e))?;
        let auth = provider_auth(&id, &config).map_err(|e| invalid(&path, e))?;
        let name = config.get("name").and_then(Value::as_str).unwrap_or(&id).to_owned();
        let source = ModelsFile { path: path.clone(), provider_id: id.clone() };
        providers.push(
            crate::registry::Provider::new(id.as_str())
                .with_name(name)
                .with_auth(auth)
                .with_models(models)
                .with_http_apis()
                .with_model_source(std::sync::Arc::new(source)),
        );
    }
    Ok(providers)
}

/// One provider's models, re-read from its file on every refresh; they replace the models it
/// had.
#[derive(Clone, Debug)]
pub struct ModelsFile {
    path: PathBuf,
    provider_id: String,
}

impl ModelsFile {
    /// The models of `provider_id` in the file at `path`.
    pub fn new(path: impl Into<PathBuf>, provider_id: impl Into<String>) -> Self {
        Self { path: path.into(), provider_id: provider_id.into() }
    }

    /// The provider's models as the file lists them now (none when the file or the provider
    /// is gone).
    pub fn read(&self) -> Result<Vec<Model>, ModelsStoreError> {
        match read_providers(&self.path)?.get(&self.provider_id) {
            Some(config) => provider_models(&self.provider_id, config).map_err(|e| invalid(&self.path, e)),
            None => Ok(Vec::new()),
        }
    }
}

#[cfg(feature = "http")]
impl super::ModelSource for ModelsFile {
    fn fetch<'a>(
        &'a self,
        _context: &'a super::RefreshContext,
    ) -> futures::future::BoxFuture<'a, Result<Vec<super::AnyModel>, ModelsStoreError>> {
        Box::pin(async move { Ok(self.read()?.into_iter().map(super::AnyModel::Chat).collect()) })
    }

    fn replaces_baseline(&self) -> bool {
        true
    }
}
