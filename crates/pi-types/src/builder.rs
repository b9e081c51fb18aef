//! The partial-message builder: the one reducer from provider deltas to
//! [`AssistantMessageEvent`]s, used by the built-in adapters, the faux provider, the proxy client
//! and custom providers.
//!
//! # Protocol
//! A response is `start`, then content blocks, then exactly one terminal event:
//!
//! * `start` — [`AssistantMessageBuilder::start`];
//! * per block, `*_start`, any number of `*_delta`, `*_end`. Blocks are numbered by their place in
//!   `content`; the builder assigns the index when a block starts and the caller passes it back.
//!   Several blocks may be open at once (Chat Completions streams text and tool calls
//!   interleaved);
//! * `done` ([`done`](AssistantMessageBuilder::done)) or `error`
//!   ([`error`](AssistantMessageBuilder::error), [`aborted`](AssistantMessageBuilder::aborted)).
//!   An error may come at any point, also before `start`; open blocks stay as they are.
//!
//! The builder keeps the rules the reference's adapters each keep by hand: every event carries
//! the partial message as it is right after the event; a delta is appended to its block before
//! the event is sent; `text_end.content`, `thinking_end.content` and `toolcall_end.toolCall` are
//! taken from the block; tool-call argument text is kept raw, parsed incrementally into partial
//! arguments while it streams (the reference's `ToolCallArgumentsStream`) and parsed once, fully,
//! when the call ends (malformed text sets `argumentsError`).
//!
//! # Cost
//! The partial message is an `Arc` shared with the events (see [`AssistantMessageEvent`]): the builder
//! mutates it in place when no consumer kept the previous event, so a response costs time linear
//! in its length. Partial tool-call arguments are edited in place too: each piece of argument
//! text costs its own length, however large the arguments grow (no copy of the argument map per
//! published snapshot).
//!
//! # Example: a streaming provider
//! ```
//! use pi_types::{
//!     AssistantMessageBuilder, AssistantMessageEventStream, Model, StopReason, StreamFn, StreamOptions,
//!     TranscriptContext,
//! };
//!
//! /// Answers every request with a text and a tool call, streamed in pieces.
//! struct Scripted;
//!
//! impl StreamFn for Scripted {
//!     fn stream(&self, model: &Model, _context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
//!         let model = model.clone();
//!         AssistantMessageEventStream::from_producer(move |tx| async move {
//!             let mut out = AssistantMessageBuilder::for_model(tx, &model);
//!             if options.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
//!                 return out.aborted("Request was aborted").await;
//!             }
//!             out.start().await;
//!             let text = out.start_text().await;
//!             for piece in ["Checking ", "the weather."] {
//!                 out.text_delta(text, piece).await.expect("an open text block");
//!             }
//!             out.end_text(text).await.expect("an open text block");
//!             let call = out.start_tool_call("call_1", "weather").await;
//!             for piece in [r#"{"city":"Os"#, r#"lo"}"#] {
//!                 out.tool_call_delta(call, piece).await.expect("an open tool call");
//!             }
//!             out.end_tool_call(call).await.expect("an open tool call");
//!             out.metadata_mut().usage.output = 12;
//!             out.done(StopReason::ToolUse).await;
//!         })
//!     }
//! }
//!
//! let model = Model::new("scripted-1").with_api("scripted").with_provider("scripted");
//! let stream = Scripted.stream(&model, TranscriptContext::default(), StreamOptions::default());
//! let message = futures_executor::block_on(stream.result()).unwrap();
//! assert_eq!(message.text(), "Checking the weather.");
//! let call = message.tool_calls().next().unwrap();
//! assert_eq!(call.arguments["city"], "Oslo");
//! assert_eq!(message.stop_reason, StopReason::ToolUse);
//! ```

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use compact_str::CompactString;

use crate::content::{AssistantContent, JsonObject, TextContent, ThinkingContent, ToolCall};
use crate::error::TypesError;
use crate::event::{AssistantMessageEvent, ToolCallAnnouncement};
use crate::json::{parse_tool_call_arguments, StreamingJsonParser};
use crate::message::{AssistantMessage, StopReason};
use crate::model::Model;
use crate::stream::{EventSender, SendEvent, SendOwned};

