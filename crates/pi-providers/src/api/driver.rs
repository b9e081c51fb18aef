//! The one driver every HTTP adapter streams through, and the trait a wire API implements.
//!
//! An API says only what is its own ([`WireApi`]): how to build the request from a model, a
//! context and options ([`WireApi::prepare`]), and what each framed event of the answer does
//! to the message ([`Decoder::event`], [`Decoder::end`]; [`Decoder::delta`] for the deltas that
//! make up most of a stream, done without a future of the decoder's own). The driver
//! ([`stream`]) owns the rest, in this order:
//!
//! 1. the response builder and, at the end, the one terminal event (`done`, `error` or
//!    `aborted`, see [`WireApi::finish`]);
//! 2. sending with retries, time-to-headers limit and cancellation (`transport::http::send`,
//!    which refuses a URL carrying `user:pass@` before sending anything, as the reference's
//!    `fetch` does), with the API's error shaping ([`Dialect`]), and the request an API sends
//!    in place of a refused one ([`WireApi::resend`]: Claude's strict tool limits, Anthropic
//!    message threads);
//! 3. `start`, then the body read under the idle limit, the frame caps and cancellation
//!    (`transport::http::Body`), cut into events by the API's [`Framing`] (server-sent events,
//!    Gemini's SSE variant, or a binary framing read raw);
//! 4. the stop-reason tail ([`tail`]) and, on every error text, the redaction of what the
//!    request carried ([`Secrets`]): a server that quotes the key back does not get it into
//!    `errorMessage`.
//!
//! An API with a transport of its own besides HTTP tries it first ([`WireApi::own_transport`],
//! Codex's WebSocket) and falls back to the steps above when it says so.
//!
//! The API decides what cancellation reads as ([`WireApi::CANCEL`]): the reference's adapters
//! word it differently and check it at different points, and the driver keeps each one's.

use std::future::Future;

use pi_types::{
    AssistantMessageBuilder, AssistantMessageEventStream, Handover, Model, StreamOptions, TranscriptContext,
};

use crate::api::support;
use crate::transport::http::{self, Body, Read};
use crate::transport::sse::{SseDecoder, SseEventRef};

/// What a wire API implements: its request side. The decoding state of one response
/// ([`WireApi::Decoder`]) implements [`Decoder`], its stream side. The driver ([`stream`]) does
/// the rest.
pub trait WireApi: Send + Sync + Sized + 'static {
    /// How non-2xx answers and transport failures read (the SDK's error shapes).
    type Dialect: Dialect;
    /// The decoding state of one response.
    type Decoder: Decoder;
    /// What a cancelled request reads as, and where the driver looks for it.
    const CANCEL: Cancel;

    /// The API id the message is stamped with when the API has its own (else the model's `api`).
    const API_ID: Option<&'static str> = None;

    /// The request to send (key lookup, payload, `on_payload`, URL, headers), its error shaping,
    /// and a fresh decoding state.
    fn prepare(&self, call: Call<'_>) -> impl Future<Output = Result<Exchange<Self>, Stop>> + Send;

    /// A request to send in place of one the server refused (after that request's retries,
    /// never once an answer started, never for a cancelled request): `None` lets the failure
    /// stand ([`WireApi::refused`]). The driver sends it as it sent the first: a fresh retry
    /// budget, the limits, `on_response` for each attempt and the redaction of what it
    /// carries. The API bounds its own resends (its decoding state knows what it already
    /// tried) and may record on the message why it resent.
    fn resend(
        &self,
        _decoder: &mut Self::Decoder,
        _dialect: &Self::Dialect,
        _failure: &Failure,
        _cx: &mut Cx<'_>,
    ) -> impl Future<Output = Result<Option<Request>, Stop>> + Send {
        std::future::ready(Ok(None))
    }

    /// A transport of the API's own, tried before HTTP (Codex's WebSocket): `Some` ends the
    /// request with its result (the stream is read, `start` sent and the decoder's end checked
    /// there); `None` sends the prepared request over HTTP, as without it.
    fn own_transport(
        &self,
        _request: &http::Request,
        _decoder: &mut Self::Decoder,
        _cx: &mut Cx<'_>,
    ) -> impl Future<Output = Option<Result<(), Stop>>> + Send {
        std::future::ready(None)
    }

    /// The error of a request that failed before the answer's headers (after retries).
    fn refused(&self, _decoder: &mut Self::Decoder, _dialect: &Self::Dialect, failure: Failure) -> Stop {
        failure.into()
    }

    /// A check of the 2xx answer before `start` (e.g. a status without a body).
    fn accept(&self, _decoder: &mut Self::Decoder, _response: &reqwest::Response) -> Result<(), Stop> {
        Ok(())
    }

    /// The terminal event: `done` with the stream's stop reason, or the error of a [`Stop`]
    /// (its text already cleaned of `secrets`; the state is there once the request was built).
    fn finish(
        &self,
        _model: &Model,
        _decoder: Option<Self::Decoder>,
        out: AssistantMessageBuilder,
        result: Result<(), Stop>,
        _secrets: &Secrets,
    ) -> impl Future<Output = ()> + Send {
        support::finish(out, result)
    }
}

