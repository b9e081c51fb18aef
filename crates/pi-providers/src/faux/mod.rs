//! A scripted provider for tests, demos and benchmarks, behaving like pi-ai's faux provider.
//!
//! Each request consumes the next scripted response (a message, or a closure that builds
//! one from the request) and streams it: text and thinking in chunks of `4 × token size`
//! UTF-16 units, tool-call arguments as JSON text whose partial parse grows in the
//! partial message. The cancellation token is checked once before `start` and before
//! every delta; a cancelled request ends with stop reason `aborted` and the content
//! streamed so far. An exhausted script ends with the error "No more faux responses
//! queued".
//!
//! A request with [`StreamOptions::deferred`] set takes its scripted step without answering it:
//! it streams a handle (stop reason `deferred`), and the response is made at the first fetch of
//! the handle that is ready (after [`FauxDeferredOptions::pending_fetches`] pending ones), with
//! the submission's transcript, options and model ([`DeferredResponses`](crate::deferred::DeferredResponses) on the provider; see
//! [`crate::deferred`]).
//!
//! ```
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_types::{StopReason, StreamFn, StreamOptions, TranscriptContext};
//! let faux = FauxProvider::default();
//! faux.set_responses(vec![FauxResponse::Message(faux_assistant_message(vec![faux_text("hi")], StopReason::Stop))]);
//! let stream = faux.stream(&faux.model(), TranscriptContext::default(), StreamOptions::default());
//! let message = futures::executor::block_on(stream.result()).unwrap();
//! assert_eq!(message.text(), "hi");
//! ```

mod deferred;
mod usage;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use pi_types::{
    catch_call, AssistantContent, AssistantMessage, AssistantMessageBuilder, AssistantMessageEvent,
    AssistantMessageEventStream, BoxError, CancellationToken, CompactString, EventSender, JsonObject, Model, ModelCost,
    ProviderResponse, StopReason, StreamFn, StreamOptions, TranscriptContext, TypesError, Usage,
};
use usage::PromptCache;

/// Builds a response from the request (the reference's response factory). It borrows the
/// request, as the reference's factory gets references; a factory that needs a part of it in
/// its future copies that part.
pub type FauxResponseFn =
    Arc<dyn Fn(&FauxRequest) -> BoxFuture<'static, Result<AssistantMessage, BoxError>> + Send + Sync>;

/// One scripted response.
#[derive(Clone)]
// A script entry is built once per response; boxing would only cost every caller a `Box::new`.
#[allow(clippy::large_enum_variant)]
pub enum FauxResponse {
    /// Stream this message (its `api`, `provider` and `model` are replaced by the request's).
    Message(AssistantMessage),
    /// Build the message from the request; an `Err` becomes an error response.
    Build(FauxResponseFn),
}

impl std::fmt::Debug for FauxResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Message(m) => f.debug_tuple("Message").field(m).finish(),
            Self::Build(_) => f.write_str("Build(..)"),
        }
    }
}

impl From<AssistantMessage> for FauxResponse {
    fn from(message: AssistantMessage) -> Self {
        Self::Message(message)
    }
}

/// What a [`FauxResponseFn`] sees.
#[derive(Clone, Debug)]
pub struct FauxRequest {
    /// The transcript of the request.
    pub context: TranscriptContext,
    /// The request options.
    pub options: StreamOptions,
    /// The requested model (shared with the provider's own entry when it is one of its models).
    pub model: Arc<Model>,
    /// Requests so far, this one included.
    pub call_count: usize,
    /// Fetches of deferred responses so far (the current one included, for a response made at
    /// a fetch).
    pub deferred_fetch_count: usize,
}

/// Configuration of a [`FauxProvider`].
#[derive(Clone, Debug)]
pub struct FauxOptions {
    /// API id of its models (default `faux`).
    pub api: String,
    /// Provider id (default `faux`).
    pub provider: String,
    /// Smallest chunk size in tokens (a token is 4 characters); default 3.
    pub min_token_size: usize,
    /// Largest chunk size in tokens; default 5. Equal sizes make chunking deterministic.
    pub max_token_size: usize,
    /// Pace the stream at this many tokens per second; `None` streams without timers
    /// (it yields to the scheduler once per request, not per delta).
    pub tokens_per_second: Option<f64>,
    /// Models it serves; default one model `faux-1`.
    pub models: Vec<Model>,
    /// Keep every request's transcript for [`FauxProvider::requests`] (off by default:
    /// long runs would keep every transcript).
    pub record_requests: bool,
    /// How deferred responses behave.
    pub deferred: FauxDeferredOptions,
}

