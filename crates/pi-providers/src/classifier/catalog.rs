//! The built-in classifier models of pi-ai 1.6.1 (`getBuiltinClassifierModels(provider)`): 81
//! models across 7 providers, every field, in the reference's order. `catalog.json` is
//! generated from the reference package (see `docs/classifiers.md`) and parsed on first use.
//!
//! ```
//! use pi_providers::classifier::catalog;
//! assert_eq!(catalog::provider_ids().len(), 7);
//! let model = catalog::model("openai", "gpt-6-luna").expect("listed");
//! assert_eq!(model.api, "openai-decisions");
//! ```

use std::sync::OnceLock;

use indexmap::IndexMap;

use super::ClassifierModel;

const CATALOG_JSON: &str = include_str!("catalog.json");

/// Every built-in classifier model, grouped by provider id (providers without one left out).
pub fn catalog() -> &'static IndexMap<String, Vec<ClassifierModel>> {
    static CATALOG: OnceLock<IndexMap<String, Vec<ClassifierModel>>> = OnceLock::new();
    CATALOG.get_or_init(|| serde_json::from_str(CATALOG_JSON).unwrap_or_default())
}

/// The providers that have built-in classifier models, in the reference's order.
pub fn provider_ids() -> Vec<&'static str> {
    catalog().keys().map(String::as_str).collect()
}

/// The built-in classifier models of one provider.
pub fn models(provider: &str) -> Vec<ClassifierModel> {
    catalog().get(provider).cloned().unwrap_or_default()
}

/// One built-in classifier model.
pub fn model(provider: &str, id: &str) -> Option<ClassifierModel> {
    catalog().get(provider)?.iter().find(|m| m.id == id).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_parses_whole() {
        // A model that failed to parse would empty the whole catalog (`unwrap_or_default`).
        assert_eq!(catalog().len(), 7);
        assert_eq!(catalog().values().map(Vec::len).sum::<usize>(), 81);
        let luna = model("openai", "gpt-6-luna").map(|m| m.cost.tiers.map_or(0, |t| t.len()));
        assert_eq!(luna, Some(1));
    }
}
