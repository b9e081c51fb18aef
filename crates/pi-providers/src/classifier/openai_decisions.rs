//! `openai-decisions`: OpenAI's Decisions API, `POST {baseUrl}/decisions` with
//! `{model, input, questions}`.
//!
//! The state goes as JSON text; with images, the input is one user message of the state as
//! `input_text` followed by `input_image` data URLs (at most 128). Questions map to Decisions
//! types: `choice` to `choice` (choices with optional descriptions), `score` to `score`
//! (levels), `bool` to `predicate`, whose meanings of true and false are appended to the
//! instructions (predicates have no criteria field). A refused answer fails the result.
//! A gateway timeout (504) is not retried: the same large input would run into it again.
//! Only OpenAI API keys work (ChatGPT sign-in tokens are rejected on this route).

use indexmap::IndexMap;
use pi_types::StreamOptions;
use serde_json::{json, Value};

use super::shared::{self, join, required_number, Wording};
use super::{ClassifierAnswer, ClassifierContext, ClassifierModel, ClassifierQuestion, ClassifierResult};

/// The API id.
pub const API: &str = "openai-decisions";
const LABEL: &str = "OpenAI Decisions";
/// The endpoint accepts at most this many image parts per request.
const MAX_IMAGES: usize = 128;

const WORDING: Wording = Wording {
    label: LABEL,
    no_retry: &[504],
    status_note: Some(|status| {
        (status == 504).then(|| {
            format!(
                "{LABEL} error (504): the request timed out at the gateway. Very large inputs (above roughly 600K \
                 tokens) currently exceed its time limit."
            )
        })
    }),
    key_required: true,
};

fn wire_question(name: &str, question: &ClassifierQuestion) -> Value {
    match question {
        ClassifierQuestion::Choice { instructions, criteria } => {
            let choices: Vec<Value> = criteria
                .iter()
                .map(|(value, description)| {
                    if description.is_empty() {
                        json!({"value": value})
                    } else {
                        json!({"value": value, "description": description})
                    }
                })
                .collect();
            json!({"type": "choice", "name": name, "instructions": instructions, "choices": choices})
        }
        ClassifierQuestion::Score { instructions, criteria } => {
            let levels: Vec<Value> = criteria.iter().map(|label| json!({"label": label})).collect();
            json!({"type": "score", "name": name, "instructions": instructions, "levels": levels})
        }
        ClassifierQuestion::Bool { instructions, criteria } => {
            let meanings: Vec<String> = [("True", &criteria.yes), ("False", &criteria.no)]
                .iter()
                .filter(|(_, meaning)| !meaning.is_empty())
                .map(|(which, meaning)| format!("{which} means: {meaning}"))
                .collect();
            let instructions = if meanings.is_empty() {
                instructions.clone()
            } else {
                format!("{instructions}\n\n{}", meanings.join("\n"))
            };
            json!({"type": "predicate", "name": name, "instructions": instructions})
        }
    }
}

fn wire_input(context: &ClassifierContext) -> Result<Value, String> {
    let state = crate::js_json::stringify(&Value::Object(context.state.clone()));
    let images = context.images.as_deref().unwrap_or_default();
    if images.is_empty() {
        return Ok(Value::String(state));
    }
    if images.len() > MAX_IMAGES {
        return Err(format!("{LABEL} accepts at most {MAX_IMAGES} images, got {}", images.len()));
    }
    let mut content = vec![json!({"type": "input_text", "text": state})];
    content.extend(images.iter().map(
        |image| json!({"type": "input_image", "image_url": format!("data:{};base64,{}", image.mime_type, image.data)}),
    ));
    Ok(json!([{"role": "user", "content": content}]))
}

