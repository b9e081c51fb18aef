//! The live model store: provider catalogs that change after the build, as pi-ai 1.6.1's
//! `ModelsStore`, `Models.refresh`, `fetchModels` and `filterModels` keep them.
//!
//! * [`AnyModel`]: a model of any type (chat, classifier, image), as stored catalogs and live
//!   sources list them; entries of a type this version does not know are dropped on read.
//! * [`ModelsStore`]: the persisted catalogs, one [`ModelsStoreEntry`] per provider id.
//!   [`InMemoryModelsStore`] is the reference's default; [`FileModelsStore`] keeps them in one
//!   JSON file (`{"radius": {"models": [...], "checkedAt": ...}}`, the reference's
//!   `models-store.json`), replaced atomically.
//! * With the `http` feature, [`refresh`](crate::Models::refresh) restores each dynamic
//!   provider's stored catalog, then fetches a new one with the provider's credential and
//!   publishes it: the store is written first, then the registry's catalog is swapped in one
//!   step, so a reader sees the old catalog or the new one, and a failed refresh keeps the last
//!   good one. The sources: [`radius`] (the gateway's `GET /v1/config`, which replaces the
//!   shipped baseline), [`models_file`] (a custom provider's models from a `models.json` file);
//!   the filter: [`copilot`] (the models a GitHub Copilot account may use).
//!
//! ```
//! use pi_providers::models_store::{AnyModel, InMemoryModelsStore, ModelsStore, ModelsStoreEntry};
//! let store = InMemoryModelsStore::default();
//! let model = pi_types::Model::new("m").with_api("openai-completions").with_provider("p");
//! let entry = ModelsStoreEntry { models: vec![AnyModel::Chat(model)], checked_at: Some(1), ..Default::default() };
//! store.write("p", &entry).expect("in memory");
//! assert_eq!(store.read("p").expect("in memory"), Some(entry));
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pi_types::Model;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::classifier::ClassifierModel;
use crate::images::ImageModel;

#[cfg(feature = "http")]
pub mod copilot;
pub mod models_file;
#[cfg(feature = "http")]
pub mod radius;
#[cfg(feature = "http")]
mod refresh;

#[cfg(feature = "http")]
pub use refresh::{ModelFilter, ModelSource, RefreshContext, RefreshOptions, RefreshResult};

/// A model of any type.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyModel {
    /// A chat model (`type` `chat` or absent).
    Chat(Model),
    /// A classifier model (`type` `classifier`).
    Classifier(ClassifierModel),
    /// An image-generation model (`type` `image`).
    Image(ImageModel),
}

impl AnyModel {
    /// The model from its JSON; `None` for a type this version does not know or an entry that
    /// does not parse (the reference drops models of unknown types the same way).
    pub fn from_value(value: Value) -> Option<Self> {
        match value.get("type").map(Value::as_str) {
            None | Some(Some("chat")) => serde_json::from_value(value).ok().map(Self::Chat),
            Some(Some("classifier")) => serde_json::from_value(value).ok().map(Self::Classifier),
            Some(Some("image")) => serde_json::from_value(value).ok().map(Self::Image),
            Some(_) => None,
        }
    }

    /// `chat`, `classifier` or `image`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Chat(_) => "chat",
            Self::Classifier(_) => "classifier",
            Self::Image(_) => "image",
        }
    }

    /// The model id.
    pub fn id(&self) -> &str {
        match self {
            Self::Chat(m) => &m.id,
            Self::Classifier(m) => &m.id,
            Self::Image(m) => &m.id,
        }
    }

    /// The provider id.
    pub fn provider(&self) -> &str {
        match self {
            Self::Chat(m) => &m.provider,
            Self::Classifier(m) => &m.provider,
            Self::Image(m) => &m.provider,
        }
    }

    /// The API id.
    pub fn api(&self) -> &str {
        match self {
            Self::Chat(m) => &m.api,
            Self::Classifier(m) => &m.api,
            Self::Image(m) => &m.api,
        }
    }
}

impl Serialize for AnyModel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Chat(m) => m.serialize(serializer),
            Self::Classifier(m) => m.serialize(serializer),
            Self::Image(m) => m.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for AnyModel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).ok_or_else(|| serde::de::Error::custom("not a model of a known type"))
    }
}

/// One provider's persisted catalog (the reference's `ModelsStoreEntry`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelsStoreEntry {
    /// The models, of every type; entries of unknown types are dropped when read.
    #[serde(deserialize_with = "known_models")]
    pub models: Vec<AnyModel>,
    /// Unix time of the remote catalog's `Last-Modified`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<u64>,
    /// Unix milliseconds of the last completed remote check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<u64>,
    /// The remote catalog's `ETag`, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

fn known_models<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<AnyModel>, D::Error> {
    let values = Vec::<Value>::deserialize(deserializer)?;
    Ok(values.into_iter().filter_map(AnyModel::from_value).collect())
}

