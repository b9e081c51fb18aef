//! `GET /api/models`: the models the server serves, so that a client can name one that only
//! the server defines (a custom provider of its configuration) and send it back with the
//! server's `baseUrl` and `api`. Authenticated like the streaming routes; the answer is a
//! [`ModelList`], the models without their `headers`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::handler::{authenticate, AppState};
use crate::wire::ModelList;

/// The served models of every provider in the server's registry, headers removed.
fn served_models(config: &super::ServerConfig) -> ModelList {
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

/// The handler: 401 without a valid token, else the list as JSON.
pub(super) async fn list(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let (status, body) = match authenticate(&state, &headers) {
        Ok(_) => match serde_json::to_vec(&served_models(&state.config)) {
            Ok(body) => (StatusCode::OK, body),
            Err(error) => {
                let message = format!("Cannot list the models: {error}");
                (StatusCode::INTERNAL_SERVER_ERROR, serde_json::json!({ "error": message }).to_string().into_bytes())
            }
        },
        Err(refusal) => (refusal.status, serde_json::json!({ "error": refusal.message }).to_string().into_bytes()),
    };
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
