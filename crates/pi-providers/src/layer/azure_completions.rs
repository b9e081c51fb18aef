//! The Azure provider's chat-completions models: before the `openai-completions` adapter
//! streams, the model's base URL becomes the configured Azure endpoint and the deployment name
//! is sent as the request's `model` (the catalog id stays the model's id), with the same
//! settings and their order as `azure-openai-responses` (the adapter's fields, then
//! `AZURE_OPENAI_BASE_URL` / `AZURE_OPENAI_RESOURCE_NAME` / `AZURE_OPENAI_DEPLOYMENT_NAME_MAP`,
//! then the model's base URL). The reference's `azureStreams`. An endpoint that cannot be
//! resolved fails the request with the Responses adapter's configuration error.

use std::sync::Arc;

use pi_types::{
    AssistantMessageEventStream, Model, OnPayload, StreamFn, StreamLayer, StreamOptions, TranscriptContext,
};
use serde_json::Value;

use crate::api::openai::azure::AzureOpenAIResponses;

/// The layer around the completions adapter for the Azure provider's models: it resolves
/// the endpoint and deployment with the Responses adapter's settings.
#[derive(Clone, Debug, Default)]
pub struct AzureCompletions {
    settings: AzureOpenAIResponses,
}

/// `options` with a payload hook that sends `deployment` as the model, before any hook the
/// caller set (which sees the renamed payload).
fn with_deployment(mut options: StreamOptions, deployment: String) -> StreamOptions {
    let user = options.on_payload.take();
    let hook: OnPayload = Arc::new(move |payload: &Value, model: &Model| {
        let mut params = payload.clone();
        if let Some(map) = params.as_object_mut() {
            map.insert("model".into(), Value::String(deployment.clone()));
        }
        match &user {
            Some(user) => {
                let call = user(&params, model);
                Box::pin(async move { Some(call.await.unwrap_or(params)) })
            }
            None => Box::pin(async move { Some(params) }),
        }
    });
    options.on_payload = Some(hook);
    options
}

impl StreamLayer for AzureCompletions {
    fn stream(
        &self,
        inner: &dyn StreamFn,
        model: &Model,
        context: TranscriptContext,
        options: StreamOptions,
    ) -> AssistantMessageEventStream {
        let base_url = match self.settings.resolve_base_url(model, &options) {
            Ok(base_url) => base_url,
            Err(message) => return crate::failure::failed_stream(model, message),
        };
        let deployment = self.settings.resolve_deployment_name(model, &options);
        let options = if deployment == model.id.as_str() { options } else { with_deployment(options, deployment) };
        let resolved = Model { base_url, ..model.clone() };
        inner.stream(&resolved, context, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;

    #[test]
    fn the_deployment_replaces_the_model_before_the_callers_hook() {
        let seen: Arc<std::sync::Mutex<Option<Value>>> = Arc::default();
        let keep = Arc::clone(&seen);
        let user: OnPayload = Arc::new(move |payload: &Value, _: &Model| {
            *keep.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload.clone());
            Box::pin(async { None })
        });
        let options = with_deployment(StreamOptions { on_payload: Some(user), ..Default::default() }, "dep-1".into());
        let model = Model::new("gpt-4.1").with_api("openai-completions").with_provider("azure");
        let hook = options.on_payload.clone();
        let out = hook.map(|hook| futures::executor::block_on(hook(&serde_json::json!({"model": "gpt-4.1"}), &model)));
        assert_eq!(out, Some(Some(serde_json::json!({"model": "dep-1"}))));
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(seen, Some(serde_json::json!({"model": "dep-1"})));
    }

    #[test]
    fn an_unresolvable_endpoint_fails_the_request() {
        if std::env::var_os("AZURE_OPENAI_BASE_URL").is_some()
            || std::env::var_os("AZURE_OPENAI_RESOURCE_NAME").is_some()
        {
            return;
        }
        let adapter =
            pi_types::Layered::new(AzureCompletions::default(), Arc::new(crate::faux::FauxProvider::default()));
        let model = Model::new("gpt-4.1").with_api("openai-completions").with_provider("azure");
        let message = futures::executor::block_on(
            adapter.stream(&model, TranscriptContext::default(), StreamOptions::default()).result(),
        );
        let text = message.and_then(|m| m.error_message).map(|e| e.to_string()).unwrap_or_default();
        assert!(text.starts_with("Azure OpenAI base URL is required."), "{text}");
        let env: IndexMap<String, String> =
            [("AZURE_OPENAI_RESOURCE_NAME".to_owned(), "res".to_owned())].into_iter().collect();
        let options = StreamOptions { env: Some(Arc::new(env)), ..Default::default() };
        assert_eq!(
            AzureOpenAIResponses::default().resolve_base_url(&model, &options).as_deref(),
            Ok("https://res.openai.azure.com/openai/v1")
        );
    }
}