/// Builds one streamed assistant message and sends its events.
///
/// Methods that take a content index return [`TypesError::WrongBlock`] or
/// [`TypesError::NoSuchBlock`] when the index does not name a block of the right kind in the
/// right state, and then change nothing and send nothing.
///
/// A block method makes its change when it is called and returns a [`Handover`] future, which
/// hands the event to the consumer when awaited (it borrows the builder, so each is awaited, or
/// dropped, before the next call).
#[derive(Debug)]
pub struct AssistantMessageBuilder {
    message: Arc<AssistantMessage>,
    /// The state of each block, parallel to `message.content`.
    blocks: Vec<BlockState>,
    tx: EventSender,
    /// Whether a terminal event was sent.
    ended: bool,
}

/// A builder dropped before it ended the response (its producer returned early, failed or was
/// given up with [`AssistantMessageBuilder::into_sender`]) leaves its message with its stream:
/// the consumer then still has what was streamed (see
/// [`AssistantMessageEventStream::take_unfinished`](crate::AssistantMessageEventStream::take_unfinished))
/// without keeping a copy of its own along the way.
impl Drop for AssistantMessageBuilder {
    fn drop(&mut self) {
        if !self.ended {
            self.tx.leave_unfinished(Arc::clone(&self.message));
        }
    }
}

#[derive(Debug)]
enum BlockState {
    Open,
    OpenToolCall(Box<ArgumentText>),
    Ended,
}

/// The raw argument text of a streaming tool call and its incremental parser.
///
/// The parser's object snapshot lives in the tool-call block itself (see
/// `StreamingJsonParser::publish_object_into`), so publishing edits the block in place.
#[derive(Debug)]
struct ArgumentText {
    text: String,
    parser: StreamingJsonParser,
}

impl Default for ArgumentText {
    fn default() -> Self {
        Self { text: String::new(), parser: StreamingJsonParser::without_changes() }
    }
}

impl ArgumentText {
    fn append(&mut self, delta: &str, arguments: &mut JsonObject) {
        self.text.push_str(delta);
        self.parser.append_into(delta, arguments);
    }

    /// Takes the complete text; the missing piece when it continues the text so far.
    fn replace(&mut self, text: &str, arguments: &mut JsonObject) -> Option<CompactString> {
        if let Some(delta) = text.strip_prefix(self.text.as_str()) {
            let delta = CompactString::from(delta);
            if delta.is_empty() {
                self.parser.publish_object_into(arguments);
            } else {
                self.append(&delta, arguments);
            }
            return Some(delta);
        }
        // Start over: the partial arguments become those of the new text alone.
        self.text.clear();
        self.parser = StreamingJsonParser::without_changes();
        arguments.clear();
        self.append(text, arguments);
        None
    }
}

/// What a block method of [`AssistantMessageBuilder`] returns. The method makes its change when
/// it is called; awaiting this hands its event (if any) to the consumer and then gives the
/// method's result. Dropped unawaited, the change stays and its event is never sent. A future
/// that stores only the event, so a provider's future stays small.
#[derive(Debug)]
#[must_use = "the event is handed over when the future is awaited"]
pub struct Handover<'a, T> {
    send: Option<SendEvent<'a>>,
    output: Option<T>,
}

impl<'a, T> Handover<'a, T> {
    /// `output` once `send` was handed over.
    fn after(send: SendEvent<'a>, output: T) -> Self {
        Self { send: Some(send), output: Some(output) }
    }

    /// `output` after `send`, if there is an event to send.
    #[inline]
    fn maybe_after(send: Option<SendEvent<'a>>, output: T) -> Self {
        Self { send, output: Some(output) }
    }

    /// `output` at once, with nothing to hand over: for a provider whose event changed the
    /// message without an event of its own (a signature appended to a thinking block), where
    /// its other events give back a builder method's hand-over.
    pub fn ready(output: T) -> Self {
        Self { send: None, output: Some(output) }
    }

