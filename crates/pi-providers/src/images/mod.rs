//! Image generation (the reference's `generateImages`): a prompt of text and images in, an
//! [`AssistantImages`] of text and images out. A call never fails: an error is a result with
//! `stopReason: "error"` and an `errorMessage`.
//!
//! One API: `openrouter-images` ([`openrouter_images`], feature `http`), image generation over
//! OpenRouter's chat completions endpoint. [`generate_images`] dispatches on `model.api`;
//! `Models::generate_images` also resolves the provider's key and client first. The built-in
//! image models are in [`catalog`]. Request options are [`StreamOptions`] (`api_key`,
//! `headers`, `timeout_ms`, `max_retries` (default 0), `cancel`, `on_payload`, `on_response`,
//! `http_client`).

pub mod catalog;
#[cfg(feature = "http")]
pub mod openrouter_images;

use std::fmt;

use futures::future::BoxFuture;
use indexmap::IndexMap;
use pi_types::{InputModality, Model, ModelCost, StreamOptions, Usage, UserContent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The model type tag of an image catalog entry (`"type": "image"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImageType {
    /// `image`.
    #[default]
    #[serde(rename = "image")]
    Image,
}

/// An image-generation model: usable with [`generate_images`] only.
///
/// `Debug` lists the names of [`ImageModel::headers`] but never their values.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageModel {
    /// Always `image`.
    #[serde(rename = "type")]
    pub kind: ImageType,
    /// Model id sent to the service.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Image API id (`openrouter-images`).
    pub api: String,
    /// Provider id.
    pub provider: String,
    /// Base URL of the API.
    pub base_url: String,
    /// Accepted inputs.
    pub input: Vec<InputModality>,
    /// Output modalities: always `image`; `text` when the model can also answer in text.
    pub output: Vec<String>,
    /// Prices in dollars per million tokens.
    pub cost: ModelCost,
    /// Provider input limits, as the catalog has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_limits: Option<Value>,
    /// Extra HTTP headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<IndexMap<String, String>>,
}

impl fmt::Debug for ImageModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Option<Vec<&String>> = self.headers.as_ref().map(|h| h.keys().collect());
        f.debug_struct("ImageModel")
            .field("id", &self.id)
            .field("api", &self.api)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("input", &self.input)
            .field("output", &self.output)
            .field("cost", &self.cost)
            .field("headers", &header_names)
            .finish()
    }
}

impl ImageModel {
    /// The chat-model view the HTTP layer and the auth resolvers take.
    pub fn request_model(&self) -> Model {
        let mut model = Model::new(self.id.as_str())
            .with_api(self.api.as_str())
            .with_provider(self.provider.as_str())
            .with_base_url(self.base_url.clone());
        model.name.clone_from(&self.name);
        model.input.clone_from(&self.input);
        model.cost = self.cost.clone();
        model.headers.clone_from(&self.headers);
        model
    }
}

/// The prompt: text and images, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImagesContext {
    /// Text and image parts.
    pub input: Vec<UserContent>,
}

/// How an image generation ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImagesStopReason {
    /// Done.
    #[default]
    Stop,
    /// Failed: see `errorMessage`.
    Error,
    /// Cancelled.
    Aborted,
}

/// The outcome of an image generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantImages {
    /// The model's API.
    pub api: String,
    /// The model's provider.
    pub provider: String,
    /// The model id.
    pub model: String,
    /// Text and images, in the order the service gave them (text first).
    pub output: Vec<UserContent>,
    /// The service's response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Token usage and its cost at the catalog prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// How it ended.
    pub stop_reason: ImagesStopReason,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Unix time in milliseconds when the call started.
    pub timestamp: u64,
}

impl AssistantImages {
    /// An empty successful result for `model`, stamped now.
    pub fn new(model: &ImageModel) -> Self {
        Self {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            timestamp: pi_types::now_ms(),
            ..Default::default()
        }
    }

    /// A failed result: no output, `stopReason` `error` (or `aborted`).
    pub fn failed(model: &ImageModel, message: impl Into<String>, aborted: bool) -> Self {
        let mut result = Self::new(model);
        result.fail(message.into(), aborted);
        result
    }

    pub(crate) fn fail(&mut self, message: String, aborted: bool) {
        self.stop_reason = if aborted { ImagesStopReason::Aborted } else { ImagesStopReason::Error };
        self.error_message = Some(message);
    }
}

/// One image-generation API. Never fails: errors are results.
pub trait ImageGenerator: Send + Sync {
    /// Generate images for `context` with `model`.
    fn generate_images<'a>(
        &'a self,
        model: &'a ImageModel,
        context: &'a ImagesContext,
        options: &'a StreamOptions,
    ) -> BoxFuture<'a, AssistantImages>;
}

/// The built-in image generator for an API id, if there is one.
#[cfg(feature = "http")]
pub fn builtin(api: &str) -> Option<&'static dyn ImageGenerator> {
    match api {
        openrouter_images::API => Some(&openrouter_images::OpenRouterImages),
        _ => None,
    }
}

/// Generate images with the built-in implementation of `model.api` (the key must be in
/// `options.api_key`; `Models::generate_images` resolves it from the provider).
#[cfg(feature = "http")]
pub async fn generate_images(model: &ImageModel, context: &ImagesContext, options: &StreamOptions) -> AssistantImages {
    match builtin(&model.api) {
        Some(generator) => generator.generate_images(model, context, options).await,
        None => AssistantImages::failed(model, format!("No API provider registered for api: {}", model.api), false),
    }
}
