//! The System One protocol both System One APIs speak (the reference's `system-one-shared.js`):
//! `{state, questions}` with `bool` questions as the wire type `noul`, images in one of three
//! forms, answers keyed by question id.

use indexmap::IndexMap;
use pi_types::StreamOptions;
use serde_json::{json, Map, Value};

use super::shared::{self, required_number, Wording};
use super::{ClassifierAnswer, ClassifierContext, ClassifierModel, ClassifierQuestion, ClassifierResult};

/// TypeSafe's opt-in header for its experimental image input.
const IMAGE_OPT_IN_HEADER: &str = "TypeSafe-Danger-Zone-Images";
/// Clef accepts at most this many images per request.
const MAX_DATA_URL_IMAGES: usize = 4;

/// How the service takes images (`compat.imageInput`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ImageInput {
    /// Named `assets` referenced from the state (TypeSafe).
    Assets,
    /// An `images` list of data URLs (Cloudflare's Clef).
    DataUrls,
    /// `image_url` parts before the state (OpenRouter).
    StateImageUrls,
}

impl ImageInput {
    fn parse(value: &str) -> Self {
        match value {
            "images" => Self::DataUrls,
            "state-image-urls" => Self::StateImageUrls,
            _ => Self::Assets,
        }
    }
}

/// One System One service.
pub(super) struct Transport {
    /// The API id.
    pub api: &'static str,
    /// How its errors are worded.
    pub wording: Wording,
    /// The image form and whether to send the opt-in header, for a model without `compat`.
    pub detect: fn(&ClassifierModel) -> (ImageInput, bool),
    /// The endpoint.
    pub url: fn(&ClassifierModel) -> String,
    /// The request body around the System One request.
    pub payload: fn(&ClassifierModel, Value) -> Value,
    /// The System One output inside the answer body.
    pub output: fn(Value) -> Result<Map<String, Value>, String>,
}

/// Runs one System One classification over `transport`.
pub(super) async fn classify(
    transport: &Transport,
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
) -> ClassifierResult {
    let mut result = ClassifierResult::new(model);
    let outcome = run(transport, model, context, options, &mut result).await;
    result.settle(outcome, options)
}

async fn run(
    transport: &Transport,
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
    result: &mut ClassifierResult,
) -> Result<(), String> {
    let label = transport.wording.label;
    if model.api != transport.api {
        return Err(format!("Unsupported classifier API: {}", model.api));
    }
    let mut request = wire_request(context);
    let mut options = std::borrow::Cow::Borrowed(options);
    if let Some(images) = context.images.as_ref().filter(|images| !images.is_empty()) {
        if !model.accepts_images() {
            return Err(format!("{label} does not support image input for {}", model.id));
        }
        let (detected_input, detected_header) = (transport.detect)(model);
        let compat = model.compat.as_ref();
        let input =
            compat.and_then(|c| c.get("imageInput")).and_then(Value::as_str).map_or(detected_input, ImageInput::parse);
        add_images(label, model, input, images, &mut request)?;
        let opt_in =
            compat.and_then(|c| c.get("sendImageOptInHeader")).and_then(Value::as_bool).unwrap_or(detected_header);
        if opt_in && options.headers.get(IMAGE_OPT_IN_HEADER).is_none() {
            let mut with_header = options.into_owned();
            let mut headers = pi_types::RequestHeaders::new();
            headers.insert(IMAGE_OPT_IN_HEADER, Some("true".to_owned()));
            for (name, value) in with_header.headers.iter() {
                headers.insert(name.clone(), value.clone());
            }
            with_header.headers = headers;
            options = std::borrow::Cow::Owned(with_header);
        }
    }
    let request_model = model.request_model();
    let body = shared::post_json(
        &transport.wording,
        &(transport.url)(model),
        &request_model,
        (transport.payload)(model, Value::Object(request)),
        &options,
        true,
    )
    .await?;
    let output = (transport.output)(body)?;
    if let Some(id) = output.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
        result.response_id = Some(id.to_owned());
    }
    // Set before the answers are read: a request with malformed answers was still billed.
    if let Some(mut usage) = shared::parse_usage(output.get("usage"), &request_model) {
        if is_openrouter_model(model) {
            if let Some(reported) = output.get("usage") {
                apply_openrouter_reported_cost(&mut usage, reported);
            }
        }
        result.usage = Some(usage);
    }
    result.answers = parse_answers(label, output.get("answers"), context)?;
    Ok(())
}

/// The public question types on the wire: `bool` is `noul`.
fn wire_request(context: &ClassifierContext) -> Map<String, Value> {
    let questions: Map<String, Value> = context
        .questions
        .iter()
        .map(|(id, question)| {
            let mut wire = serde_json::to_value(question).unwrap_or(Value::Null);
            if matches!(question, ClassifierQuestion::Bool { .. }) {
                if let Some(map) = wire.as_object_mut() {
                    map.insert("type".to_owned(), json!("noul"));
                }
            }
            (id.clone(), wire)
        })
        .collect();
    let mut request = Map::new();
    request.insert("state".to_owned(), Value::Object(context.state.clone()));
    request.insert("questions".to_owned(), Value::Object(questions));
    request
}

fn data_url(image: &pi_types::ImageContent) -> String {
    format!("data:{};base64,{}", image.mime_type, image.data)
}

