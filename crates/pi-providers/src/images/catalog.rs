//! The built-in image models of pi-ai 1.6.1 (`getBuiltinImageModels(provider)`): 74
//! models, all OpenRouter, every field, in the reference's order. `catalog.json` is
//! generated from the reference package (see `docs/classifiers.md`) and parsed on first use.
//!
//! ```
//! use pi_providers::images::catalog;
//! assert_eq!(catalog::provider_ids(), ["openrouter"]);
//! let model = catalog::model("openrouter", "openai/gpt-image-2.6-flare").expect("listed");
//! assert_eq!(model.api, "openrouter-images");
//! ```

use std::sync::OnceLock;

use indexmap::IndexMap;

use super::ImageModel;

const CATALOG_JSON: &str = include_str!("catalog.json");

/// Every built-in image model, grouped by provider id (providers without one left out).
pub fn catalog() -> &'static IndexMap<String, Vec<ImageModel>> {
    static CATALOG: OnceLock<IndexMap<String, Vec<ImageModel>>> = OnceLock::new();
    CATALOG.get_or_init(|| serde_json::from_str(CATALOG_JSON).unwrap_or_default())
}

/// The providers that have built-in image models, in the reference's order.
pub fn provider_ids() -> Vec<&'static str> {
    catalog().keys().map(String::as_str).collect()
}

/// The built-in image models of one provider.
pub fn models(provider: &str) -> Vec<ImageModel> {
    catalog().get(provider).cloned().unwrap_or_default()
}

/// One built-in image model.
pub fn model(provider: &str, id: &str) -> Option<ImageModel> {
    catalog().get(provider)?.iter().find(|m| m.id == id).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_parses_whole() {
        // A model that failed to parse would empty the whole catalog (`unwrap_or_default`).
        assert_eq!(catalog().len(), 1);
        assert_eq!(catalog().values().map(Vec::len).sum::<usize>(), 74);
        let flare = model("openrouter", "openai/gpt-image-2.6-flare").map(|m| m.output);
        assert_eq!(flare, Some(vec!["image".to_owned()]));
    }
}
