//! `openrouter-images`: image generation over OpenRouter's chat completions endpoint,
//! `POST {baseUrl}/chat/completions` (as the OpenAI SDK sends it) with one user message of
//! `text` and `image_url` parts, `stream: false` and `modalities` (`["image", "text"]` when the
//! model's output includes text, else `["image"]`).
//!
//! The answer's first choice gives the output: its `content` as one text block when non-empty,
//! then each `images[].image_url` (an object with `url`, or a string) that is a base64 data URL
//! as an image block; remote URLs and other data URLs are skipped. Usage is priced at the
//! catalog rates: `cached_tokens` minus `cache_write_tokens` are cache reads, and neither counts
//! as input. HTTP errors read as the OpenAI SDK words them (`<status>: <error JSON>`).

use futures::future::BoxFuture;
use futures::FutureExt;
use pi_types::{ImageContent, Model, StreamOptions, TextContent, Usage, UsageCost, UserContent};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use super::{AssistantImages, ImageGenerator, ImageModel, ImagesContext};
use crate::api::support::{apply_on_payload, identity_headers, merge_headers, model_headers, option_headers};
use crate::transport::http::{self, ApiError, Dialect};

/// The API id.
pub const API: &str = "openrouter-images";
/// Largest answer read: a few images as base64 data URLs.
const MAX_BODY_BYTES: usize = 64 << 20;

struct OpenAiSdkDialect;

impl Dialect for OpenAiSdkDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        crate::api::openai::completions::openai_status_error(status, headers, body)
    }

    fn format(&self, error: &ApiError) -> String {
        http::format_provider_error(error, None)
    }
}

fn build_params(model: &ImageModel, context: &ImagesContext) -> Value {
    let content: Vec<Value> = context
        .input
        .iter()
        .map(|item| match item {
            UserContent::Text(text) => json!({"type": "text", "text": text.text}),
            UserContent::Image(image) => {
                json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{}", image.mime_type, image.data)}})
            }
        })
        .collect();
    let modalities = if model.output.iter().any(|o| o == "text") { json!(["image", "text"]) } else { json!(["image"]) };
    json!({
        "model": model.id,
        "messages": [{"role": "user", "content": content}],
        "stream": false,
        "modalities": modalities,
    })
}

/// A `||`-defaulted token count (`value || 0`).
fn count(value: Option<&Value>) -> f64 {
    value.and_then(Value::as_f64).filter(|n| *n != 0.0 && !n.is_nan()).unwrap_or(0.0)
}

fn parse_usage(raw: &Value, model: &Model) -> Usage {
    let prompt = count(raw.get("prompt_tokens"));
    let details = raw.get("prompt_tokens_details");
    let reported_cached = count(details.and_then(|d| d.get("cached_tokens")));
    let cache_write = count(details.and_then(|d| d.get("cache_write_tokens")));
    let cache_read = if cache_write > 0.0 { (reported_cached - cache_write).max(0.0) } else { reported_cached };
    let input = (prompt - cache_read - cache_write).max(0.0);
    let output = count(raw.get("completion_tokens"));
    let rates = &model.cost;
    let mut cost = UsageCost {
        input: (rates.input / 1_000_000.0) * input,
        output: (rates.output / 1_000_000.0) * output,
        cache_read: (rates.cache_read / 1_000_000.0) * cache_read,
        cache_write: (rates.cache_write / 1_000_000.0) * cache_write,
        total: 0.0,
        total_from_provider: Some(false),
    };
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write;
    // Whole token counts; a fractional count from the service is cut to its integer.
    Usage {
        input: input as u64,
        output: output as u64,
        cache_read: cache_read as u64,
        cache_write: cache_write as u64,
        total_tokens: (input + output + cache_read + cache_write) as u64,
        cost,
        ..Default::default()
    }
}

/// `^data:([^;]+);base64,(.+)$`: the MIME type and the data of a base64 data URL.
fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (mime, rest) = rest.split_once(';')?;
    let data = rest.strip_prefix("base64,")?;
    let line_break = |c: char| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}');
    (!mime.is_empty() && !data.is_empty() && !data.contains(line_break)).then_some((mime, data))
}