/// How the faux provider's deferred responses behave (the reference's `deferred` option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FauxDeferredOptions {
    /// Fetches that return the handle again before the response is ready.
    pub pending_fetches: usize,
    /// The polling delay its handles suggest.
    pub poll_after_ms: Option<u64>,
}

impl Default for FauxOptions {
    fn default() -> Self {
        Self {
            api: "faux".into(),
            provider: "faux".into(),
            min_token_size: 3,
            max_token_size: 5,
            tokens_per_second: None,
            models: Vec::new(),
            record_requests: false,
            deferred: FauxDeferredOptions::default(),
        }
    }
}

impl FauxOptions {
    /// Fixed chunk size: every chunk has `4 × tokens` characters (the last may be shorter).
    pub fn with_token_size(mut self, tokens: usize) -> Self {
        self.min_token_size = tokens;
        self.max_token_size = tokens;
        self
    }
}

struct FauxState {
    pending: VecDeque<Queued>,
    call_count: usize,
    requests: Vec<TranscriptContext>,
    prompt_cache: PromptCache,
    rng: u64,
    deferred: deferred::DeferredState,
}

struct FauxInner {
    api: CompactString,
    provider: CompactString,
    min_token_size: usize,
    max_token_size: usize,
    tokens_per_second: Option<f64>,
    /// Shared by the requests for them: a request keeps no copy of its model.
    models: Vec<Arc<Model>>,
    record_requests: bool,
    deferred: FauxDeferredOptions,
    state: Mutex<FauxState>,
}

/// The scripted provider. Cheap to clone; clones share the script and the counters.
#[derive(Clone)]
pub struct FauxProvider {
    inner: Arc<FauxInner>,
}

impl std::fmt::Debug for FauxProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FauxProvider").field("provider", &self.inner.provider).finish_non_exhaustive()
    }
}

impl Default for FauxProvider {
    fn default() -> Self {
        Self::new(FauxOptions::default())
    }
}

fn default_model(api: &str, provider: &str) -> Model {
    Model {
        name: "Faux Model".into(),
        base_url: "http://localhost:0".into(),
        input: vec![pi_types::InputModality::Text, pi_types::InputModality::Image],
        cost: ModelCost::default(),
        context_window: 128_000,
        max_tokens: 16_384,
        ..Model::new("faux-1").with_api(api).with_provider(provider)
    }
}

