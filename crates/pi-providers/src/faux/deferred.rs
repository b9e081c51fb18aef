//! The faux provider's deferred responses (the reference's `fetchDeferred` and `cancelDeferred`
//! of its faux provider).
//!
//! A submission keeps its scripted step, transcript, options (without the deferred request,
//! cancellation and response hook) and model under a new handle. A fetch of a known handle
//! streams the handle again while pending fetches remain, else the response: made at the first
//! ready fetch (a factory sees the counters of that moment) and streamed again by every later
//! one. A cancelled handle fails every later fetch; a cancel is recorded even for an unknown
//! handle.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::{
    AssistantMessage, AssistantMessageBuilder, AssistantMessageEventStream, BoxError, CancellationToken,
    DeferredHandle, EventSender, Model, ProviderResponse, StopReason, StreamOptions,
};

use super::{usage, FauxProvider, FauxRequest, Queued};
use crate::deferred::{DeferredFetchOptions, DeferredResponses};
use crate::registry::Provider;

/// The submitted responses and the counters of deferred calls.
#[derive(Default)]
pub(super) struct DeferredState {
    /// Fetches so far.
    pub(super) fetch_count: usize,
    /// Handles cancelled so far, in order.
    pub(super) cancelled: Vec<DeferredHandle>,
    entries: HashMap<String, Entry>,
}

/// One submitted response.
struct Entry {
    handle: DeferredHandle,
    step: Queued,
    request: FauxRequest,
    pending_fetches: usize,
    cancelled: bool,
    /// The response, once a fetch made it.
    ready: Option<Box<AssistantMessage>>,
}

/// What a fetch streams.
enum Fetched {
    /// The handle again, or the response already made.
    Message(Box<AssistantMessage>),
    /// The response is to be made from this step and request.
    Make(Queued, Box<FauxRequest>),
}

/// The message that answers with a handle.
fn deferred_message(model: &Model, handle: DeferredHandle) -> Box<AssistantMessage> {
    Box::new(AssistantMessage {
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        stop_reason: StopReason::Deferred,
        deferred: Some(Box::new(handle)),
        timestamp: pi_types::now_ms(),
        ..Default::default()
    })
}

impl FauxProvider {
    /// The provider to register with [`Models`](crate::Models): its models, this stream
    /// function and its deferred responses, under its API id; no key (the reference's
    /// `fauxProvider().provider`).
    pub fn provider(&self) -> Provider {
        Provider::new(self.provider_id())
            .with_models(self.models())
            .with_api(self.api(), Arc::new(self.clone()))
            .with_deferred(self.api(), Arc::new(self.clone()))
    }

    /// Fetches of deferred responses so far.
    pub fn deferred_fetch_count(&self) -> usize {
        self.state().deferred.fetch_count
    }

    /// Handles cancelled so far, in order.
    pub fn cancelled_deferred(&self) -> Vec<DeferredHandle> {
        self.state().deferred.cancelled.clone()
    }

    /// Keeps a request's step under a new handle; the message to stream and the request's
    /// cancellation token.
    pub(super) fn submit_deferred(
        &self,
        step: Queued,
        mut request: FauxRequest,
    ) -> (Box<AssistantMessage>, Option<CancellationToken>) {
        let cancel = request.options.cancel.take();
        request.options.deferred = None;
        request.options.on_response = None;
        let mut state = self.state();
        let random = super::xorshift(&mut state.rng);
        let handle = DeferredHandle {
            provider: request.model.provider.to_string(),
            model_id: request.model.id.to_string(),
            api: request.model.api.to_string(),
            id: format!("deferred:{}:{}", pi_types::now_ms(), crate::js_json::base36(random)),
            poll_after_ms: self.inner.deferred.poll_after_ms,
            ..Default::default()
        };
        let message = deferred_message(&request.model, handle.clone());
        let pending_fetches = self.inner.deferred.pending_fetches;
        let entry = Entry { handle, step, request, pending_fetches, cancelled: false, ready: None };
        state.deferred.entries.insert(entry.handle.id.clone(), entry);
        (message, cancel)
    }

