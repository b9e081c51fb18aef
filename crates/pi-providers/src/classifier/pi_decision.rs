//! `pi-decision`: pi's own decision protocol, `POST {baseUrl}/decision` with
//! `{model, context: {state, images?, questions}, options?: {sessionId}}`. A `200` answer is a
//! completed `{answers, usage?, responseId?}` object; errors are non-2xx statuses with the
//! `{error: {message, code?, details?}}` envelope of `pi-messages`. Answers are checked against
//! the questions: choices must be criteria keys, scores within the levels, probabilities and
//! confidences within 0 to 1. A usage with a complete `cost` is kept as reported, else priced
//! from the catalog.

use indexmap::IndexMap;
use pi_types::{StreamOptions, Usage, UsageCost};
use serde_json::{json, Map, Value};

use super::shared::{self, join, required_number, tokens, Wording};
use super::{ClassifierAnswer, ClassifierContext, ClassifierModel, ClassifierQuestion, ClassifierResult};

/// The API id.
pub const API: &str = "pi-decision";
const LABEL: &str = "Pi Decision";
const WORDING: Wording = Wording { label: LABEL, no_retry: &[], status_note: None, key_required: true };

fn finite_non_negative(value: Option<&Value>) -> f64 {
    value.and_then(Value::as_f64).filter(|n| n.is_finite() && *n >= 0.0).unwrap_or(0.0)
}

fn unit_interval(value: Option<&Value>, field: &str) -> Result<f64, String> {
    let number = required_number(LABEL, value, field)?;
    if !(0.0..=1.0).contains(&number) {
        return Err(format!("{LABEL} returned out-of-range {field}: {}", pi_types::json::js::format_number(number)));
    }
    Ok(number)
}

fn parse_usage(value: Option<&Value>, model: &pi_types::Model) -> Option<Usage> {
    let value = value.filter(|v| v.is_object())?;
    let is_number = |key: &str| value.get(key).is_some_and(Value::is_number);
    if !is_number("input") && !is_number("output") {
        return None;
    }
    let input = finite_non_negative(value.get("input"));
    let output = finite_non_negative(value.get("output"));
    let cache_read = finite_non_negative(value.get("cacheRead"));
    let cache_write = finite_non_negative(value.get("cacheWrite"));
    let total = value
        .get("totalTokens")
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite() && *n >= 0.0)
        .unwrap_or(input + output + cache_read + cache_write);
    let mut usage = Usage {
        input: tokens(input),
        output: tokens(output),
        cache_read: tokens(cache_read),
        cache_write: tokens(cache_write),
        total_tokens: tokens(total),
        ..Default::default()
    };
    let reported = value.get("cost").filter(|c| c.is_object());
    match reported.filter(|c| c.get("total").and_then(Value::as_f64).is_some_and(f64::is_finite)) {
        Some(cost) => {
            usage.cost = UsageCost {
                input: finite_non_negative(cost.get("input")),
                output: finite_non_negative(cost.get("output")),
                cache_read: finite_non_negative(cost.get("cacheRead")),
                cache_write: finite_non_negative(cost.get("cacheWrite")),
                total: finite_non_negative(cost.get("total")),
                total_from_provider: cost.get("totalFromProvider").and_then(Value::as_bool),
            };
        }
        None => {
            crate::cost::calculate_cost(model, &mut usage);
        }
    }
    Some(usage)
}