impl FauxProvider {
    /// A provider with the given options.
    pub fn new(options: FauxOptions) -> Self {
        let min = options.min_token_size.min(options.max_token_size).max(1);
        let max = options.max_token_size.max(min);
        let models = if options.models.is_empty() {
            vec![default_model(&options.api, &options.provider)]
        } else {
            options
                .models
                .into_iter()
                .map(|m| Model { api: options.api.as_str().into(), provider: options.provider.as_str().into(), ..m })
                .collect()
        };
        let seed = pi_types::now_ms() | 1;
        Self {
            inner: Arc::new(FauxInner {
                api: options.api.into(),
                provider: options.provider.into(),
                min_token_size: min,
                max_token_size: max,
                tokens_per_second: options.tokens_per_second,
                models: models.into_iter().map(Arc::new).collect(),
                record_requests: options.record_requests,
                deferred: options.deferred,
                state: Mutex::new(FauxState {
                    pending: VecDeque::new(),
                    call_count: 0,
                    requests: Vec::new(),
                    prompt_cache: PromptCache::new(),
                    rng: seed,
                    deferred: deferred::DeferredState::default(),
                }),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, FauxState> {
        // A poisoned lock only means a response closure panicked elsewhere; the script is intact.
        self.inner.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The provider id.
    pub fn provider_id(&self) -> &str {
        &self.inner.provider
    }

    /// The API id.
    pub fn api(&self) -> &str {
        &self.inner.api
    }

    /// Its models.
    pub fn models(&self) -> Vec<Model> {
        self.inner.models.iter().map(|model| Model::clone(model)).collect()
    }

    /// The first model.
    pub fn model(&self) -> Model {
        match self.inner.models.first() {
            Some(model) => Model::clone(model),
            None => default_model(&self.inner.api, &self.inner.provider),
        }
    }

    /// A model by id.
    pub fn get_model(&self, id: &str) -> Option<Model> {
        self.inner.models.iter().find(|m| m.id == id).map(|model| Model::clone(model))
    }

    /// Replace the script.
    pub fn set_responses(&self, responses: impl IntoIterator<Item = FauxResponse>) {
        self.state().pending = responses.into_iter().map(Queued::from).collect();
    }

    /// Append to the script.
    pub fn append_responses(&self, responses: impl IntoIterator<Item = FauxResponse>) {
        self.state().pending.extend(responses.into_iter().map(Queued::from));
    }

    /// Responses not consumed yet.
    pub fn pending_response_count(&self) -> usize {
        self.state().pending.len()
    }

    /// Requests so far.
    pub fn call_count(&self) -> usize {
        self.state().call_count
    }

    /// Transcripts of the requests so far (only with [`FauxOptions::record_requests`]).
    pub fn requests(&self) -> Vec<TranscriptContext> {
        self.state().requests.clone()
    }

    fn next_token_size(&self, state: &mut FauxState) -> usize {
        let (min, max) = (self.inner.min_token_size, self.inner.max_token_size);
        if min == max {
            return min;
        }
        min + (xorshift(&mut state.rng) % (max - min + 1) as u64) as usize
    }

    /// The end (a byte offset) of the chunk of `text` that starts at `start`: `4 × token size`
    /// UTF-16 units, the last character included even when it overshoots.
    fn chunk_end(&self, text: &str, start: usize) -> usize {
        let limit = self.token_size().saturating_mul(4).max(1);
        let rest = text.get(start..).unwrap_or_default();
        // ASCII: one unit per byte, no character walk.
        if let Some(window) = rest.as_bytes().get(..limit) {
            if window.is_ascii() {
                return start + limit;
            }
        } else if rest.is_ascii() {
            return text.len();
        }
        let mut units = 0;
        for (at, c) in rest.char_indices() {
            units += c.len_utf16();
            if units >= limit {
                return start + at + c.len_utf8();
            }
        }
        text.len()
    }

    fn token_size(&self) -> usize {
        if self.inner.min_token_size == self.inner.max_token_size {
            return self.inner.min_token_size;
        }
        self.next_token_size(&mut self.state())
    }

    async fn pace(&self, chunk: &str) {
        if let Some(tps) = self.inner.tokens_per_second.filter(|t| *t > 0.0) {
            let tokens = pi_types::json::utf16_len(chunk).div_ceil(4) as f64;
            let delay = std::time::Duration::from_secs_f64(tokens / tps);
            if delay >= std::time::Duration::from_millis(1) {
                tokio::time::sleep(delay).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
    }

    fn error_message(&self, model: &Model, text: String) -> AssistantMessage {
        AssistantMessage {
            api: self.inner.api.clone(),
            provider: self.inner.provider.clone(),
            model: model.id.clone(),
            stop_reason: StopReason::Error,
            error_message: Some(text.into()),
            timestamp: pi_types::now_ms(),
            ..Default::default()
        }
    }

    /// The message of a request's queued step, stamped with this provider and the request's
    /// model; the error text when nothing is queued or the factory failed.
    async fn made(&self, step: Option<Queued>, request: &FauxRequest) -> Result<Box<AssistantMessage>, String> {
        // Boxed: a message held by value across the await would sit in this future (and again
        // in the one awaiting it) for the whole response.
        let mut message = match step {
            None => return Err("No more faux responses queued".to_owned()),
            Some(Queued::Message(message)) => message,
            Some(Queued::Build(build)) => Box::new(Box::pin(catch_call(|| build(request))).await?),
        };
        message.api = self.inner.api.clone();
        message.provider = self.inner.provider.clone();
        message.model = request.model.id.clone();
        Ok(message)
    }

    /// The response to one request. Every concurrent request keeps this future while it waits
    /// at the yield, so it holds little: the request and the scripted step are in one box
    /// (`Pending`).
    #[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
    fn respond(self, tx: EventSender, mut pending: Box<Pending>) -> impl Future<Output = ()> + Send {
        async move {
            if let Some(on_response) = &pending.request.options.on_response {
                // Boxed, as is the response factory below: this future waits at the yield in every
                // concurrent request, so it holds no state of the steps before and after it.
                Box::pin(async {
                    let response = ProviderResponse { status: 200, ..Default::default() };
                    on_response(&response, &pending.request.model).await;
                })
                .await;
            }
            if self.inner.tokens_per_second.is_none() {
                // Behave like a network call: let other tasks run once per request.
                tokio::task::yield_now().await;
            }
            if pending.request.options.deferred.is_some() {
                if let Some(step) = pending.step.take() {
                    let (message, cancel) = self.submit_deferred(step, pending.request);
                    return Box::pin(self.stream_message(tx, message, cancel)).await;
                }
            }
            let request = &pending.request;
            let (mut message, streamed) = match self.made(pending.step.take(), request).await {
                Ok(message) => (message, true),
                Err(text) => (Box::new(self.error_message(&request.model, text)), false),
            };
            {
                let mut state = self.state();
                let cache = &mut state.prompt_cache;
                usage::apply_usage_estimate(&mut message, request.context.messages(), &request.options, cache);
            }
            if !streamed {
                // A failed request never started: one terminal event, no `start`. Boxed, like the
                // streaming below: neither takes room in this future while it waits at the yield.
                Box::pin(AssistantMessageBuilder::new(tx, *message).done(StopReason::Error)).await;
                return;
            }
            // Streaming needs only the cancellation token: the request (its transcript, options
            // and model) is freed before the response streams.
            let cancel = pending.request.options.cancel.take();
            drop(pending);
            Box::pin(self.stream_message(tx, message, cancel)).await;
        }
    }

    /// Streams a scripted message: its blocks in order, each in chunks, then its ending.
    fn stream_message(
        &self,
        tx: EventSender,
        mut message: Box<AssistantMessage>,
        cancel: Option<CancellationToken>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // Taken apart before the future is made: the scripted message's box is freed now, and
        // the future holds only the builder and the blocks to stream.
        let content = std::mem::take(&mut message.content);
        let reason = message.stop_reason;
        let out = AssistantMessageBuilder::new(tx, AssistantMessage { stop_reason: StopReason::Pending, ..*message });
        self.stream_content(out, content, reason, cancel)
    }

    #[allow(clippy::manual_async_fn)] // see docs/architecture.md, "Futures every run holds"
    fn stream_content(
        &self,
        mut out: AssistantMessageBuilder,
        mut content: Vec<AssistantContent>,
        reason: StopReason,
        cancel: Option<CancellationToken>,
    ) -> impl Future<Output = ()> + Send + '_ {
        async move {
            let cancelled = || cancel.as_ref().is_some_and(|c| c.is_cancelled());
            if cancelled() {
                return Box::pin(abort(out)).await;
            }
            out.start().await;
            for block in &mut content {
                match self.stream_block(&mut out, block, cancel.as_ref()).await {
                    Ok(true) => {}
                    Ok(false) => return Box::pin(abort(out)).await,
                    Err(error) => return out.error(error.to_string()).await,
                }
            }
            // The scripted signatures arrive with the final message, as in the reference, whose
            // partial blocks never carry them.
            for (index, block) in content.into_iter().enumerate() {
                match block {
                    AssistantContent::Text(text) => {
                        if let Ok(partial) = out.text_mut(index) {
                            *partial = text;
                        }
                    }
                    AssistantContent::Thinking(thinking) => {
                        if let Ok(partial) = out.thinking_mut(index) {
                            *partial = thinking;
                        }
                    }
                    AssistantContent::ToolCall(_) => {}
                }
            }
            if reason == StopReason::Pending {
                // Built in a block: the model must not be held across the await.
                let error = {
                    let model = Model::new(out.message().model.as_str())
                        .with_api(out.message().api.as_str())
                        .with_provider(out.message().provider.as_str());
                    Arc::new(self.error_message(&model, "Faux response ended without a stop reason".into()))
                };
                let event = AssistantMessageEvent::Error { reason: StopReason::Error, error };
                return out.into_sender().send(event).await;
            }
            // `error` and `aborted` end with the scripted message as the error.
            out.done(reason).await;
        }
    }
}

impl FauxProvider {
    /// Streams one block in chunks; `Ok(false)` when the request was cancelled on the way.
    async fn stream_block(
        &self,
        out: &mut AssistantMessageBuilder,
        block: &mut AssistantContent,
        cancel: Option<&CancellationToken>,
    ) -> Result<bool, TypesError> {
        let (index, text) = match &*block {
            AssistantContent::Text(text) => (out.start_text().await, Cow::Borrowed(text.text.as_str())),
            AssistantContent::Thinking(thinking) => {
                (out.start_thinking().await, Cow::Borrowed(thinking.thinking.as_str()))
            }
            AssistantContent::ToolCall(call) => {
                let index = out.start_tool_call(call.id.clone(), call.name.clone()).await;
                let mut text = String::new();
                pi_types::json::write_stringify_object(&mut text, &call.arguments);
                (index, Cow::Owned(text))
            }
        };
        let mut start = 0;
        let mut first = true;
        // Fixed-size tokens of ASCII text are fixed byte counts: no walk over each chunk.
        let fixed_ascii = (self.inner.min_token_size == self.inner.max_token_size && text.is_ascii())
            .then(|| self.inner.min_token_size.saturating_mul(4).max(1));
        let paced = self.inner.tokens_per_second.is_some();
        while first || start < text.len() {
            first = false;
            let end = match fixed_ascii {
                Some(limit) => start.saturating_add(limit).min(text.len()),
                None => self.chunk_end(&text, start),
            };
            let chunk = text.get(start..end).unwrap_or_default();
            start = end;
            if paced {
                self.pace(chunk).await;
            }
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Ok(false);
            }
            match &*block {
                AssistantContent::Text(_) => out.text_delta(index, chunk).await?,
                AssistantContent::Thinking(_) => out.thinking_delta(index, chunk).await?,
                AssistantContent::ToolCall(_) => out.tool_call_delta(index, chunk).await?,
            }
        }
        drop(text);
        match block {
            // The scripted call is the final one, as the reference's faux ends with it (moved:
            // the loop below leaves tool calls alone).
            AssistantContent::ToolCall(call) => out.end_tool_call_with(index, std::mem::take(call)).await?,
            _ => out.end_block(index).await?,
        }
        Ok(true)
    }
}

/// The next number of a xorshift64 sequence: cheap, good enough to vary chunk sizes and ids.
fn xorshift(rng: &mut u64) -> u64 {
    let mut x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    x
}

/// Ends a cancelled response: stop reason `aborted`, stamped now, with the content so far.
async fn abort(mut out: AssistantMessageBuilder) {
    out.metadata_mut().timestamp = pi_types::now_ms();
    out.aborted("Request was aborted").await;
}

/// A scripted step as queued: a message is boxed, so a long queue of factories (one step per
/// agent, say) costs a pointer per step, not a message.
#[derive(Clone)]
enum Queued {
    Message(Box<AssistantMessage>),
    Build(FauxResponseFn),
}

impl From<FauxResponse> for Queued {
    fn from(response: FauxResponse) -> Self {
        match response {
            FauxResponse::Message(message) => Self::Message(Box::new(message)),
            FauxResponse::Build(build) => Self::Build(build),
        }
    }
}

/// What a request's response is made from.
struct Pending {
    step: Option<Queued>,
    request: FauxRequest,
}

impl StreamFn for FauxProvider {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let (step, call_count, deferred_fetch_count) = {
            let mut state = self.state();
            let step = state.pending.pop_front();
            state.call_count += 1;
            if self.inner.record_requests {
                state.requests.push(context.clone());
            }
            (step, state.call_count, state.deferred.fetch_count)
        };
        let model = match self.inner.models.iter().find(|shared| ***shared == *model) {
            Some(shared) => Arc::clone(shared),
            None => Arc::new(model.clone()),
        };
        let request = FauxRequest { context, options, model, call_count, deferred_fetch_count };
        let pending = Box::new(Pending { step, request });
        let this = self.clone();
        AssistantMessageEventStream::from_producer(move |tx| this.respond(tx, pending))
    }
}

/// A text block.
pub fn faux_text(text: impl Into<String>) -> AssistantContent {
    AssistantContent::text(text)
}

/// A thinking block.
pub fn faux_thinking(thinking: impl Into<String>) -> AssistantContent {
    AssistantContent::thinking(thinking)
}

/// A tool-call block with an explicit id.
pub fn faux_tool_call(
    id: impl Into<CompactString>,
    name: impl Into<CompactString>,
    arguments: JsonObject,
) -> AssistantContent {
    AssistantContent::tool_call(id, name, arguments)
}

/// A scripted assistant message stamped with the current time.
pub fn faux_assistant_message(content: Vec<AssistantContent>, stop_reason: StopReason) -> AssistantMessage {
    AssistantMessage {
        content,
        api: "faux".into(),
        provider: "faux".into(),
        model: "faux-1".into(),
        usage: Usage::default(),
        stop_reason,
        timestamp: pi_types::now_ms(),
        ..Default::default()
    }
}