/// Why the model store or a refresh failed. No variant's text contains a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelsStoreError {
    /// The store could not be read or written.
    #[error("Models store {action} failed for {provider}: {reason}")]
    Store {
        /// `read`, `write` or `delete`.
        action: &'static str,
        /// The provider id.
        provider: String,
        /// What went wrong.
        reason: String,
    },
    /// The credential could not be read or refreshed.
    #[error("{0}")]
    Auth(String),
    /// The catalog source failed (network, status, body).
    #[error("{0}")]
    Source(String),
}

/// Persistent model catalogs keyed by provider id (the reference's `ModelsStore`). `read`
/// answers `Ok(None)` for a missing entry; methods fail only when the storage fails.
pub trait ModelsStore: Send + Sync {
    /// The stored entry of a provider.
    fn read(&self, provider_id: &str) -> Result<Option<ModelsStoreEntry>, ModelsStoreError>;
    /// Replace the entry of a provider.
    fn write(&self, provider_id: &str, entry: &ModelsStoreEntry) -> Result<(), ModelsStoreError>;
    /// Remove the entry of a provider.
    fn delete(&self, provider_id: &str) -> Result<(), ModelsStoreError>;
}

/// Entries held in memory (the reference's default).
#[derive(Debug, Default)]
pub struct InMemoryModelsStore {
    entries: Mutex<HashMap<String, ModelsStoreEntry>>,
}

impl InMemoryModelsStore {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, ModelsStoreEntry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ModelsStore for InMemoryModelsStore {
    fn read(&self, provider_id: &str) -> Result<Option<ModelsStoreEntry>, ModelsStoreError> {
        Ok(self.entries().get(provider_id).cloned())
    }

    fn write(&self, provider_id: &str, entry: &ModelsStoreEntry) -> Result<(), ModelsStoreError> {
        self.entries().insert(provider_id.to_owned(), entry.clone());
        Ok(())
    }

    fn delete(&self, provider_id: &str) -> Result<(), ModelsStoreError> {
        self.entries().remove(provider_id);
        Ok(())
    }
}

/// The entries in one JSON file, `{provider: entry}` (the reference's `models-store.json`).
/// Each write re-reads the file and replaces it atomically (temporary file, fsync, rename), so
/// a reader sees the old file or the new one and entries of other providers are kept; writes
/// are serialized within the process. The file holds no credential of the store's, but the
/// models as fetched, a custom provider's `headers` included: it is written owner-only.
#[derive(Debug)]
pub struct FileModelsStore {
    path: PathBuf,
    file: Mutex<()>,
}

impl FileModelsStore {
    /// A store over the file at `path` (created on the first write, with its folder).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), file: Mutex::new(()) }
    }

    /// The store at `$PI_MODELS_STORE`, else `~/.pi/agent/models-store.json` (beside the
    /// credential file's default place).
    pub fn default_location() -> Self {
        let path =
            std::env::var_os("PI_MODELS_STORE").filter(|p| !p.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
                let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
                home.join(".pi").join("agent").join("models-store.json")
            });
        Self::new(path)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fail(&self, action: &'static str, provider: &str, reason: impl std::fmt::Display) -> ModelsStoreError {
        ModelsStoreError::Store {
            action,
            provider: provider.to_owned(),
            reason: format!("{}: {reason}", self.path.display()),
        }
    }

    fn read_all(&self, action: &'static str, provider: &str) -> Result<Map<String, Value>, ModelsStoreError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(self.fail(action, provider, e)),
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_start_matches('\u{feff}');
        if text.trim().is_empty() {
            return Ok(Map::new());
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(self.fail(action, provider, "not a JSON object")),
            Err(e) => Err(self.fail(action, provider, format!("not JSON ({e})"))),
        }
    }

    fn replace(&self, provider: &str, edit: impl FnOnce(&mut Map<String, Value>)) -> Result<(), ModelsStoreError> {
        let _guard = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut all = self.read_all("write", provider)?;
        edit(&mut all);
        let text = serde_json::to_string_pretty(&all).map_err(|e| self.fail("write", provider, e))?;
        crate::atomic_file::replace(&self.path, text.as_bytes()).map_err(|e| self.fail("write", provider, e))
    }
}

impl ModelsStore for FileModelsStore {
    fn read(&self, provider_id: &str) -> Result<Option<ModelsStoreEntry>, ModelsStoreError> {
        match self.read_all("read", provider_id)?.remove(provider_id) {
            None => Ok(None),
            Some(value) => {
                serde_json::from_value(value).map(Some).map_err(|e| self.fail("read", provider_id, e.to_string()))
            }
        }
    }

