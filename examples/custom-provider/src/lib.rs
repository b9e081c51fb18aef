//! An example provider crate that depends only on `pi-types`.
//!
//! [`ScriptedProvider`] answers each request with the next scripted reply and streams it the
//! way a network provider would: text, reasoning and tool-call arguments in pieces, through
//! [`AssistantMessageBuilder`], which keeps the partial message, the content indexes, the
//! argument parsing and the endings consistent. The cancellation token is checked before
//! `start` and before every piece; between pieces the provider yields, so an abort or a steering
//! message can land mid-stream.
//!
//! ```
//! use custom_provider::ScriptedProvider;
//! use pi_types::{AssistantContent, AssistantMessage, Model, StopReason, StreamFn, StreamOptions, TranscriptContext};
//!
//! let provider = ScriptedProvider::new(8);
//! let mut arguments = pi_types::JsonObject::new();
//! arguments.insert("city".into(), "Oslo".into());
//! provider.push_reply(AssistantMessage {
//!     content: vec![AssistantContent::text("Let me check."), AssistantContent::tool_call("call_1", "weather", arguments)],
//!     stop_reason: StopReason::ToolUse,
//!     ..Default::default()
//! });
//! let model = Model::new("scripted-1").with_api("scripted").with_provider("example");
//! let stream = provider.stream(&model, TranscriptContext::default(), StreamOptions::default());
//! let message = futures::executor::block_on(stream.result()).unwrap();
//! assert_eq!(message.text(), "Let me check.");
//! assert_eq!(message.tool_calls().next().unwrap().arguments["city"], "Oslo");
//! ```

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageBuilder, AssistantMessageEventStream, Model, StopReason,
    StreamFn, StreamOptions, TranscriptContext, TypesError,
};

/// A provider that streams scripted replies, one per request, in pieces of a fixed length.
#[derive(Clone, Debug, Default)]
pub struct ScriptedProvider {
    replies: Arc<Mutex<VecDeque<AssistantMessage>>>,
    piece_len: usize,
}

impl ScriptedProvider {
    /// A provider with no replies yet that streams text in pieces of `piece_len` UTF-16 units
    /// (at least one).
    pub fn new(piece_len: usize) -> Self {
        Self { replies: Arc::default(), piece_len: piece_len.max(1) }
    }

    /// Queues a reply: its content is streamed, it ends with its stop reason, and its other
    /// fields (usage, error message, ...) are the message's from `start` on; `api`, `provider`,
    /// `model` and `timestamp` come from the request.
    pub fn push_reply(&self, reply: AssistantMessage) {
        self.replies.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push_back(reply);
    }

    /// How many replies are still queued.
    pub fn pending(&self) -> usize {
        self.replies.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }
}

impl StreamFn for ScriptedProvider {
    fn stream(
        &self,
        model: &Model,
        _context: TranscriptContext,
        options: StreamOptions,
    ) -> AssistantMessageEventStream {
        let reply = self.replies.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop_front();
        let (model, piece_len) = (model.clone(), self.piece_len);
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let Some(mut reply) = reply else {
                let out = AssistantMessageBuilder::for_model(tx, &model);
                return out.error("No more scripted replies queued").await;
            };
            // The reply's other fields (usage, error message, ids) are the message's from the start.
            let content = std::mem::take(&mut reply.content);
            let stop_reason = reply.stop_reason;
            let message = AssistantMessage {
                api: model.api.clone(),
                provider: model.provider.clone(),
                model: model.id.clone(),
                stop_reason: StopReason::Pending,
                timestamp: pi_types::now_ms(),
                ..reply
            };
            let mut out = AssistantMessageBuilder::new(tx, message);
            let cancelled = || options.cancel.as_ref().is_some_and(|token| token.is_cancelled());
            if cancelled() {
                return out.aborted("Request was aborted").await;
            }
            out.start().await;
            for block in &content {
                let index = match block {
                    AssistantContent::Text(_) => out.start_text().await,
                    AssistantContent::Thinking(_) => out.start_thinking().await,
                    AssistantContent::ToolCall(call) => out.start_tool_call(call.id.clone(), call.name.clone()).await,
                };
                for piece in pieces(&block_text(block), piece_len) {
                    YieldOnce(false).await;
                    if cancelled() {
                        return out.aborted("Request was aborted").await;
                    }
                    if let Err(error) = stream_piece(&mut out, block, index, piece).await {
                        return out.error(error.to_string()).await;
                    }
                }
                if let Err(error) = out.end_block(index).await {
                    return out.error(error.to_string()).await;
                }
            }
            if stop_reason == StopReason::Pending {
                return out.error("Scripted reply has no stop reason").await;
            }
            out.done(stop_reason).await;
        })
    }
}

/// The text a block streams: its text, its reasoning, or its arguments as JSON.
fn block_text(block: &AssistantContent) -> String {
    match block {
        AssistantContent::Text(text) => text.text.clone(),
        AssistantContent::Thinking(thinking) => thinking.thinking.clone(),
        AssistantContent::ToolCall(call) => {
            let mut json = String::new();
            pi_types::json::write_stringify_object(&mut json, &call.arguments);
            json
        }
    }
}

async fn stream_piece(
    out: &mut AssistantMessageBuilder,
    block: &AssistantContent,
    index: usize,
    piece: String,
) -> Result<(), TypesError> {
    match block {
        AssistantContent::Text(_) => out.text_delta(index, piece).await,
        AssistantContent::Thinking(_) => out.thinking_delta(index, piece).await,
        AssistantContent::ToolCall(_) => out.tool_call_delta(index, piece).await,
    }
}

/// `text` in pieces of `len` UTF-16 units (an empty text is one empty piece, so every block
/// has a delta).
pub fn pieces(text: &str, len: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let (mut current, mut units) = (String::new(), 0);
    for c in text.chars() {
        current.push(c);
        units += c.len_utf16();
        if units >= len {
            pieces.push(std::mem::take(&mut current));
            units = 0;
        }
    }
    if !current.is_empty() || pieces.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Returns `Pending` once (waking itself), so the task that drives the stream lets others run.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
