//! GitHub Copilot's per-account models (the reference's `githubCopilotProvider` filters): the
//! sign-in records the ids the account's `/models` catalog offers, `availableModelIds` for chat
//! models and `availableClassifierModelIds` for classifier models (decision models are absent
//! from the account's picker catalog). A credential without such a list (an API key, a sign-in
//! from before the lists were recorded) keeps every model of that type.

use std::collections::HashSet;

use serde_json::Value;

use super::{AnyModel, ModelFilter};
use crate::auth::Credential;

/// The filter over the ids the stored sign-in recorded.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccountModels;

/// The string ids under `key` of an OAuth credential; `None` without a list of strings.
fn account_ids<'a>(credential: Option<&'a Credential>, key: &str) -> Option<HashSet<&'a str>> {
    let Some(Credential::OAuth(oauth)) = credential else { return None };
    let ids = oauth.extra.get(key)?.as_array()?;
    ids.iter().map(Value::as_str).collect()
}

impl ModelFilter for AccountModels {
    fn filter(&self, models: Vec<AnyModel>, credential: Option<&Credential>) -> Vec<AnyModel> {
        let chat = account_ids(credential, "availableModelIds");
        let classifiers = account_ids(credential, "availableClassifierModelIds");
        models
            .into_iter()
            .filter(|model| {
                let available = if matches!(model, AnyModel::Classifier(_)) { &classifiers } else { &chat };
                available.as_ref().is_none_or(|ids| ids.contains(model.id()))
            })
            .collect()
    }
}
