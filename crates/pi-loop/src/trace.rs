//! `tracing` spans of a run, named and attributed per the OpenTelemetry GenAI semantic
//! conventions (docs/tracing.md has the table): `invoke_agent` for the run, `chat` for each
//! response, `execute_tool` for each tool call.
//!
//! Nothing here is on the per-delta path: spans are made when a run, a response or a call
//! starts and get their attributes when it ends. Without a subscriber that wants them, each is
//! a [`LiveSpan`] of `None` and every function here is a branch on that (the attribute values
//! are not even computed): the futures that hold a span (every run's, every tool call's) then
//! hold a null pointer instead of a [`Span`]'s 40 bytes, and poll through [`InSpan`], which
//! borrows the span where `tracing`'s `Instrumented` holds a copy of it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pi_types::{
    AgentToolResult, AssistantContent, AssistantMessage, Message, StopReason, ToolCall, UserContent, UserMessageContent,
};
use serde_json::{json, Value};
use tracing::field::Empty;
use tracing::Span;

use crate::{LoopConfig, LoopError};

/// What the loop's spans record besides their attributes.
///
/// Message content (prompts, responses, tool arguments and results) is sensitive and large,
/// so by default no span carries any: the OpenTelemetry conventions make it opt-in. With
/// `record_content`, `chat` spans get `gen_ai.input.messages` and `gen_ai.output.messages`
/// and `execute_tool` spans `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`, as
/// JSON in the conventions' message shape (images left out). Recording them costs a
/// serialization of the request's transcript per response, and only when a subscriber
/// records the span.
///
/// ```
/// use std::sync::Arc;
/// use pi_loop::LoopConfig;
/// use pi_providers::faux::FauxProvider;
///
/// let faux = FauxProvider::default();
/// let mut config = LoopConfig::new(faux.model(), Arc::new(faux));
/// config.trace.record_content = true;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceOptions {
    /// Record message content on the spans (default off).
    pub record_content: bool,
}

/// The `gen_ai.provider.name` of a pi provider id: the conventions' well-known value where
/// there is one, else the id itself.
pub fn provider_name(provider: &str) -> &str {
    match provider {
        "amazon-bedrock" => "aws.bedrock",
        "azure-openai-responses" => "azure.ai.openai",
        "google" | "google-gemini-cli" | "google-antigravity" => "gcp.gemini",
        "google-vertex" => "gcp.vertex_ai",
        "mistral" => "mistral_ai",
        "xai" => "x_ai",
        other => other,
    }
}

/// A span a subscriber records, boxed; `None` for one nobody records (a disabled span).
pub(crate) type LiveSpan = Option<Box<Span>>;

/// `span` if a subscriber records it.
fn live(span: Span) -> LiveSpan {
    (!span.is_disabled()).then(|| Box::new(span))
}

/// `f` run inside `span`, if there is one.
pub(crate) fn in_scope<T>(span: Option<&Span>, f: impl FnOnce() -> T) -> T {
    match span {
        Some(span) => span.in_scope(f),
        None => f(),
    }
}

pin_project_lite::pin_project! {
    /// `inner`, each poll of it inside `span` (if there is one). Unlike `tracing`'s
    /// `Instrumented`, a future dropped before it is done (a cancelled run's) is dropped
    /// outside the span: what it traces while dropped has no parent.
    pub(crate) struct InSpan<'a, F> {
        span: Option<&'a Span>,
        #[pin]
        inner: F,
    }
}

impl<'a, F> InSpan<'a, F> {
    pub(crate) fn new(span: Option<&'a Span>, inner: F) -> Self {
        Self { span, inner }
    }
}

impl<F: Future> Future for InSpan<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.span.map(Span::enter);
        this.inner.poll(cx)
    }
}

/// A count as a span attribute: an `i64`. `tracing-opentelemetry` exports `i64` fields as
/// OTLP integers but `u64` ones as their text (its visitor has no `record_u64`), and the
/// conventions' counts are integers.
pub(crate) fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A run's span and the usage of its responses so far, when a subscriber records the span.
pub(crate) struct RunTrace(Option<Box<RunSpan>>);