/// The stream side of a wire API: what each framed event of one response does to the message.
pub trait Decoder: Send {
    /// How the response body is cut into events.
    type Framing: Framing;

    /// The error of a body read that broke or stalled.
    fn read_failed(&mut self, message: String) -> Stop {
        Stop::error(message)
    }

    /// One framed event: what it does to the message, and whether reading goes on. (The
    /// bound on `'e` only names the event's lifetime for implementations: `where Sse: 'e`.)
    fn event<'e>(
        &mut self,
        event: <Self::Framing as Framing>::Event<'e>,
        cx: &mut Cx<'_>,
    ) -> impl Future<Output = Result<Flow, Stop>> + Send
    where
        Self::Framing: 'e;

    /// An event whose whole work is one change to an open block (a text, thinking or
    /// argument delta, most of a stream): the change made at once and the builder's
    /// [`Handover`] of its event given back, which the driver awaits in place of a future of
    /// the decoder's own. `None` (the default) for any other event, with nothing changed: the
    /// driver then calls [`Decoder::event`] with it.
    ///
    /// Only a fast path: an API without it streams the same events through `event`, which
    /// must still handle every event this one takes.
    fn delta<'c>(
        &mut self,
        _event: &<Self::Framing as Framing>::Event<'_>,
        _cx: &'c mut Cx<'_>,
    ) -> Option<Handover<'c, Result<Flow, Stop>>> {
        None
    }

    /// After the last event (the body's end, a terminal event, or a cancellation the API
    /// drains): close what is open and check the stop reason, usually with [`tail`].
    fn end(&mut self, cx: &mut Cx<'_>) -> impl Future<Output = Result<(), Stop>> + Send;
}

/// What a request is built from.
pub struct Call<'a> {
    /// The model it goes to.
    pub model: &'a Model,
    /// The conversation.
    pub context: TranscriptContext,
    /// The request's options.
    pub options: &'a StreamOptions,
    /// The message: takes what the request settles of its metadata (no event is sent before
    /// `start`).
    pub out: &'a mut AssistantMessageBuilder,
}

/// One prepared request: what goes on the wire, its error shaping, the decoding state.
pub struct Exchange<A: WireApi> {
    /// What goes on the wire.
    pub request: http::Request,
    /// Its error shaping.
    pub dialect: A::Dialect,
    /// A fresh decoding state.
    pub decoder: A::Decoder,
    /// The API's own time-to-headers default, for a caller who sets none.
    pub headers_timeout_ms: Option<u64>,
    /// Whether the driver emits `start` once the answer's headers are in (an API whose
    /// protocol carries its own `start` event says no).
    pub start: bool,
}

impl<A: WireApi> Exchange<A> {
    /// A request with the shared defaults: `start` on headers, the transport's timeouts.
    pub fn new(request: http::Request, dialect: A::Dialect, decoder: A::Decoder) -> Self {
        Self { request, dialect, decoder, headers_timeout_ms: None, start: true }
    }
}

/// Whether reading goes on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Read on.
    Continue,
    /// The protocol ended (a terminal event, `[DONE]`): nothing after it is read or waited for.
    End,
}