fn choice_probabilities(value: Option<&Value>, id: &str) -> Result<IndexMap<String, f64>, String> {
    let invalid = || format!("{LABEL} returned invalid probabilities for {id}");
    let entries = value.and_then(Value::as_array).ok_or_else(invalid)?;
    let mut out = IndexMap::with_capacity(entries.len());
    for entry in entries {
        let value = entry.get("value").and_then(Value::as_str).ok_or_else(invalid)?;
        let probability = required_number(LABEL, entry.get("probability"), &format!("probability for {id}.{value}"))?;
        out.insert(value.to_owned(), probability);
    }
    Ok(out)
}

fn parse_answer(id: &str, question: &ClassifierQuestion, answer: &Value) -> Result<ClassifierAnswer, String> {
    let kind = answer.get("type").and_then(Value::as_str);
    if kind == Some("refusal") {
        return Err(format!("{LABEL} refused to answer {id}"));
    }
    let confidence = || required_number(LABEL, answer.get("confidence"), &format!("confidence for {id}"));
    Ok(match question {
        ClassifierQuestion::Choice { .. } => {
            let choice = answer.get("choice").and_then(Value::as_str).filter(|_| kind == Some("choice"));
            let choice = choice.ok_or_else(|| format!("{LABEL} did not return a choice answer for {id}"))?;
            ClassifierAnswer::Choice {
                choice: choice.to_owned(),
                probabilities: choice_probabilities(answer.get("probabilities"), id)?,
                confidence: confidence()?,
            }
        }
        ClassifierQuestion::Score { .. } => {
            if kind != Some("score") {
                return Err(format!("{LABEL} did not return a score answer for {id}"));
            }
            ClassifierAnswer::Score {
                score: required_number(LABEL, answer.get("score"), &format!("score for {id}"))?,
                confidence: confidence()?,
            }
        }
        ClassifierQuestion::Bool { .. } => {
            if kind != Some("predicate") {
                return Err(format!("{LABEL} did not return a predicate answer for {id}"));
            }
            ClassifierAnswer::Bool {
                probability: required_number(LABEL, answer.get("probability"), &format!("probability for {id}"))?,
            }
        }
    })
}

fn parse_answers(
    value: Option<&Value>,
    context: &ClassifierContext,
) -> Result<IndexMap<String, ClassifierAnswer>, String> {
    let list = value.and_then(Value::as_array).ok_or_else(|| format!("{LABEL} returned an unexpected response"))?;
    // A later answer with the same name wins, as in the reference's map.
    let mut by_name: IndexMap<&str, &Value> = IndexMap::new();
    for answer in list {
        if let Some(name) = answer.as_object().and(answer.get("name")).and_then(Value::as_str) {
            by_name.insert(name, answer);
        }
    }
    let mut out = IndexMap::with_capacity(context.questions.len());
    for (id, question) in &context.questions {
        let answer = by_name.get(id.as_str()).ok_or_else(|| format!("{LABEL} did not return an answer for {id}"))?;
        out.insert(id.clone(), parse_answer(id, question, answer)?);
    }
    Ok(out)
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
    let request_model = model.request_model();
    let questions: Vec<Value> = context.questions.iter().map(|(id, q)| wire_question(id, q)).collect();
    let request = json!({"model": model.id, "input": wire_input(context)?, "questions": questions});
    let url = join(&model.base_url, "decisions");
    let body = shared::post_json(&WORDING, &url, &request_model, request, options, true).await?;
    if !body.is_object() {
        return Err(format!("{LABEL} returned an unexpected response"));
    }
    // Set before the answers are read: a request with malformed or refused answers was still billed.
    result.usage = shared::parse_usage(body.get("usage"), &request_model);
    result.answers = parse_answers(body.get("answers"), context)?;
    Ok(())
}

/// Classification through OpenAI's Decisions API.
pub async fn classify(
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
) -> ClassifierResult {
    let mut result = ClassifierResult::new(model);
    let outcome = run(model, context, options, &mut result).await;
    result.settle(outcome, options)
}

classifier_of_module!(OpenAiDecisions, "openai-decisions");
