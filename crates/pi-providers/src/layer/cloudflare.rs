//! Cloudflare endpoints (`cloudflare-workers-ai`, `cloudflare-ai-gateway`): the catalog's base
//! URLs hold `{CLOUDFLARE_ACCOUNT_ID}` and `{CLOUDFLARE_GATEWAY_ID}` placeholders, filled in per
//! request from the provider settings (`StreamOptions::env`, then the process environment)
//! before the request reaches the API's adapter, as the reference's `cloudflareStreams` does.
//!
//! A placeholder left without a value fails the request with an error naming the variable
//! (the reference reports the provider as not configured); nothing is sent.

use std::borrow::Cow;

use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamLayer, StreamOptions, TranscriptContext};

/// The variables a Cloudflare base URL may name, in the order they are filled.
pub const PLACEHOLDERS: [&str; 2] = ["CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_GATEWAY_ID"];

/// The layer that fills a model's Cloudflare placeholders before the adapter streams.
#[derive(Clone, Copy, Debug)]
pub struct CloudflareEndpoint;

/// `model` with its placeholders filled from `options`, or the name of the first variable that
/// has no value.
pub fn resolve_model<'a>(model: &'a Model, options: &StreamOptions) -> Result<Cow<'a, Model>, &'static str> {
    let mut base_url = Cow::Borrowed(model.base_url.as_str());
    for name in PLACEHOLDERS {
        let placeholder = format!("{{{name}}}");
        if base_url.contains(&placeholder) {
            let value = options.env_var(name).ok_or(name)?;
            base_url = Cow::Owned(base_url.replace(&placeholder, &value));
        }
    }
    Ok(match base_url {
        Cow::Borrowed(_) => Cow::Borrowed(model),
        Cow::Owned(base_url) => Cow::Owned(Model { base_url, ..model.clone() }),
    })
}

impl StreamLayer for CloudflareEndpoint {
    fn stream(
        &self,
        inner: &dyn StreamFn,
        model: &Model,
        context: TranscriptContext,
        options: StreamOptions,
    ) -> AssistantMessageEventStream {
        match resolve_model(model, &options) {
            Ok(resolved) => inner.stream(&resolved, context, options),
            Err(name) => crate::failure::failed_stream(
                model,
                format!("Provider {} is not configured: set {name}", model.provider),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn options(pairs: &[(&str, &str)]) -> StreamOptions {
        StreamOptions {
            env: Some(Arc::new(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())),
            ..Default::default()
        }
    }

    #[test]
    fn placeholders_are_filled_from_the_settings() {
        let mut model = Model::new("m").with_api("anthropic-messages").with_provider("cloudflare-ai-gateway");
        model.base_url =
            "https://gateway.ai.cloudflare.com/v1/{CLOUDFLARE_ACCOUNT_ID}/{CLOUDFLARE_GATEWAY_ID}/anthropic".into();
        let options = options(&[("CLOUDFLARE_ACCOUNT_ID", "acct"), ("CLOUDFLARE_GATEWAY_ID", "gw")]);
        let resolved = resolve_model(&model, &options).map(|m| m.base_url.clone());
        assert_eq!(resolved.as_deref(), Ok("https://gateway.ai.cloudflare.com/v1/acct/gw/anthropic"));
    }

    #[test]
    fn a_missing_value_is_named() {
        let mut model = Model::new("m").with_api("openai-completions").with_provider("cloudflare-workers-ai");
        model.base_url = "https://api.cloudflare.com/client/v4/accounts/{CLOUDFLARE_ACCOUNT_ID}/ai/v1".into();
        let options = options(&[("CLOUDFLARE_GATEWAY_ID", "gw")]);
        if std::env::var_os("CLOUDFLARE_ACCOUNT_ID").is_none() {
            assert_eq!(resolve_model(&model, &options).err(), Some("CLOUDFLARE_ACCOUNT_ID"));
            let message = futures::executor::block_on(
                pi_types::Layered::new(CloudflareEndpoint, Arc::new(crate::faux::FauxProvider::default()))
                    .stream(&model, TranscriptContext::default(), options)
                    .result(),
            );
            assert_eq!(
                message.and_then(|m| m.error_message.map(|e| e.to_string())).as_deref(),
                Some("Provider cloudflare-workers-ai is not configured: set CLOUDFLARE_ACCOUNT_ID")
            );
        }
    }

    #[test]
    fn a_url_without_placeholders_is_borrowed() {
        let model = Model::new("m").with_api("openai-completions").with_provider("p");
        assert!(matches!(resolve_model(&model, &StreamOptions::default()), Ok(Cow::Borrowed(_))));
    }
}