    /// What a fetch of `handle` streams, or why it fails.
    fn fetched(&self, model: &Model, handle: &DeferredHandle) -> Result<Fetched, String> {
        let mut state = self.state();
        let (call_count, deferred_fetch_count) = (state.call_count, state.deferred.fetch_count);
        let entry = state
            .deferred
            .entries
            .get_mut(&handle.id)
            .filter(|entry| {
                entry.handle.provider == handle.provider
                    && entry.handle.model_id == handle.model_id
                    && entry.handle.api == handle.api
            })
            .ok_or_else(|| format!("Unknown faux deferred response: {}", handle.id))?;
        if entry.cancelled {
            return Err(format!("Faux deferred response was cancelled: {}", handle.id));
        }
        if entry.pending_fetches > 0 {
            entry.pending_fetches -= 1;
            return Ok(Fetched::Message(deferred_message(model, entry.handle.clone())));
        }
        if let Some(ready) = &entry.ready {
            return Ok(Fetched::Message(ready.clone()));
        }
        let request = FauxRequest { call_count, deferred_fetch_count, ..entry.request.clone() };
        Ok(Fetched::Make(entry.step.clone(), Box::new(request)))
    }

    /// Makes a submitted response (an error message when its factory fails) and keeps it.
    async fn make(&self, id: &str, step: Queued, request: Box<FauxRequest>) -> Box<AssistantMessage> {
        let message = match self.made(Some(step), &request).await {
            Ok(mut message) => {
                let mut state = self.state();
                let cache = &mut state.prompt_cache;
                usage::apply_usage_estimate(&mut message, request.context.messages(), &request.options, cache);
                message
            }
            Err(text) => Box::new(self.error_message(&request.model, text)),
        };
        if let Some(entry) = self.state().deferred.entries.get_mut(id) {
            entry.ready = Some(message.clone());
        }
        message
    }

    async fn respond_fetch(self, tx: EventSender, model: Model, handle: DeferredHandle, mut options: StreamOptions) {
        if let Some(on_response) = &options.on_response {
            on_response(&ProviderResponse { status: 200, ..Default::default() }, &model).await;
        }
        if self.inner.tokens_per_second.is_none() {
            tokio::task::yield_now().await;
        }
        let message = match self.fetched(&model, &handle) {
            Ok(Fetched::Message(message)) => message,
            Ok(Fetched::Make(step, request)) => self.make(&handle.id, step, request).await,
            Err(text) => {
                // A failed fetch never started: one terminal event.
                let error = self.error_message(&model, text);
                return AssistantMessageBuilder::new(tx, error).done(StopReason::Error).await;
            }
        };
        let cancel = options.cancel.take();
        drop(options);
        self.stream_message(tx, message, cancel).await;
    }
}

impl DeferredResponses for FauxProvider {
    fn fetch(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        options: DeferredFetchOptions,
    ) -> AssistantMessageEventStream {
        self.state().deferred.fetch_count += 1;
        let (this, model, handle) = (self.clone(), model.clone(), handle.clone());
        AssistantMessageEventStream::from_producer(move |tx| this.respond_fetch(tx, model, handle, options.request))
    }

    fn cancel(
        &self,
        model: &Model,
        handle: &DeferredHandle,
        options: StreamOptions,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        {
            let mut state = self.state();
            state.deferred.cancelled.push(handle.clone());
            if let Some(entry) = state.deferred.entries.get_mut(&handle.id) {
                entry.cancelled = true;
            }
        }
        let model = model.clone();
        Box::pin(async move {
            if let Some(on_response) = &options.on_response {
                on_response(&ProviderResponse { status: 200, ..Default::default() }, &model).await;
            }
            Ok(())
        })
    }
}
