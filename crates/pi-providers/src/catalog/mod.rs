//! The built-in model catalog: every provider and every chat model of pi-ai 1.6.1's
//! `getBuiltinProviders()` / `getBuiltinModels(provider)` (43 providers, 1,696 models), with all
//! of their fields, in the reference's order, and the environment variables each provider's key
//! is read from (the reference's `env-api-keys.js`).
//!
//! `catalog.json` and `provider_keys.json` are generated from the reference package by
//! `tools/gen_catalog.mjs` and embedded at compile time; they are parsed once, on first use.
//! Fields the Rust [`Model`] type does not name (`type`, `inputLimits`, `lab`, ...) are kept in
//! [`Model::extra`], so a model serializes back to what the reference lists.
//!
//! ```
//! use pi_providers::catalog;
//! assert_eq!(catalog::provider_ids().len(), 43);
//! let model = catalog::model("amazon-bedrock", "amazon.nova-2-lite-v1:0").expect("listed");
//! assert_eq!(model.api, "bedrock-converse-stream");
//! assert_eq!(catalog::key_vars("mistral"), ["MISTRAL_API_KEY"]);
//! ```

use std::sync::OnceLock;

use indexmap::IndexMap;
use pi_types::Model;

const CATALOG_JSON: &str = include_str!("catalog.json");
const PROVIDER_KEYS_JSON: &str = include_str!("provider_keys.json");

/// Every catalog model, grouped by provider id (the reference's order).
pub fn catalog() -> &'static IndexMap<String, Vec<Model>> {
    static CATALOG: OnceLock<IndexMap<String, Vec<Model>>> = OnceLock::new();
    CATALOG.get_or_init(|| serde_json::from_str(CATALOG_JSON).unwrap_or_default())
}

/// The provider ids of the catalog, in the reference's order.
pub fn provider_ids() -> Vec<&'static str> {
    catalog().keys().map(String::as_str).collect()
}

/// The catalog models of one provider.
pub fn models(provider: &str) -> Vec<Model> {
    catalog().get(provider).cloned().unwrap_or_default()
}

/// One catalog model.
pub fn model(provider: &str, id: &str) -> Option<Model> {
    catalog().get(provider)?.iter().find(|m| m.id == id).cloned()
}

/// The environment variables a provider's key is read from, in the order they are tried
/// (empty for providers whose credentials come from elsewhere, such as `amazon-bedrock`).
pub fn key_vars(provider: &str) -> &'static [String] {
    static KEYS: OnceLock<IndexMap<String, Vec<String>>> = OnceLock::new();
    KEYS.get_or_init(|| serde_json::from_str(PROVIDER_KEYS_JSON).unwrap_or_default())
        .get(provider)
        .map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_parses_whole() {
        // A model that failed to parse would empty the whole catalog (`unwrap_or_default`).
        assert_eq!(catalog().len(), 43);
        assert_eq!(catalog().values().map(Vec::len).sum::<usize>(), 1696);
        let model = model("google", "gemini-2.5-flash");
        assert!(model.is_some_and(|m| m.reasoning && m.context_window > 0));
    }

    #[test]
    fn every_provider_has_its_key_list() {
        for provider in provider_ids() {
            let vars = key_vars(provider);
            assert!(vars.iter().all(|v| !v.is_empty()), "{provider}");
        }
        assert_eq!(key_vars("anthropic"), ["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"]);
        assert!(key_vars("amazon-bedrock").is_empty());
        assert!(key_vars("no-such-provider").is_empty());
    }
}