struct RunSpan {
    span: Span,
    input_tokens: u64,
    output_tokens: u64,
    /// The `error.type` of the last response, when it failed.
    failed: Option<&'static str>,
}

impl RunTrace {
    pub(crate) fn new(config: &LoopConfig) -> Self {
        let model = &config.model;
        // No `gen_ai.agent.name`: agents have no name (the conventions' span name is then
        // `invoke_agent` alone).
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent",
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.provider.name = provider_name(&model.provider),
            gen_ai.request.model = %model.id,
            gen_ai.conversation.id = config.options.session_id.as_deref(),
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
        );
        Self((!span.is_disabled()).then(|| Box::new(RunSpan { span, input_tokens: 0, output_tokens: 0, failed: None })))
    }

    /// The run's span, if a subscriber records it.
    pub(crate) fn span(&self) -> Option<&Span> {
        self.0.as_ref().map(|run| &run.span)
    }

    /// The `chat` span of the next response, a child of the run's.
    pub(crate) fn chat_span(&self, config: &LoopConfig, transcript: &[Message]) -> LiveSpan {
        let model = &config.model;
        let span = tracing::info_span!(
            parent: self.span().and_then(Span::id),
            "chat",
            otel.name = format!("chat {}", model.id),
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = provider_name(&model.provider),
            gen_ai.request.model = %model.id,
            gen_ai.request.max_tokens = config.options.max_tokens.map(int),
            gen_ai.request.temperature = config.options.temperature,
            gen_ai.conversation.id = config.options.session_id.as_deref(),
            gen_ai.response.id = Empty,
            gen_ai.response.model = Empty,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
            error.type = Empty,
        );
        let span = live(span)?;
        if config.trace.record_content {
            let messages: Vec<Value> = transcript.iter().filter_map(message_json).collect();
            span.record("gen_ai.input.messages", Value::Array(messages).to_string());
        }
        Some(span)
    }

    /// Records the ended response on its span (and its usage towards the run's).
    pub(crate) fn end_chat(&mut self, span: Option<&Span>, message: &AssistantMessage, record_content: bool) {
        let usage = &message.usage;
        let input = usage.input.saturating_add(usage.cache_read).saturating_add(usage.cache_write);
        if let Some(run) = &mut self.0 {
            run.input_tokens = run.input_tokens.saturating_add(input);
            run.output_tokens = run.output_tokens.saturating_add(usage.output);
            run.failed = error_type(message.stop_reason);
        }
        let Some(span) = span else { return };
        span.record("gen_ai.response.id", message.response_id.as_deref());
        span.record("gen_ai.response.model", message.response_model.as_deref().unwrap_or(message.model.as_str()));
        span.record("gen_ai.response.finish_reasons", format!("[\"{}\"]", finish_reason(message.stop_reason)));
        span.record("gen_ai.usage.input_tokens", int(input));
        span.record("gen_ai.usage.output_tokens", int(usage.output));
        span.record("gen_ai.usage.cache_read.input_tokens", int(usage.cache_read));
        span.record("gen_ai.usage.cache_creation.input_tokens", int(usage.cache_write));
        if let Some(kind) = error_type(message.stop_reason) {
            span.record("error.type", kind);
            span.record("otel.status_code", "ERROR");
        }
        if record_content {
            let output = json!([{
                "role": "assistant",
                "parts": assistant_parts(&message.content),
                "finish_reason": finish_reason(message.stop_reason),
            }]);
            span.record("gen_ai.output.messages", output.to_string());
        }
    }

    /// Records `error` as the end of the run and gives it back.
    pub(crate) fn fail(&self, error: LoopError) -> LoopError {
        self.end(Some(&error));
        error
    }

    /// Records the run's usage and, when it failed (a [`LoopError`], or a final response
    /// that ended in an error or was aborted), its `error.type`.
    pub(crate) fn end(&self, error: Option<&LoopError>) {
        let Some(run) = &self.0 else { return };
        run.span.record("gen_ai.usage.input_tokens", int(run.input_tokens));
        run.span.record("gen_ai.usage.output_tokens", int(run.output_tokens));
        let loop_error = error.map(|e| match e {
            LoopError::NoMessages | LoopError::ContinueFromAssistant => "invalid_context",
            LoopError::Hook(_) => "hook_error",
            LoopError::Sink(_) => "sink_error",
        });
        if let Some(kind) = loop_error.or(run.failed) {
            run.span.record("error.type", kind);
            run.span.record("otel.status_code", "ERROR");
        }
    }
}