    fn write(&self, provider_id: &str, entry: &ModelsStoreEntry) -> Result<(), ModelsStoreError> {
        let value = serde_json::to_value(entry).map_err(|e| self.fail("write", provider_id, e))?;
        self.replace(provider_id, |all| {
            all.insert(provider_id.to_owned(), value);
        })
    }

    fn delete(&self, provider_id: &str) -> Result<(), ModelsStoreError> {
        self.replace(provider_id, |all| {
            all.remove(provider_id);
        })
    }
}

/// The registry's model-store state: where catalogs persist, and each provider's refresh
/// generation (a newer refresh, or replacing the provider, supersedes an older refresh).
pub(crate) struct Catalogs {
    store: std::sync::RwLock<std::sync::Arc<dyn ModelsStore>>,
    generations: Mutex<HashMap<String, u64>>,
}

impl Default for Catalogs {
    fn default() -> Self {
        Self {
            store: std::sync::RwLock::new(std::sync::Arc::new(InMemoryModelsStore::default())),
            generations: Mutex::new(HashMap::new()),
        }
    }
}

impl std::fmt::Debug for Catalogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogs").finish_non_exhaustive()
    }
}

impl Catalogs {
    fn generations(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.generations.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Start a new generation of `provider_id`: its number.
    pub(crate) fn begin(&self, provider_id: &str) -> u64 {
        let mut generations = self.generations();
        let generation = generations.entry(provider_id.to_owned()).or_insert(0);
        *generation = generation.wrapping_add(1);
        *generation
    }

    /// The latest generation of `provider_id`.
    pub(crate) fn current(&self, provider_id: &str) -> u64 {
        self.generations().get(provider_id).copied().unwrap_or(0)
    }

    pub(crate) fn store(&self) -> std::sync::Arc<dyn ModelsStore> {
        match self.store.read() {
            Ok(store) => std::sync::Arc::clone(&store),
            Err(poisoned) => std::sync::Arc::clone(&poisoned.into_inner()),
        }
    }

    pub(crate) fn set_store(&self, store: std::sync::Arc<dyn ModelsStore>) {
        match self.store.write() {
            Ok(mut slot) => *slot = store,
            Err(poisoned) => *poisoned.into_inner() = store,
        }
    }
}

/// `base` with `overlay` applied: a model replaces the base model of the same type and id in
/// place, the others are appended (the reference's `createProvider` merge).
pub fn merge_models(base: &[AnyModel], overlay: &[AnyModel]) -> Vec<AnyModel> {
    let mut merged: Vec<AnyModel> = base.to_vec();
    let mut index: HashMap<(&'static str, String), usize> = HashMap::new();
    for (i, model) in merged.iter().enumerate() {
        index.entry((model.kind(), model.id().to_owned())).or_insert(i);
    }
    for model in overlay {
        let key = (model.kind(), model.id().to_owned());
        match index.get(&key) {
            Some(&i) => merged[i] = model.clone(),
            None => {
                index.insert(key, merged.len());
                merged.push(model.clone());
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(id: &str, name: &str) -> AnyModel {
        let mut model = Model::new(id).with_api("openai-completions").with_provider("p");
        model.name = name.into();
        AnyModel::Chat(model)
    }

    #[test]
    fn unknown_types_are_dropped_when_read() {
        let text = r#"{"models": [{"type": "video", "id": "v"}, {"id": "m", "name": "m", "api": "a", "provider": "p",
            "baseUrl": "", "reasoning": false, "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0,
            "cacheWrite": 0}, "contextWindow": 1, "maxTokens": 1}], "checkedAt": 5}"#;
        let entry: ModelsStoreEntry = serde_json::from_str(text).unwrap_or_default();
        assert_eq!(entry.models.iter().map(AnyModel::id).collect::<Vec<_>>(), ["m"]);
        assert_eq!(entry.checked_at, Some(5));
    }

    #[test]
    fn overlay_replaces_in_place_and_appends() {
        let merged = merge_models(&[chat("a", "A"), chat("b", "B")], &[chat("b", "B2"), chat("c", "C")]);
        let names: Vec<String> =
            merged.iter().filter_map(|m| if let AnyModel::Chat(m) = m { Some(m.name.clone()) } else { None }).collect();
        assert_eq!(names, ["A", "B2", "C"]);
    }

    #[test]
    fn the_file_store_keeps_other_providers() {
        let dir = std::env::temp_dir().join(format!("pi-models-store-{}", std::process::id()));
        let store = FileModelsStore::new(dir.join("models-store.json"));
        let entry = ModelsStoreEntry { models: vec![chat("a", "A")], checked_at: Some(1), ..Default::default() };
        assert!(store.write("p", &entry).is_ok());
        assert!(store.write("q", &entry).is_ok());
        assert!(store.delete("p").is_ok());
        assert_eq!(store.read("p").ok(), Some(None));
        assert_eq!(store.read("q").ok(), Some(Some(entry)));
        let _ = std::fs::remove_dir_all(dir);
    }
}