    /// The same hand-over giving `f` of the method's result. The result is known when the
    /// method returns (only the hand-over waits), so `f` runs at once; a provider uses it to
    /// give back a hand-over in its own terms (e.g. its error type) instead of awaiting it
    /// inside a future of its own.
    #[inline]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Handover<'a, U> {
        Handover { send: self.send, output: self.output.map(f) }
    }
}

impl<T: Unpin> Future for Handover<'_, T> {
    type Output = T;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let Some(send) = self.send.as_mut() {
            if Pin::new(send).poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.send = None;
        }
        // Polled again after it gave its result: it has nothing more to give.
        self.output.take().map_or(Poll::Pending, Poll::Ready)
    }
}

/// A content block's kind: compared per delta, so an enum rather than its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    ToolCall,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Thinking => "thinking",
            Self::ToolCall => "toolCall",
        }
    }
}

fn kind_of(block: &AssistantContent) -> Kind {
    match block {
        AssistantContent::Text(_) => Kind::Text,
        AssistantContent::Thinking(_) => Kind::Thinking,
        AssistantContent::ToolCall(_) => Kind::ToolCall,
    }
}

impl AssistantMessageBuilder {
    /// A builder for `message` (its `api`, `provider`, `model`, `timestamp`, ...), sending
    /// events to `tx`. Blocks already in `message.content` count as ended.
    pub fn new(tx: EventSender, message: AssistantMessage) -> Self {
        let blocks = message.content.iter().map(|_| BlockState::Ended).collect();
        tx.attach_builder();
        Self { message: Arc::new(message), blocks, tx, ended: false }
    }

    /// A builder for an empty message of `model` (its API, provider and id), stop reason
    /// `pending`, stamped with the current time.
    pub fn for_model(tx: EventSender, model: &Model) -> Self {
        let message = AssistantMessage {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            stop_reason: StopReason::Pending,
            timestamp: crate::now_ms(),
            ..Default::default()
        };
        Self::new(tx, message)
    }

    /// The message so far.
    pub fn message(&self) -> &AssistantMessage {
        &self.message
    }

