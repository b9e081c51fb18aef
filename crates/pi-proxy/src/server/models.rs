//! What `GET /api/models` answers: the models the server serves, so that a client can name one that only
//! the server defines (a custom provider of its configuration) and send it back with the
//! server's `baseUrl` and `api`: a [`ModelList`], the models without their `headers`. The
//! route (authenticated like the streaming routes) is in `handler.rs`.

use crate::wire::ModelList;

/// The served models of every provider in the server's registry, headers removed.
pub(super) fn served_models(config: &super::ServerConfig) -> ModelList {
    let models = config
        .models
        .providers()
        .iter()
        .flat_map(|provider| provider.models().iter().cloned())
        .map(|mut model| {
            model.headers = None;
            model
        })
        .collect();
    ModelList { models }
}