/// What cancellation reads as: the stream fails with this text, or reading stops and
/// [`Decoder::end`] sees [`Cx::cancelled`].
#[derive(Clone, Copy, Debug)]
pub enum OnCancel {
    /// Fail with `aborted` and this text.
    Fail(&'static str),
    /// Stop reading and end the stream normally ([`Decoder::end`] decides).
    Drain,
}

impl OnCancel {
    /// A cancellation seen: the stream's error, or `Ok` to stop reading and drain.
    fn stop(self) -> Result<(), Stop> {
        match self {
            Self::Fail(text) => Err(Stop::aborted(text)),
            Self::Drain => Ok(()),
        }
    }
}

/// Where and how the driver looks at the cancellation token while reading.
#[derive(Clone, Copy, Debug)]
pub struct Cancel {
    /// A read that saw the token fire.
    pub read: OnCancel,
    /// Before each event.
    pub before_event: Option<OnCancel>,
    /// After each event.
    pub after_event: Option<OnCancel>,
}

/// What an event handler works with: the message being built and the request's settings.
pub struct Cx<'a> {
    /// The model the request went to.
    pub model: &'a Model,
    /// The request's options.
    pub options: &'a StreamOptions,
    /// The message being built.
    pub out: &'a mut AssistantMessageBuilder,
    cancelled: bool,
}

impl Cx<'_> {
    /// Whether the request was cancelled (known once reading stopped).
    pub fn cancelled(&self) -> bool {
        self.cancelled || self.options.cancel.as_ref().is_some_and(pi_types::CancellationToken::is_cancelled)
    }
}

/// The tail every stream's read ends with: a cancelled request is `aborted` ("Request was
/// aborted"); else the stop reason decides (`support::stop_reason_tail`, `pending` names a
/// stream that set none).
pub fn tail(cx: &Cx<'_>, pending: &str) -> Result<(), Stop> {
    if cx.cancelled() {
        return Err(Stop::aborted("Request was aborted"));
    }
    support::stop_reason_tail(cx.out.message(), pending)
}

/// How a body is cut into events.
pub trait Framing: Default + Send {
    /// One event, borrowed from the framing's buffer.
    type Event<'a>: Send
    where
        Self: 'a;
    /// How the body is read.
    const READ: ReadMode;
    /// Feed one piece of the body.
    fn push(&mut self, bytes: &[u8]) -> Result<(), Stop>;
    /// The body ended.
    fn finish(&mut self) -> Result<(), Stop>;
    /// The next complete event.
    fn next(&mut self) -> Result<Option<Self::Event<'_>>, Stop>;
}

/// How the driver reads a body for a [`Framing`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Event-stream chunks under the line and event caps, handed out a piece at a time.
    Pieces,
    /// Event-stream chunks under the line and event caps, whole.
    Chunks,
    /// Raw chunks (a binary framing caps its own frames).
    Raw,
}

/// Server-sent events ([`SseDecoder`]).
pub struct Sse(SseDecoder);

impl Default for Sse {
    fn default() -> Self {
        Self(SseDecoder::new())
    }
}

impl Framing for Sse {
    type Event<'a> = SseEventRef<'a>;
    const READ: ReadMode = ReadMode::Pieces;

    fn push(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.0.push_bytes(bytes);
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Stop> {
        self.0.finish_bytes();
        Ok(())
    }

    fn next(&mut self) -> Result<Option<SseEventRef<'_>>, Stop> {
        Ok(self.0.next_event())
    }
}

/// Stream `model`'s answer to `context` through `api`: the [`pi_types::StreamFn`] of every
/// adapter built on the driver.
pub fn stream<A: WireApi>(
    api: A,
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
) -> AssistantMessageEventStream {
    let model = model.clone();
    AssistantMessageEventStream::from_producer(move |tx| async move {
        let mut out = support::builder(tx, &model, A::API_ID.unwrap_or(&model.api));
        let mut secrets = Secrets::default();
        let mut decoder = None;
        let result = run(&api, &model, context, &options, &mut out, &mut secrets, &mut decoder).await;
        let result = scrub(&secrets, &mut out, result);
        api.finish(&model, decoder, out, result, &secrets).await;
    })
}

