//! `cloudflare-workers-ai-system-one`: System One models on the Workers AI REST endpoint,
//! `POST {baseUrl}/run` with `{model, input: {state, questions}}`. The answer comes in
//! Cloudflare's envelope: third-party models (`typesafe/jev`) add a run record
//! (`{success, result: {state: "Completed", result: {answers, usage}}}`), Cloudflare-hosted
//! ones (`@cf/cloudflare/clef`) answer directly (`{success, result: {model, answers, usage}}`).
//!
//! Images: Clef models take an `images` list of data URLs, TypeSafe's models `assets` without
//! TypeSafe's opt-in header. The catalog sets `compat.imageInput`; the id check covers models
//! without it. The base URL's `{CLOUDFLARE_ACCOUNT_ID}` is filled by `Models::classify`.

use pi_types::StreamOptions;
use serde_json::{json, Map, Value};

use super::shared::{join, js_string, Wording};
use super::system_one::{self, ImageInput, Transport};
use super::{ClassifierContext, ClassifierModel, ClassifierResult};

/// The API id.
pub const API: &str = "cloudflare-workers-ai-system-one";
const LABEL: &str = "Cloudflare Workers AI";

fn error_message(errors: Option<&Value>) -> String {
    let messages: Vec<&str> = errors
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|e| e.get("message").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    if messages.is_empty() {
        format!("{LABEL} request failed")
    } else {
        format!("{LABEL} error: {}", messages.join("; "))
    }
}

fn output(body: Value) -> Result<Map<String, Value>, String> {
    let unexpected = || format!("{LABEL} returned an unexpected response");
    let Value::Object(mut body) = body else { return Err(unexpected()) };
    if body.get("success") == Some(&Value::Bool(false)) {
        return Err(error_message(body.get("errors")));
    }
    let Some(Value::Object(mut result)) = body.remove("result") else { return Err(unexpected()) };
    if result.contains_key("answers") {
        return Ok(result);
    }
    if result.get("state").and_then(Value::as_str) != Some("Completed") {
        return Err(format!("{LABEL} run did not complete (state: {})", js_string(result.get("state"))));
    }
    match result.remove("result") {
        Some(Value::Object(inner)) => Ok(inner),
        _ => Err(unexpected()),
    }
}

const TRANSPORT: Transport = Transport {
    api: API,
    wording: Wording { label: LABEL, no_retry: &[], status_note: None, key_required: true },
    detect: |model| {
        let input = if model.id.starts_with("@cf/cloudflare/clef") { ImageInput::DataUrls } else { ImageInput::Assets };
        (input, false)
    },
    url: |model| join(&model.base_url, "run"),
    payload: |model, request| json!({"model": model.id, "input": request}),
    output,
};

/// Cloudflare Workers AI System One classification.
pub async fn classify(
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
) -> ClassifierResult {
    system_one::classify(&TRANSPORT, model, context, options).await
}

classifier_of_module!(CloudflareWorkersAiSystemOne, "cloudflare-workers-ai-system-one");