    /// The message fields that have no events of their own (`usage`, `response_id`,
    /// `stop_reason`, `error_message`, ...), for editing.
    ///
    /// Content changes only through the block methods, which send the matching events: while
    /// the guard lives, its `content` is empty, and whatever is put there is discarded when it
    /// drops.
    pub fn metadata_mut(&mut self) -> MetadataMut<'_> {
        self.tx.touch_metadata();
        let message = Arc::make_mut(&mut self.message);
        let content = std::mem::take(&mut message.content);
        MetadataMut { message, content }
    }

    /// Whether block `index` has started and not ended.
    pub fn is_open(&self, index: usize) -> bool {
        matches!(self.blocks.get(index), Some(BlockState::Open | BlockState::OpenToolCall(_)))
    }

    /// Sends `start`.
    pub fn start(&mut self) -> Handover<'_, ()> {
        Handover::after(self.send(AssistantMessageEvent::Start { partial: Arc::clone(&self.message) }), ())
    }

    /// Starts a block with the given initial content (for providers whose block starts with
    /// text, a signature or, for tool calls, arguments) and sends its `*_start` event; returns
    /// its content index.
    pub fn start_block(&mut self, block: AssistantContent) -> Handover<'_, usize> {
        let index = self.message.content.len();
        let state = match &block {
            AssistantContent::ToolCall(_) => BlockState::OpenToolCall(Box::default()),
            _ => BlockState::Open,
        };
        let kind = kind_of(&block);
        Arc::make_mut(&mut self.message).content.push(block);
        self.blocks.push(state);
        let partial = Arc::clone(&self.message);
        let event = match kind {
            Kind::Text => AssistantMessageEvent::TextStart { content_index: index, partial },
            Kind::Thinking => AssistantMessageEvent::ThinkingStart { content_index: index, partial },
            _ => AssistantMessageEvent::ToolcallStart { content_index: index, announced: None, partial },
        };
        Handover::after(self.send(event), index)
    }

    /// Starts an empty text block; returns its content index.
    pub fn start_text(&mut self) -> Handover<'_, usize> {
        self.start_block(AssistantContent::Text(TextContent::default()))
    }

    /// Starts an empty thinking block; returns its content index.
    pub fn start_thinking(&mut self) -> Handover<'_, usize> {
        self.start_block(AssistantContent::Thinking(ThinkingContent::default()))
    }

    /// Starts a tool call with no arguments yet; returns its content index.
    pub fn start_tool_call(
        &mut self,
        id: impl Into<CompactString>,
        name: impl Into<CompactString>,
    ) -> Handover<'_, usize> {
        let call = ToolCall { id: id.into(), name: name.into(), ..Default::default() };
        self.start_block(AssistantContent::ToolCall(call))
    }

    /// Starts a tool call whose argument text begins with `arguments` (a provider that sends
    /// the first piece with the call itself): the piece is parsed into the partial arguments the
    /// start event shows; no delta is sent for it.
    pub fn start_tool_call_with_arguments(&mut self, call: ToolCall, arguments: &str) -> Handover<'_, usize> {
        let mut call = call;
        let mut text = ArgumentText::default();
        if !arguments.is_empty() {
            text.append(arguments, &mut call.arguments);
        }
        self.push_tool_call(call, text, None)
    }

    /// Starts a tool call whose `toolcall_start` event repeats its id and tool name (a proxy
    /// protocol that passes its wire events through, pi-messages); otherwise as
    /// [`start_tool_call`](Self::start_tool_call).
    pub fn start_announced_tool_call(
        &mut self,
        id: impl Into<CompactString>,
        name: impl Into<CompactString>,
    ) -> Handover<'_, usize> {
        let (id, name) = (id.into(), name.into());
        let announced = Box::new(ToolCallAnnouncement { id: id.clone(), tool_name: name.clone() });
        self.push_tool_call(ToolCall { id, name, ..Default::default() }, ArgumentText::default(), Some(announced))
    }

    /// Appends `call` as an open tool call with argument text `text` and sends its start.
    fn push_tool_call(
        &mut self,
        call: ToolCall,
        text: ArgumentText,
        announced: Option<Box<ToolCallAnnouncement>>,
    ) -> Handover<'_, usize> {
        let index = self.message.content.len();
        Arc::make_mut(&mut self.message).content.push(AssistantContent::ToolCall(call));
        self.blocks.push(BlockState::OpenToolCall(Box::new(text)));
        let event = AssistantMessageEvent::ToolcallStart {
            content_index: index,
            announced,
            partial: Arc::clone(&self.message),
        };
        Handover::after(self.send(event), index)
    }

    /// Sends a tool call that arrived whole (Gemini sends each call in one piece):
    /// `toolcall_start` with the block already holding its arguments, one `toolcall_delta`
    /// with their JSON text, and `toolcall_end`. Returns its content index.
    pub fn complete_tool_call(&mut self, call: ToolCall) -> impl Future<Output = usize> + Send + '_ {
        let index = self.message.content.len();
        let mut text = String::new();
        crate::json::write_stringify_object(&mut text, &call.arguments);
        let delta = CompactString::from(text);
        Arc::make_mut(&mut self.message).content.push(AssistantContent::ToolCall(call));
        self.blocks.push(BlockState::Ended);
        // The three events show the same message: made here, so the future holds no call.
        let start = AssistantMessageEvent::ToolcallStart {
            content_index: index,
            announced: None,
            partial: Arc::clone(&self.message),
        };
        let partial = Arc::clone(&self.message);
        let delta = AssistantMessageEvent::ToolcallDelta { content_index: index, delta, partial };
        let end = self.end_event(index);
        async move {
            self.send(start).await;
            self.send(delta).await;
            if let Some(end) = end {
                self.send(end).await;
            }
            index
        }
    }

    /// Appends `delta` to open text block `index` and sends `text_delta`.
    // The delta methods are inlined into a provider's streaming loop, as they run once per
    // token, and build their `Handover` directly: through `finish` (an `Option` of the event
    // matched afterwards) every token would pay for the match.
    #[inline]
    pub fn text_delta(
        &mut self,
        index: usize,
        delta: impl Into<CompactString>,
    ) -> Handover<'_, Result<(), TypesError>> {
        let delta = delta.into();
        if let Err(error) = self.open_block(index, Kind::Text) {
            return Handover::ready(Err(error));
        }
        if let Some(AssistantContent::Text(block)) = Arc::make_mut(&mut self.message).content.get_mut(index) {
            block.text.push_str(&delta);
        }
        let partial = Arc::clone(&self.message);
        Handover::after(self.send(AssistantMessageEvent::TextDelta { content_index: index, delta, partial }), Ok(()))
    }

    /// Appends `delta` to open thinking block `index` and sends `thinking_delta`.
    #[inline]
    pub fn thinking_delta(
        &mut self,
        index: usize,
        delta: impl Into<CompactString>,
    ) -> Handover<'_, Result<(), TypesError>> {
        let delta = delta.into();
        if let Err(error) = self.open_block(index, Kind::Thinking) {
            return Handover::ready(Err(error));
        }
        if let Some(AssistantContent::Thinking(block)) = Arc::make_mut(&mut self.message).content.get_mut(index) {
            block.thinking.push_str(&delta);
        }
        let partial = Arc::clone(&self.message);
        Handover::after(
            self.send(AssistantMessageEvent::ThinkingDelta { content_index: index, delta, partial }),
            Ok(()),
        )
    }

    /// Appends argument text to open tool call `index`, publishes the partial arguments when the
    /// parser has a new snapshot, and sends `toolcall_delta`.
    #[inline]
    pub fn tool_call_delta(
        &mut self,
        index: usize,
        delta: impl Into<CompactString>,
    ) -> Handover<'_, Result<(), TypesError>> {
        let delta = delta.into();
        match self.open_tool_call(index) {
            Ok((text, call)) => text.append(&delta, &mut call.arguments),
            Err(error) => return Handover::ready(Err(error)),
        }
        let partial = Arc::clone(&self.message);
        Handover::after(
            self.send(AssistantMessageEvent::ToolcallDelta { content_index: index, delta, partial }),
            Ok(()),
        )
    }

    /// Sends a `toolcall_delta` with an empty delta without feeding the argument parser: for a
    /// chunk that changed the call (its id or name, see [`tool_call_mut`](Self::tool_call_mut))
    /// but carried no argument text.
    pub fn tool_call_changed(&mut self, index: usize) -> Handover<'_, Result<(), TypesError>> {
        let outcome = self.open_tool_call(index).map(|_| ());
        let outcome = outcome.map(|()| {
            let partial = Arc::clone(&self.message);
            Some(AssistantMessageEvent::ToolcallDelta {
                content_index: index,
                delta: CompactString::default(),
                partial,
            })
        });
        self.finish(outcome)
    }

    /// Takes the provider's complete argument text for open tool call `index`. When it
    /// continues the text so far, the missing piece is appended and, if not empty, sent as a
    /// `toolcall_delta`; otherwise the text starts over (partial arguments of `text` alone, no
    /// event).
    pub fn replace_tool_call_arguments(&mut self, index: usize, text: &str) -> Handover<'_, Result<(), TypesError>> {
        let delta = self.open_tool_call(index).map(|(arguments, call)| arguments.replace(text, &mut call.arguments));
        let outcome = delta.map(|delta| {
            let delta = delta.filter(|d| !d.is_empty())?;
            Some(AssistantMessageEvent::ToolcallDelta {
                content_index: index,
                delta,
                partial: Arc::clone(&self.message),
            })
        });
        self.finish(outcome)
    }

    /// Ends open text block `index`: sends `text_end` with the block's text.
    pub fn end_text(&mut self, index: usize) -> Handover<'_, Result<(), TypesError>> {
        let outcome = self.open_block(index, Kind::Text).map(|()| self.close(index));
        self.finish(outcome)
    }

    /// Ends open thinking block `index`: sends `thinking_end` with the block's text.
    pub fn end_thinking(&mut self, index: usize) -> Handover<'_, Result<(), TypesError>> {
        let outcome = self.open_block(index, Kind::Thinking).map(|()| self.close(index));
        self.finish(outcome)
    }

    /// Ends open tool call `index`: its arguments become one full parse of the complete
    /// argument text (malformed text leaves them empty and sets `arguments_error`); sends
    /// `toolcall_end` with the call.
    pub fn end_tool_call(&mut self, index: usize) -> Handover<'_, Result<(), TypesError>> {
        let outcome = self.open_tool_call(index).map(|_| ());
        let outcome = outcome.map(|()| self.close(index));
        self.finish(outcome)
    }

    /// Ends open tool call `index` with the provider's complete argument text, which replaces
    /// the text streamed so far (no delta is sent for it); otherwise as
    /// [`end_tool_call`](Self::end_tool_call).
    pub fn end_tool_call_with_arguments(
        &mut self,
        index: usize,
        arguments: &str,
    ) -> Handover<'_, Result<(), TypesError>> {
        let replaced = self.open_tool_call(index).map(|(text, _)| {
            text.text.clear();
            text.text.push_str(arguments);
        });
        let outcome = replaced.map(|()| self.close(index));
        self.finish(outcome)
    }

    /// Ends open tool call `index` with the provider's own final form of the call (a provider
    /// or proxy that sends the complete call at the end): the block becomes `call`; sends
    /// `toolcall_end` with it.
    pub fn end_tool_call_with(&mut self, index: usize, mut call: ToolCall) -> Handover<'_, Result<(), TypesError>> {
        let outcome = self.open_tool_call(index).map(|_| ());
        if outcome.is_ok() {
            crate::json::parse::shrink_object(&mut call.arguments);
        }
        let outcome = outcome.map(|()| {
            if let Some(block) = Arc::make_mut(&mut self.message).content.get_mut(index) {
                *block = AssistantContent::ToolCall(call);
            }
            if let Some(state) = self.blocks.get_mut(index) {
                *state = BlockState::Ended;
            }
            self.end_event(index)
        });
        self.finish(outcome)
    }

    /// Ends open block `index`, whatever its kind (as [`end_text`](Self::end_text),
    /// [`end_thinking`](Self::end_thinking) or [`end_tool_call`](Self::end_tool_call)).
    pub fn end_block(&mut self, index: usize) -> Handover<'_, Result<(), TypesError>> {
        let outcome = match self.is_open(index) {
            true => Ok(self.close(index)),
            false => Err(self.wrong_block(index, "an open block".to_owned())),
        };
        self.finish(outcome)
    }

    /// Ends every open block, in content order.
    pub async fn end_open_blocks(&mut self) {
        for index in 0..self.blocks.len() {
            if let Some(event) = self.is_open(index).then(|| self.close(index)).flatten() {
                self.send(event).await;
            }
        }
    }

    /// The text block `index` (open or ended), for fields without events such as its
    /// signature, or to restate its text when a provider's final item does (the next event
    /// shows it). Append streamed text with [`text_delta`](Self::text_delta).
    pub fn text_mut(&mut self, index: usize) -> Result<&mut TextContent, TypesError> {
        if !matches!(self.message.content.get(index), Some(AssistantContent::Text(_))) {
            return Err(self.not_kind(index, Kind::Text));
        }
        match Arc::make_mut(&mut self.message).content.get_mut(index) {
            Some(AssistantContent::Text(block)) => Ok(block),
            _ => Err(TypesError::NoSuchBlock { index, count: 0 }),
        }
    }

    /// The thinking block `index` (open or ended), for its signature or `redacted` flag, or to
    /// restate its text. Append streamed reasoning with [`thinking_delta`](Self::thinking_delta).
    pub fn thinking_mut(&mut self, index: usize) -> Result<&mut ThinkingContent, TypesError> {
        if !matches!(self.message.content.get(index), Some(AssistantContent::Thinking(_))) {
            return Err(self.not_kind(index, Kind::Thinking));
        }
        match Arc::make_mut(&mut self.message).content.get_mut(index) {
            Some(AssistantContent::Thinking(block)) => Ok(block),
            _ => Err(TypesError::NoSuchBlock { index, count: 0 }),
        }
    }

    /// The tool call `index` (open or ended), for its id, name, signature or namespace.
    ///
    /// Its arguments belong to the argument stream: while the guard lives they read as empty,
    /// and changes to them are discarded when it drops.
    pub fn tool_call_mut(&mut self, index: usize) -> Result<ToolCallMut<'_>, TypesError> {
        if !matches!(self.message.content.get(index), Some(AssistantContent::ToolCall(_))) {
            return Err(self.not_kind(index, Kind::ToolCall));
        }
        match Arc::make_mut(&mut self.message).content.get_mut(index) {
            Some(AssistantContent::ToolCall(call)) => {
                let arguments = std::mem::take(&mut call.arguments);
                Ok(ToolCallMut { call, arguments })
            }
            _ => Err(TypesError::NoSuchBlock { index, count: 0 }),
        }
    }

    /// Ends the response with `done` and stop reason `reason` (`stop`, `length`, `toolUse`
    /// or `deferred`). For `error` or `aborted` the event is `error`, with the message's
    /// `error_message` as set.
    pub fn done(mut self, reason: StopReason) -> SendOwned {
        Arc::make_mut(&mut self.message).stop_reason = reason;
        let message = self.take_message();
        let event = match reason {
            StopReason::Error | StopReason::Aborted => AssistantMessageEvent::Error { reason, error: message },
            _ => AssistantMessageEvent::Done { reason, message },
        };
        self.tx.send_owned(event)
    }

    /// Ends the response with `error`: stop reason `error` and `error_message`.
    pub fn error(self, message: impl Into<String>) -> SendOwned {
        self.fail(StopReason::Error, message.into())
    }

    /// Ends the response with `error` for a cancelled request: stop reason `aborted` and
    /// `error_message`.
    pub fn aborted(self, message: impl Into<String>) -> SendOwned {
        self.fail(StopReason::Aborted, message.into())
    }

    /// Gives up the builder without ending the response, for a producer that ends it with a
    /// terminal event of its own.
    ///
    /// The message so far is left with the stream, for a consumer whose stream then ends without
    /// a terminal event.
    pub fn into_sender(self) -> EventSender {
        self.tx.share()
    }

    fn fail(mut self, reason: StopReason, text: String) -> SendOwned {
        let message = Arc::make_mut(&mut self.message);
        message.stop_reason = reason;
        message.error_message = Some(text.into());
        let error = self.take_message();
        self.tx.send_owned(AssistantMessageEvent::Error { reason, error })
    }

    /// The message, for the terminal event: the builder is done with it.
    fn take_message(&mut self) -> Arc<AssistantMessage> {
        self.ended = true;
        // The final message is kept (a transcript holds it for good): no room for blocks, or
        // text, that will never come (a streamed text's buffer grew by doubling).
        let content = &mut Arc::make_mut(&mut self.message).content;
        content.shrink_to_fit();
        for block in content.iter_mut() {
            match block {
                AssistantContent::Text(text) => text.text.shrink_to_fit(),
                AssistantContent::Thinking(thinking) => thinking.thinking.shrink_to_fit(),
                AssistantContent::ToolCall(_) => {}
            }
        }
        std::mem::replace(&mut self.message, crate::stream::ended_placeholder())
    }

    /// The sender's own future: no extra `async` layer per event.
    fn send(&self, event: AssistantMessageEvent) -> SendEvent<'_> {
        self.tx.send(event)
    }

    /// Ends open block `index` (checked by the caller): a tool call's arguments get their full
    /// parse. Returns the block's end event.
    fn close(&mut self, index: usize) -> Option<AssistantMessageEvent> {
        let state = self.blocks.get_mut(index)?;
        if let BlockState::OpenToolCall(text) = std::mem::replace(state, BlockState::Ended) {
            let parsed = parse_tool_call_arguments(Some(&text.text));
            if let Some(AssistantContent::ToolCall(call)) = Arc::make_mut(&mut self.message).content.get_mut(index) {
                call.arguments = parsed.arguments;
                if parsed.arguments_error.is_some() {
                    call.arguments_error = parsed.arguments_error.map(String::into_boxed_str);
                }
            }
        }
        self.end_event(index)
    }

    /// The future of a block method whose change is made: its event, if any, is handed over,
    /// then its result given.
    #[inline]
    fn finish(
        &self,
        outcome: Result<Option<AssistantMessageEvent>, TypesError>,
    ) -> Handover<'_, Result<(), TypesError>> {
        match outcome {
            Ok(event) => Handover::maybe_after(event.map(|event| self.send(event)), Ok(())),
            Err(error) => Handover::ready(Err(error)),
        }
    }

    /// The end event of block `index`, showing the message as it is.
    fn end_event(&self, index: usize) -> Option<AssistantMessageEvent> {
        let partial = Arc::clone(&self.message);
        Some(match partial.content.get(index)? {
            AssistantContent::Text(block) => {
                AssistantMessageEvent::TextEnd { content_index: index, content: block.text.clone(), partial }
            }
            AssistantContent::Thinking(block) => {
                AssistantMessageEvent::ThinkingEnd { content_index: index, content: block.thinking.clone(), partial }
            }
            AssistantContent::ToolCall(call) => {
                AssistantMessageEvent::ToolcallEnd { content_index: index, tool_call: Box::new(call.clone()), partial }
            }
        })
    }

    /// Checks that `index` is an open block of `kind`.
    #[inline]
    fn open_block(&self, index: usize, kind: Kind) -> Result<(), TypesError> {
        let is_kind = self.message.content.get(index).is_some_and(|block| kind_of(block) == kind);
        if is_kind && self.is_open(index) {
            Ok(())
        } else {
            Err(self.not_open(index, kind))
        }
    }

    /// The argument text and the block of open tool call `index`.
    fn open_tool_call(&mut self, index: usize) -> Result<(&mut ArgumentText, &mut ToolCall), TypesError> {
        if !matches!(self.blocks.get(index), Some(BlockState::OpenToolCall(_))) {
            return Err(self.not_open(index, Kind::ToolCall));
        }
        let count = self.message.content.len();
        let message = Arc::make_mut(&mut self.message);
        match (self.blocks.get_mut(index), message.content.get_mut(index)) {
            (Some(BlockState::OpenToolCall(text)), Some(AssistantContent::ToolCall(call))) => Ok((text, call)),
            _ => Err(TypesError::NoSuchBlock { index, count }),
        }
    }

    fn not_open(&self, index: usize, expected: Kind) -> TypesError {
        self.wrong_block(index, format!("an open {} block", expected.name()))
    }

    fn not_kind(&self, index: usize, expected: Kind) -> TypesError {
        self.wrong_block(index, format!("a {} block", expected.name()))
    }

    fn wrong_block(&self, index: usize, expected: String) -> TypesError {
        match self.message.content.get(index) {
            None => TypesError::NoSuchBlock { index, count: self.message.content.len() },
            Some(block) => {
                let state = if self.is_open(index) { "an open" } else { "an ended" };
                TypesError::WrongBlock { index, expected, found: format!("{state} {} block", kind_of(block).name()) }
            }
        }
    }
}