fn read_output(answer: &Value, out: &mut AssistantImages) -> Result<(), String> {
    let Some(choices) = answer.get("choices").filter(|c| !c.is_null()) else {
        return Err("Cannot read properties of undefined (reading '0')".to_owned());
    };
    let Some(choice) = choices.get(0).filter(|c| !c.is_null()) else { return Ok(()) };
    let Some(message) = choice.get("message").filter(|m| !m.is_null()) else {
        return Err("Cannot read properties of undefined (reading 'content')".to_owned());
    };
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        out.output.push(UserContent::Text(TextContent { text: text.to_owned(), ..Default::default() }));
    }
    for image in message.get("images").and_then(Value::as_array).into_iter().flatten() {
        let url = match image.get("image_url") {
            Some(Value::String(url)) => Some(url.as_str()),
            Some(other) => other.get("url").and_then(Value::as_str),
            None => None,
        };
        if let Some((mime_type, data)) = url.and_then(split_data_url) {
            out.output
                .push(UserContent::Image(ImageContent { data: data.to_owned(), mime_type: mime_type.to_owned() }));
        }
    }
    Ok(())
}

async fn run(
    model: &ImageModel,
    context: &ImagesContext,
    options: &StreamOptions,
    out: &mut AssistantImages,
) -> Result<(), String> {
    let api_key = options
        .api_key
        .as_deref()
        .filter(|key| !key.is_empty())
        .ok_or_else(|| format!("No API key for provider: {}", model.provider))?;
    let request_model = model.request_model();
    let params = apply_on_payload(options, &request_model, build_params(model, context)).await;
    let defaults = vec![
        ("authorization".to_owned(), Some(format!("Bearer {api_key}"))),
        ("content-type".to_owned(), Some("application/json".to_owned())),
        ("accept".to_owned(), Some("application/json".to_owned())),
    ];
    let headers = merge_headers(&[
        defaults,
        identity_headers(&request_model, options),
        model_headers(&request_model),
        option_headers(options),
    ]);
    let url = format!("{}/chat/completions", model.base_url.strip_suffix('/').unwrap_or(&model.base_url));
    let request = http::Request { url, headers, body: crate::js_json::stringify(&params).into_bytes() };
    let response = http::send(&request, &request_model, options, &OpenAiSdkDialect).await.map_err(|f| f.message)?;
    let answer = crate::classifier::read_json_body(response, options, MAX_BODY_BYTES).await?;
    if let Some(id) = answer.get("id").and_then(Value::as_str) {
        out.response_id = Some(id.to_owned());
    }
    if let Some(usage) = answer.get("usage").filter(|u| pi_types::json::js::truthy(u)) {
        out.usage = Some(parse_usage(usage, &request_model));
    }
    read_output(&answer, out)
}

/// Image generation through OpenRouter.
pub async fn generate_images(model: &ImageModel, context: &ImagesContext, options: &StreamOptions) -> AssistantImages {
    let mut out = AssistantImages::new(model);
    if let Err(message) = run(model, context, options, &mut out).await {
        out.fail(message, crate::classifier::cancelled(options));
    }
    out
}

/// The `openrouter-images` [`ImageGenerator`].
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenRouterImages;

impl ImageGenerator for OpenRouterImages {
    fn generate_images<'a>(
        &'a self,
        model: &'a ImageModel,
        context: &'a ImagesContext,
        options: &'a StreamOptions,
    ) -> BoxFuture<'a, AssistantImages> {
        generate_images(model, context, options).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_split_like_the_reference_pattern() {
        assert_eq!(split_data_url("data:image/png;base64,AAAA"), Some(("image/png", "AAAA")));
        assert_eq!(split_data_url("data:image/png,AAAA"), None);
        assert_eq!(split_data_url("data:;base64,AAAA"), None);
        assert_eq!(split_data_url("data:image/png;base64,"), None);
        assert_eq!(split_data_url("https://x/y.png"), None);
    }
}
