//! The built-in model catalog: the chat models pi-ai 1.6.0 lists for `openai`, `anthropic`,
//! `google`, `deepseek`, `groq`, `openrouter` and `mistral` (context window, output limit, reasoning,
//! thinking-level map, prices, compatibility switches).
//!
//! `catalog.json` is generated from pi-ai's `models.generated.js` by
//! `tools/gen_catalog.mjs` and embedded at compile time.

use std::sync::OnceLock;

use indexmap::IndexMap;
use pi_types::Model;

const CATALOG_JSON: &str = include_str!("catalog.json");

/// Every catalog model, grouped by provider id (catalog order).
pub fn catalog() -> &'static IndexMap<String, Vec<Model>> {
    static CATALOG: OnceLock<IndexMap<String, Vec<Model>>> = OnceLock::new();
    CATALOG.get_or_init(|| serde_json::from_str(CATALOG_JSON).unwrap_or_default())
}

/// The provider ids of the catalog.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_parses() {
        for provider in ["openai", "anthropic", "google", "deepseek", "groq", "openrouter", "mistral"] {
            assert!(!models(provider).is_empty(), "{provider}");
        }
        assert!(models("anthropic").len() >= 5);
        let model = model("google", "gemini-2.5-flash");
        assert!(model.is_some_and(|m| m.reasoning && m.context_window > 0));
        let magistral = super::model("mistral", "magistral-medium-latest").expect("listed");
        assert_eq!(magistral.api, "mistral-conversations");
        assert_eq!((magistral.cost.input, magistral.cost.output), (2.0, 5.0));
    }
}