/// The message fields without events, from [`AssistantMessageBuilder::metadata_mut`]; its
/// `content` reads as empty and edits to it are discarded.
#[derive(Debug)]
pub struct MetadataMut<'a> {
    message: &'a mut AssistantMessage,
    content: Vec<AssistantContent>,
}

impl Deref for MetadataMut<'_> {
    type Target = AssistantMessage;
    fn deref(&self) -> &AssistantMessage {
        self.message
    }
}

impl DerefMut for MetadataMut<'_> {
    fn deref_mut(&mut self) -> &mut AssistantMessage {
        self.message
    }
}

impl Drop for MetadataMut<'_> {
    fn drop(&mut self) {
        self.message.content = std::mem::take(&mut self.content);
    }
}

/// A tool-call block without its arguments, from [`AssistantMessageBuilder::tool_call_mut`];
/// its `arguments` read as empty and edits to them are discarded.
#[derive(Debug)]
pub struct ToolCallMut<'a> {
    call: &'a mut ToolCall,
    arguments: JsonObject,
}

impl Deref for ToolCallMut<'_> {
    type Target = ToolCall;
    fn deref(&self) -> &ToolCall {
        self.call
    }
}

impl DerefMut for ToolCallMut<'_> {
    fn deref_mut(&mut self) -> &mut ToolCall {
        self.call
    }
}

impl Drop for ToolCallMut<'_> {
    fn drop(&mut self) {
        self.call.arguments = std::mem::take(&mut self.arguments);
    }
}
