//! `Models::classify` and `Models::generate_images`: the one-shot calls through the registry
//! (the reference's `Models.classify` / `Models.generateImages`). The model's provider must be
//! registered: its key (unless the options carry one) and HTTP client are resolved as for a
//! stream, Cloudflare's account placeholder is filled from the provider settings, OpenCode's
//! session header is added, and the built-in implementation of the model's API answers.

use pi_types::StreamOptions;

use super::{builtin, ClassifierContext, ClassifierModel, ClassifierResult};
use crate::images::{self, AssistantImages, ImageModel, ImagesContext};
use crate::registry::Models;

/// `base_url` with Cloudflare's `{CLOUDFLARE_ACCOUNT_ID}` / `{CLOUDFLARE_GATEWAY_ID}` filled.
fn fill_placeholders(provider: &str, base_url: &str, options: &StreamOptions) -> Result<String, String> {
    let mut url = base_url.to_owned();
    for name in crate::layer::cloudflare::PLACEHOLDERS {
        let placeholder = format!("{{{name}}}");
        if url.contains(&placeholder) {
            let value =
                options.env_var(name).ok_or_else(|| format!("Provider {provider} is not configured: set {name}"))?;
            url = url.replace(&placeholder, &value);
        }
    }
    Ok(url)
}

impl Models {
    /// Classify `context` with `model` through its provider (see [`crate::classifier`]). Never
    /// fails: a model that takes no images, an unknown provider, a missing key or an API
    /// without an implementation is a result with `stopReason` `error`.
    pub async fn classify(
        &self,
        model: &ClassifierModel,
        context: &ClassifierContext,
        options: StreamOptions,
    ) -> ClassifierResult {
        if context.images.as_ref().is_some_and(|images| !images.is_empty()) && !model.accepts_images() {
            let message = format!("Model {}/{} does not accept image input", model.provider, model.id);
            return ClassifierResult::failed(model, message, super::cancelled(&options));
        }
        let prepared = match self.one_shot_options(&model.request_model(), options).await {
            // OpenCode routes by the session, on every kind of request.
            Ok(options) if matches!(model.provider.as_str(), "opencode" | "opencode-go") => {
                crate::layer::opencode::with_session_header(options)
            }
            Ok(options) => options,
            Err(message) => return ClassifierResult::failed(model, message, false),
        };
        let Some(classifier) = builtin(&model.api) else {
            let message = format!("Provider {} has no classifier implementation for \"{}\"", model.provider, model.api);
            return ClassifierResult::failed(model, message, false);
        };
        match fill_placeholders(&model.provider, &model.base_url, &prepared) {
            Ok(base_url) if base_url == model.base_url => classifier.classify(model, context, &prepared).await,
            Ok(base_url) => {
                let resolved = ClassifierModel { base_url, ..model.clone() };
                classifier.classify(&resolved, context, &prepared).await
            }
            Err(message) => ClassifierResult::failed(model, message, false),
        }
    }

    /// Generate images for `context` with `model` through its provider (see [`crate::images`]).
    /// Never fails: errors are a result with `stopReason` `error`.
    pub async fn generate_images(
        &self,
        model: &ImageModel,
        context: &ImagesContext,
        options: StreamOptions,
    ) -> AssistantImages {
        let prepared = match self.one_shot_options(&model.request_model(), options).await {
            Ok(options) => options,
            Err(message) => return AssistantImages::failed(model, message, false),
        };
        match images::builtin(&model.api) {
            Some(generator) => generator.generate_images(model, context, &prepared).await,
            None => {
                let message = format!("Provider {} does not support image generation", model.provider);
                AssistantImages::failed(model, message, false)
            }
        }
    }
}