fn parse_answer(id: &str, question: &ClassifierQuestion, answer: &Value) -> Result<ClassifierAnswer, String> {
    if !answer.is_object() {
        return Err(format!("{LABEL} returned an invalid answer for {id}"));
    }
    let kind = answer.get("type").and_then(Value::as_str);
    Ok(match question {
        ClassifierQuestion::Choice { criteria, .. } => {
            let choice = answer.get("choice").and_then(Value::as_str).filter(|_| kind == Some("choice"));
            let choice = choice.ok_or_else(|| format!("{LABEL} did not return a choice answer for {id}"))?;
            if !criteria.contains_key(choice) {
                return Err(format!("{LABEL} returned unknown choice \"{choice}\" for {id}"));
            }
            let map = answer
                .get("probabilities")
                .and_then(Value::as_object)
                .ok_or_else(|| format!("{LABEL} returned invalid probabilities for {id}"))?;
            let mut probabilities = IndexMap::with_capacity(map.len());
            for (key, probability) in map {
                if !criteria.contains_key(key) {
                    return Err(format!("{LABEL} returned unknown choice \"{key}\" in probabilities for {id}"));
                }
                probabilities
                    .insert(key.clone(), unit_interval(Some(probability), &format!("probability for {id}.{key}"))?);
            }
            ClassifierAnswer::Choice {
                choice: choice.to_owned(),
                probabilities,
                confidence: unit_interval(answer.get("confidence"), &format!("confidence for {id}"))?,
            }
        }
        ClassifierQuestion::Score { criteria, .. } => {
            if kind != Some("score") {
                return Err(format!("{LABEL} did not return a score answer for {id}"));
            }
            let score = required_number(LABEL, answer.get("score"), &format!("score for {id}"))?;
            let max_score = criteria.len().saturating_sub(1) as f64;
            if score < 0.0 || score > max_score {
                return Err(format!(
                    "{LABEL} returned out-of-range score for {id}: {}",
                    pi_types::json::js::format_number(score)
                ));
            }
            ClassifierAnswer::Score {
                score,
                confidence: unit_interval(answer.get("confidence"), &format!("confidence for {id}"))?,
            }
        }
        ClassifierQuestion::Bool { .. } => {
            if kind != Some("bool") {
                return Err(format!("{LABEL} did not return a bool answer for {id}"));
            }
            ClassifierAnswer::Bool {
                probability: unit_interval(answer.get("probability"), &format!("probability for {id}"))?,
            }
        }
    })
}

async fn run(
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
    result: &mut ClassifierResult,
) -> Result<(), String> {
    if model.api != API {
        return Err(format!("Unsupported classifier API: {}", model.api));
    }
    let images = context.images.as_deref().unwrap_or_default();
    if !images.is_empty() && !model.accepts_images() {
        return Err(format!("{LABEL} model {} does not support image input", model.id));
    }
    let mut wire_context = Map::new();
    wire_context.insert("state".to_owned(), Value::Object(context.state.clone()));
    if !images.is_empty() {
        let images: Vec<Value> =
            images.iter().map(|i| json!({"type": "image", "data": i.data, "mimeType": i.mime_type})).collect();
        wire_context.insert("images".to_owned(), Value::Array(images));
    }
    wire_context.insert("questions".to_owned(), serde_json::to_value(&context.questions).unwrap_or(Value::Null));
    let mut request = json!({"model": model.id, "context": wire_context});
    if let (Some(session), Some(map)) = (&options.session_id, request.as_object_mut()) {
        map.insert("options".to_owned(), json!({"sessionId": session}));
    }
    let request_model = model.request_model();
    let url = join(&model.base_url, "decision");
    let body = shared::post_json(&WORDING, &url, &request_model, request, options, true).await?;
    let Value::Object(body) = body else { return Err(format!("{LABEL} returned an unexpected response")) };
    if let Some(id) = body.get("responseId").and_then(Value::as_str).filter(|id| !id.is_empty()) {
        result.response_id = Some(id.to_owned());
    }
    result.usage = parse_usage(body.get("usage"), &request_model);
    let answers = body
        .get("answers")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{LABEL} returned an unexpected response"))?;
    let mut out = IndexMap::with_capacity(context.questions.len());
    for (id, question) in &context.questions {
        let answer = answers.get(id).ok_or_else(|| format!("{LABEL} did not return an answer for {id}"))?;
        out.insert(id.clone(), parse_answer(id, question, answer)?);
    }
    result.answers = out;
    Ok(())
}

/// Classification through pi's `POST <baseUrl>/decision` protocol.
pub async fn classify(
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
) -> ClassifierResult {
    let mut result = ClassifierResult::new(model);
    let outcome = run(model, context, options, &mut result).await;
    result.settle(outcome, options)
}

classifier_of_module!(PiDecision, "pi-decision");