/// The `error.type` of a response that ended with `reason`, if it failed.
pub(crate) fn error_type(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::Error => Some("error"),
        StopReason::Aborted => Some("aborted"),
        _ => None,
    }
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Pending => "pending",
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_call",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
        StopReason::Deferred => "deferred",
    }
}

/// The `execute_tool` span of `call`, a child of `parent` (the run's span).
pub(crate) fn tool_span(parent: Option<&Span>, call: &ToolCall, record_content: bool) -> LiveSpan {
    let span = tracing::info_span!(
        parent: parent.and_then(Span::id),
        "execute_tool",
        otel.name = format!("execute_tool {}", call.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    let span = live(span)?;
    if record_content {
        span.record("gen_ai.tool.call.arguments", Value::Object(call.arguments.clone()).to_string());
    }
    Some(span)
}

/// Records a tool call's outcome on its span.
pub(crate) fn end_tool(span: Option<&Span>, result: &AgentToolResult, is_error: bool, record_content: bool) {
    let Some(span) = span else { return };
    if is_error {
        span.record("error.type", "tool_error");
        span.record("otel.status_code", "ERROR");
    }
    if record_content {
        span.record("gen_ai.tool.call.result", Value::Array(user_parts(&result.content)).to_string());
    }
}

/// One provider message in the conventions' input-message shape; none for a system message
/// without text (one that only declares tool changes).
fn message_json(message: &Message) -> Option<Value> {
    Some(match message {
        Message::System(system) => {
            let text = system.content.to_text();
            if text.is_empty() {
                return None;
            }
            json!({"role": "system", "parts": [{"type": "text", "content": text}]})
        }
        Message::User(user) => {
            let parts = match &user.content {
                UserMessageContent::Text(text) => vec![json!({"type": "text", "content": text})],
                UserMessageContent::Blocks(blocks) => user_parts(blocks),
            };
            json!({"role": "user", "parts": parts})
        }
        Message::Assistant(assistant) => json!({"role": "assistant", "parts": assistant_parts(&assistant.content)}),
        Message::ToolResult(result) => {
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(|c| match c {
                    UserContent::Text(t) => Some(t.text.as_str()),
                    UserContent::Image(_) => None,
                })
                .collect();
            json!({"role": "tool", "parts": [{
                "type": "tool_call_response",
                "id": result.tool_call_id.as_str(),
                "result": text.join("\n"),
            }]})
        }
    })
}

fn user_parts(blocks: &[UserContent]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match block {
            UserContent::Text(t) => Some(json!({"type": "text", "content": t.text})),
            UserContent::Image(_) => None,
        })
        .collect()
}

fn assistant_parts(content: &[AssistantContent]) -> Vec<Value> {
    content
        .iter()
        .map(|block| match block {
            AssistantContent::Text(t) => json!({"type": "text", "content": t.text}),
            AssistantContent::Thinking(t) => json!({"type": "reasoning", "content": t.thinking}),
            AssistantContent::ToolCall(call) => json!({
                "type": "tool_call",
                "id": call.id.as_str(),
                "name": call.name.as_str(),
                "arguments": Value::Object(call.arguments.clone()),
            }),
        })
        .collect()
}
