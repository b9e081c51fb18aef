//! `typesafe-system-one`: TypeSafe's native System One protocol, `POST {baseUrl}/systemone`
//! with `{model, state, questions}`. OpenRouter, GitHub Copilot and OpenCode serve the same
//! protocol under their own base URLs.
//!
//! Images: TypeSafe takes them as `assets` and needs the `TypeSafe-Danger-Zone-Images: true`
//! opt-in header (without it the API answers 400); OpenRouter drops `assets` silently and takes
//! them as `image_url` parts before the state. A model behind a proxy that hides both the
//! provider id and the OpenRouter host sets `compat.imageInput`.

use pi_types::StreamOptions;
use serde_json::{Map, Value};

use super::shared::{join, Wording};
use super::system_one::{self, is_openrouter_model, ImageInput, Transport};
use super::{ClassifierContext, ClassifierModel, ClassifierResult};

/// The API id.
pub const API: &str = "typesafe-system-one";

const TRANSPORT: Transport = Transport {
    api: API,
    wording: Wording { label: "System One API", no_retry: &[], status_note: None, key_required: true },
    detect: |model| {
        if is_openrouter_model(model) {
            (ImageInput::StateImageUrls, false)
        } else {
            (ImageInput::Assets, true)
        }
    },
    url: |model| join(&model.base_url, "systemone"),
    payload: |model, request| {
        let mut body = Map::new();
        body.insert("model".to_owned(), Value::String(model.id.clone()));
        if let Value::Object(request) = request {
            body.extend(request);
        }
        Value::Object(body)
    },
    output: |body| match body {
        Value::Object(map) => Ok(map),
        _ => Err("System One API returned an unexpected response".to_owned()),
    },
};

/// TypeSafe System One classification.
pub async fn classify(
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
) -> ClassifierResult {
    system_one::classify(&TRANSPORT, model, context, options).await
}

classifier_of_module!(TypesafeSystemOne, "typesafe-system-one");