/// Adds the context images to `request` in the service's form.
fn add_images(
    label: &str,
    model: &ClassifierModel,
    input: ImageInput,
    images: &[pi_types::ImageContent],
    request: &mut Map<String, Value>,
) -> Result<(), String> {
    let state = request.get("state").cloned().unwrap_or(Value::Null);
    match input {
        ImageInput::DataUrls => {
            if images.len() > MAX_DATA_URL_IMAGES {
                return Err(format!(
                    "{label} accepts at most {MAX_DATA_URL_IMAGES} images for {}, got {}",
                    model.id,
                    images.len()
                ));
            }
            let mut urls = Vec::with_capacity(images.len());
            for image in images {
                if !matches!(image.mime_type.as_str(), "image/png" | "image/jpeg" | "image/webp") {
                    return Err(format!(
                        "{label} accepts PNG, JPEG, and WebP images for {}, got {}",
                        model.id, image.mime_type
                    ));
                }
                urls.push(Value::String(data_url(image)));
            }
            request.insert("images".to_owned(), Value::Array(urls));
        }
        ImageInput::StateImageUrls => {
            // OpenRouter validates the images against the model that serves the request.
            let mut parts: Vec<Value> = images
                .iter()
                .map(|image| json!({"type": "image_url", "image_url": {"url": data_url(image)}}))
                .collect();
            parts.push(state);
            request.insert("state".to_owned(), Value::Array(parts));
        }
        ImageInput::Assets => {
            let mut assets = Map::new();
            for (index, image) in images.iter().enumerate() {
                let format = match image.mime_type.as_str() {
                    "image/png" => "png",
                    "image/jpeg" => "jpeg",
                    other => return Err(format!("{label} accepts PNG and JPEG images for {}, got {other}", model.id)),
                };
                assets.insert(
                    format!("<image-{}>", index + 1),
                    json!({"type": "image", "format": format, "data_base64": image.data}),
                );
            }
            // Every asset must be referenced from the request: the names go before the state.
            let mut state_parts: Vec<Value> = assets.keys().map(|name| Value::String(name.clone())).collect();
            state_parts.push(state);
            request.insert("assets".to_owned(), Value::Object(assets));
            request.insert("state".to_owned(), Value::Array(state_parts));
        }
    }
    Ok(())
}

/// OpenRouter by provider id (which survives base URL overrides) or by host.
pub(super) fn is_openrouter_model(model: &ClassifierModel) -> bool {
    model.provider == "openrouter" || model.base_url.contains("openrouter.ai")
}

fn valid_cost(value: Option<&Value>) -> Option<f64> {
    value.and_then(Value::as_f64).filter(|cost| cost.is_finite() && *cost >= 0.0)
}

/// OpenRouter's billed cost replaces the catalog total when its accounting is complete.
fn apply_openrouter_reported_cost(usage: &mut pi_types::Usage, reported: &Value) {
    let Some(cost) = valid_cost(reported.get("cost")) else { return };
    match reported.get("is_byok") {
        Some(Value::Bool(false)) => {
            usage.cost.total = cost;
            usage.cost.total_from_provider = Some(true);
        }
        Some(Value::Bool(true)) => {
            let Some(details) = reported.get("cost_details").filter(|d| pi_types::json::js::truthy(d)) else { return };
            let upstream = match details.get("upstream_inference_cost") {
                Some(Value::Null) => {
                    match (
                        valid_cost(details.get("upstream_inference_prompt_cost")),
                        valid_cost(details.get("upstream_inference_completions_cost")),
                    ) {
                        (Some(prompt), Some(completions)) => Some(prompt + completions),
                        _ => return,
                    }
                }
                other => valid_cost(other),
            };
            if let Some(upstream) = upstream {
                usage.cost.total = cost + upstream;
                usage.cost.total_from_provider = Some(true);
            }
        }
        _ => {}
    }
}

fn probabilities(label: &str, value: Option<&Value>, id: &str) -> Result<IndexMap<String, f64>, String> {
    let map =
        value.and_then(Value::as_object).ok_or_else(|| format!("{label} returned invalid probabilities for {id}"))?;
    map.iter()
        .map(|(key, probability)| {
            Ok((key.clone(), required_number(label, Some(probability), &format!("probability for {id}.{key}"))?))
        })
        .collect()
}

fn parse_answers(
    label: &str,
    value: Option<&Value>,
    context: &ClassifierContext,
) -> Result<IndexMap<String, ClassifierAnswer>, String> {
    let answers = value.and_then(Value::as_object).ok_or_else(|| format!("{label} returned an unexpected response"))?;
    let mut out = IndexMap::with_capacity(context.questions.len());
    for (id, question) in &context.questions {
        let answer = answers
            .get(id)
            .filter(|a| a.is_object())
            .ok_or_else(|| format!("{label} did not return an answer for {id}"))?;
        let kind = answer.get("type").and_then(Value::as_str);
        let parsed = match question {
            ClassifierQuestion::Choice { .. } => {
                let choice = answer.get("choice").and_then(Value::as_str).filter(|_| kind == Some("choice"));
                let choice = choice.ok_or_else(|| format!("{label} did not return a choice answer for {id}"))?;
                ClassifierAnswer::Choice {
                    choice: choice.to_owned(),
                    probabilities: probabilities(label, answer.get("probabilities"), id)?,
                    confidence: required_number(label, answer.get("confidence"), &format!("confidence for {id}"))?,
                }
            }
            ClassifierQuestion::Score { .. } => {
                if kind != Some("score") {
                    return Err(format!("{label} did not return a score answer for {id}"));
                }
                ClassifierAnswer::Score {
                    score: required_number(label, answer.get("score"), &format!("score for {id}"))?,
                    confidence: required_number(label, answer.get("confidence"), &format!("confidence for {id}"))?,
                }
            }
            ClassifierQuestion::Bool { .. } => {
                if kind != Some("noul") {
                    return Err(format!("{label} did not return a bool answer for {id}"));
                }
                ClassifierAnswer::Bool {
                    probability: required_number(label, answer.get("noul"), &format!("probability for {id}"))?,
                }
            }
        };
        out.insert(id.clone(), parsed);
    }
    Ok(out)
}
