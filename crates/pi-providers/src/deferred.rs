//! Deferred responses (the reference's `streamDeferred` / `fetchDeferred` / `cancelDeferred`).
//!
//! A request whose options carry [`DeferredRequest`](pi_types::DeferredRequest) asks a capable
//! provider to answer at once with a handle: the stream ends with stop reason `deferred` and the
//! message's `deferred` field holds the [`DeferredHandle`], which the caller may store. Fetching
//! the handle later streams either the handle again (still pending; `poll_after_ms` says when to
//! ask next) or the finished response. Cancelling is best effort.
//!
//! A provider offers this per API with [`Provider::with_deferred`](crate::Provider::with_deferred)
//! (the faux provider does: [`FauxProvider::provider`](crate::faux::FauxProvider::provider));
//! [`Models`] resolves the provider's credentials as for a request and dispatches on the
//! model's API. A provider without it answers with the reference's errors
//! ([`ProviderError::DeferredUnsupported`] and the per-API variants). The agent loop does
//! nothing special with a deferred stop: it ends the turn like `stop`, as pi-agent-core does.
//!
//! ```
//! use pi_providers::deferred::DeferredFetchOptions;
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider};
//! use pi_providers::Models;
//! use pi_types::{Context, DeferredRequest, StopReason, StreamOptions};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let faux = FauxProvider::default();
//! faux.set_responses([faux_assistant_message(vec![faux_text("later")], StopReason::Stop).into()]);
//! let models = Models::new();
//! models.set_provider(faux.provider());
//! let model = faux.model();
//! let options = StreamOptions { deferred: Some(DeferredRequest::default()), ..Default::default() };
//! let submitted = models.complete(&model, Context::default(), options).await.unwrap();
//! assert_eq!(submitted.stop_reason, StopReason::Deferred);
//! let handle = submitted.deferred.unwrap();
//! let message = models.fetch_deferred(&model, &handle, DeferredFetchOptions::default()).await.unwrap();
//! assert_eq!(message.text(), "later");
//! # });
//! ```

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::{AssistantMessage, AssistantMessageEventStream, BoxError, DeferredHandle, Model, StreamOptions};

use crate::failure::failed_stream;
use crate::registry::{Models, Provider, ProviderError};

/// Options of a fetch (the reference's `DeferredFetchOptions`).
#[derive(Clone, Debug, Default)]
pub struct DeferredFetchOptions {
    /// The request options (credentials, headers, cancellation, hooks).
    pub request: StreamOptions,
    /// Longest provider long-poll, in ms; `None` (the reference's 0) checks once.
    pub wait_ms: Option<u64>,
}

/// The deferred responses of one API: what a provider registers with
/// [`Provider::with_deferred`](crate::Provider::with_deferred) next to its stream function.
pub trait DeferredResponses: Send + Sync {
    /// Fetch a deferred response: a stream that ends with the handle again (stop reason
    /// `deferred`) while it is pending, else with the response; failures are `error` events.
    fn fetch(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        options: DeferredFetchOptions,
    ) -> AssistantMessageEventStream;

    /// Ask the provider to stop working on a deferred response (best effort).
    fn cancel(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        options: StreamOptions,
    ) -> BoxFuture<'static, Result<(), BoxError>>;
}

impl Models {
    /// Fetch a deferred response as a stream (the reference's `streamDeferred`): the handle
    /// again while the response is pending, else the response. Failures (unknown provider, no
    /// deferred responses, credentials) are an `error` event, as for a request.
    pub fn stream_deferred(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        mut options: DeferredFetchOptions,
    ) -> AssistantMessageEventStream {
        let credentials = match self.deferred_provider(model) {
            Ok(provider) => self.credentials(provider),
            Err(error) => return failed_stream(model, error.to_string()),
        };
        let (model, handle) = (model.clone(), handle.clone());
        AssistantMessageEventStream::deferred(async move {
            match credentials.apply(&model, options.request).await {
                Ok(request) => options.request = request,
                Err(error) => return failed_stream(&model, error),
            }
            match credentials.provider().deferred(&model.api) {
                Some(deferred) => deferred.fetch(&model, &handle, options),
                None => {
                    let (provider, api) = (credentials.provider().id().to_owned(), model.api.to_string());
                    failed_stream(&model, ProviderError::DeferredUnsupportedForApi { provider, api }.to_string())
                }
            }
        })
    }

    /// Fetch a deferred response and wait for its final message (the reference's `fetchDeferred`).
    pub async fn fetch_deferred(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        options: DeferredFetchOptions,
    ) -> Option<AssistantMessage> {
        self.stream_deferred(model, handle, options).result().await
    }

    /// Cancel a deferred response (the reference's `cancelDeferred`).
    pub async fn cancel_deferred(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        options: StreamOptions,
    ) -> Result<(), ProviderError> {
        let credentials = self.credentials(self.deferred_provider(model)?);
        let options = credentials.apply(model, options).await.map_err(ProviderError::DeferredCancel)?;
        let provider = credentials.provider();
        let Some(deferred) = provider.deferred(&model.api) else {
            let (provider, api) = (provider.id().to_owned(), model.api.to_string());
            return Err(ProviderError::DeferredCancelUnsupported { provider, api });
        };
        deferred.cancel(model, handle, options).await.map_err(|error| ProviderError::DeferredCancel(error.to_string()))
    }

    /// The model's provider when it has deferred responses for some API.
    fn deferred_provider(&self, model: &Model) -> Result<Arc<Provider>, ProviderError> {
        let provider =
            self.provider(&model.provider).ok_or_else(|| ProviderError::UnknownProvider(model.provider.to_string()))?;
        if !provider.supports_deferred() {
            return Err(ProviderError::DeferredUnsupported(provider.id().to_owned()));
        }
        Ok(provider)
    }
}