async fn run<A: WireApi>(
    api: &A,
    model: &Model,
    context: TranscriptContext,
    options: &StreamOptions,
    out: &mut AssistantMessageBuilder,
    secrets: &mut Secrets,
    slot: &mut Option<A::Decoder>,
) -> Result<(), Stop> {
    let Exchange { mut request, dialect, decoder, headers_timeout_ms, start } =
        api.prepare(Call { model, context, options, out: &mut *out }).await?;
    let decoder = slot.insert(decoder);
    *secrets = Secrets::of(&request, options);
    let mut cx = Cx { model, options, out: &mut *out, cancelled: false };
    if let Some(result) = api.own_transport(&request, decoder, &mut cx).await {
        return result;
    }
    let mut limited = None;
    let attempt = match headers_timeout_ms.filter(|_| options.timeout_ms.is_none()) {
        Some(limit) => &*limited.insert(StreamOptions { timeout_ms: Some(limit), ..options.clone() }),
        None => options,
    };
    let response = loop {
        let failure = match http::send(&request, model, attempt, &dialect).await {
            Ok(response) => break response,
            Err(failure) => failure,
        };
        if !failure.aborted {
            let mut cx = Cx { model, options, out: &mut *out, cancelled: false };
            if let Some(next) = api.resend(decoder, &dialect, &failure, &mut cx).await? {
                request = next;
                *secrets = Secrets::of(&request, options);
                continue;
            }
        }
        return Err(api.refused(decoder, &dialect, failure));
    };
    api.accept(decoder, &response)?;
    if start {
        out.start().await;
    }
    let mut body = Body::new(response, options);
    let mut framing = <A::Decoder as Decoder>::Framing::default();
    let cancel = A::CANCEL;
    let mut cancelled = false;
    'read: loop {
        let read = match <<A::Decoder as Decoder>::Framing as Framing>::READ {
            ReadMode::Pieces => body.next_piece().await,
            ReadMode::Chunks => body.next().await,
            ReadMode::Raw => body.next_raw().await,
        };
        let ended = match read {
            Read::Chunk(bytes) => {
                framing.push(&bytes)?;
                false
            }
            Read::End => {
                framing.finish()?;
                true
            }
            Read::Aborted => {
                cancel.read.stop()?;
                cancelled = true;
                break 'read;
            }
            Read::Failed(message) => return Err(decoder.read_failed(message)),
        };
        while let Some(event) = framing.next()? {
            if let Some(on_cancel) = cancel.before_event.filter(|_| body.is_cancelled()) {
                on_cancel.stop()?;
                cancelled = true;
                break 'read;
            }
            let mut cx = Cx { model, options, out, cancelled: false };
            let flow = match decoder.delta(&event, &mut cx) {
                Some(handover) => handover.await?,
                None => decoder.event(event, &mut cx).await?,
            };
            if flow == Flow::End {
                break 'read;
            }
            if let Some(on_cancel) = cancel.after_event.filter(|_| body.is_cancelled()) {
                on_cancel.stop()?;
                cancelled = true;
                break 'read;
            }
        }
        if ended {
            break;
        }
    }
    let mut cx = Cx { model, options, out, cancelled: cancelled || body.is_cancelled() };
    decoder.end(&mut cx).await
}

pub use crate::api::support::Stop;
pub use crate::transport::http::{ApiError, ApiErrorKind, Dialect, Failure, Request, Retry};
pub use crate::transport::redact::Secrets;

/// The error text of `result`, an `errorMessage` the stream itself set and the diagnostics a
/// recovery recorded (which may quote a server's answer), without what the request carried (see
/// [`Secrets`]).
pub(crate) fn scrub(
    secrets: &Secrets,
    out: &mut AssistantMessageBuilder,
    result: Result<(), Stop>,
) -> Result<(), Stop> {
    if let Some(text) = out.message().error_message.as_deref() {
        let clean = secrets.clean(text.to_owned());
        if clean != text {
            out.metadata_mut().error_message = Some(clean.into_boxed_str());
        }
    }
    if !secrets.is_empty() && out.message().diagnostics.as_ref().is_some_and(|d| !d.is_empty()) {
        for diagnostic in out.metadata_mut().diagnostics.iter_mut().flatten() {
            secrets.clean_diagnostic(diagnostic);
        }
    }
    result.map_err(|stop| Stop { message: secrets.clean(stop.message), ..stop })
}
