//! Decoding a Codex answer: the Responses stream processing ([`ResponsesState`]) behind Codex's
//! own event mapping, one decoder for both transports.
//!
//! Codex's own part (the reference's `mapCodexEvents`): each event goes to
//! `on_provider_stream_event` first; an `error` event fails with `Codex error: <message, code or
//! the event>`, `response.failed` with the response's error message (else `Codex response
//! failed`); `response.done`, `response.completed` and `response.incomplete` all become a
//! `response.completed` with an unknown `status` dropped, carry `end_turn` to the message and end
//! the stream. Over SSE each event's data is trimmed and `[DONE]` skipped; over the WebSocket
//! each text message is one event.

use pi_types::Handover;
use serde_json::{json, Value};

use crate::api::driver::{self, Cx, Decoder, Flow, Sse};
use crate::api::openai::responses::ResponsesState;
use crate::api::support::{self as adapter_support, Stop};
use crate::api::typed;
use crate::js_json;
use crate::transport::sse::SseEventRef;

use super::websocket;

const RESPONSE_STATUSES: [&str; 6] = ["completed", "incomplete", "failed", "cancelled", "queued", "in_progress"];

/// What kind of failure a decoded event raised: the WebSocket transport falls back to SSE after
/// a transport failure, not after the server's own error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    /// An `error` or `response.failed` event (the reference's `CodexApiError`), with its code.
    Api(Option<String>),
    /// An event that is not JSON (`CodexProtocolError`).
    Protocol,
    /// Anything else: the connection, the stream processing's own checks.
    Transport,
}

/// A failure and its kind.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) stop: Stop,
    pub(super) fault: Fault,
    /// The error's class name, for the transport diagnostic.
    pub(super) name: &'static str,
    /// The error's code, for the diagnostic (an event's code, a close code).
    pub(super) code: Option<Value>,
}

impl Failure {
    pub(super) fn transport(stop: Stop) -> Self {
        Self { stop, fault: Fault::Transport, name: "Error", code: None }
    }
}

/// The decoding state of one Codex answer.
pub(crate) struct CodexDecode {
    pub(super) state: ResponsesState,
    heads: typed::EventHeads,
    /// Delta events take the typed decode (no hook wants every event as a `Value`).
    typed: bool,
    /// Over the WebSocket, `start` goes out with the first event handed to the stream
    /// processing; over SSE the driver sends it on the answer's headers.
    pub(super) emit_start: bool,
    /// `start` went out (WebSocket).
    pub(super) started: bool,
    /// The WebSocket request, when the transport asks for one.
    pub(super) ws: Option<websocket::Plan>,
}

impl CodexDecode {
    pub(super) fn new(state: ResponsesState, typed: bool, ws: Option<websocket::Plan>) -> Self {
        Self { state, heads: typed::EventHeads::default(), typed, emit_start: false, started: false, ws }
    }

    /// A fresh stream processing state (a new attempt), with the same pricing and grammar tools.
    pub(super) fn reset(&mut self) {
        let mut state = ResponsesState::with_pricing(self.state.tier_pricing.clone());
        state.grammar_inputs = std::mem::take(&mut self.state.grammar_inputs);
        self.state = state;
        self.heads = typed::EventHeads::default();
    }

    async fn start(&mut self, cx: &mut Cx<'_>) {
        if self.emit_start && !self.started {
            self.started = true;
            cx.out.start().await;
        }
    }

    /// One event's JSON text: the typed decode of a delta, else [`CodexDecode::value`].
    pub(super) async fn text(&mut self, data: &str, cx: &mut Cx<'_>, invalid: &str) -> Result<Flow, Failure> {
        if self.typed {
            if let Some(delta) = typed::decode_event(data, &mut self.heads) {
                self.start(cx).await;
                if let Some(handover) = self.state.delta(&delta, cx.out) {
                    handover.await.map_err(|error| Failure::transport(error.into()))?;
                    return Ok(Flow::Continue);
                }
            }
        }
        self.parsed(data, cx, invalid).await
    }

    /// One event's JSON text parsed whole, then [`CodexDecode::value`].
    async fn parsed(&mut self, data: &str, cx: &mut Cx<'_>, invalid: &str) -> Result<Flow, Failure> {
        let event = js_json::parse(data).map_err(|e| Failure {
            stop: Stop::error(format!("{invalid}: {e}")),
            fault: Fault::Protocol,
            name: "CodexProtocolError",
            code: None,
        })?;
        self.value(event, cx).await
    }

    /// One event: Codex's mapping, then the Responses processing.
    pub(super) async fn value(&mut self, event: Value, cx: &mut Cx<'_>) -> Result<Flow, Failure> {
        adapter_support::on_event(cx.options, cx.model, &event).await;
        let Some(kind) = event.get("type").and_then(Value::as_str) else { return Ok(Flow::Continue) };
        let api = |message: String, code: Option<String>| Failure {
            stop: Stop::error(message),
            code: code.clone().map(Value::String),
            fault: Fault::Api(code),
            name: "CodexApiError",
        };
        match kind {
            "error" => {
                let (message, code) = event_error(&event);
                Err(api(message, code))
            }
            "response.failed" => {
                let error = event.get("response").and_then(|r| r.get("error"));
                let code = error.and_then(|e| e.get("code")).and_then(Value::as_str).map(str::to_owned);
                let message = error
                    .and_then(|e| e.get("message"))
                    .filter(|m| js_json::truthy(m))
                    .map(|m| m.as_str().map_or_else(|| js_json::stringify(m), str::to_owned))
                    .unwrap_or_else(|| "Codex response failed".to_owned());
                Err(api(message, code))
            }
            "response.done" | "response.completed" | "response.incomplete" => {
                let mut response = event.get("response").cloned().unwrap_or(Value::Null);
                if let Some(end_turn) = response.get("end_turn").and_then(Value::as_bool) {
                    cx.out.metadata_mut().end_turn = Some(end_turn);
                }
                if let Some(object) = response.as_object_mut() {
                    let status = object
                        .get("status")
                        .and_then(Value::as_str)
                        .filter(|s| RESPONSE_STATUSES.contains(s))
                        .map(str::to_owned);
                    match status {
                        Some(status) => object.insert("status".into(), json!(status)),
                        None => object.remove("status"),
                    };
                }
                let mut completed = event.as_object().cloned().unwrap_or_default();
                completed.insert("type".into(), json!("response.completed"));
                completed.insert("response".into(), response);
                self.start(cx).await;
                self.state
                    .handle(cx.model, cx.options, &Value::Object(completed), cx.out)
                    .await
                    .map_err(Failure::transport)?;
                Ok(Flow::End)
            }
            _ => {
                self.start(cx).await;
                self.state.handle(cx.model, cx.options, &event, cx.out).await.map_err(Failure::transport)?;
                Ok(Flow::Continue)
            }
        }
    }

    /// The stream processing's checks after the last event: a terminal event came, and no tool
    /// call is left unfinished.
    pub(super) fn checks(&self, cx: &Cx<'_>, aborted: bool) -> Result<(), Stop> {
        match self.state.unfinished_answer(cx.out.message()) {
            Some(text) if aborted => Err(Stop::aborted(text)),
            Some(text) => Err(Stop::error(text)),
            None => Ok(()),
        }
    }
}

/// The error of a Codex answer that set no stop reason.
pub(super) const NO_STOP_REASON: &str = "Codex stream ended without a stop reason";

impl Decoder for CodexDecode {
    type Framing = Sse;

    async fn event<'e>(&mut self, event: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        let data = js_json::js_trim(&event.data);
        if data.is_empty() || data == "[DONE]" {
            return Ok(Flow::Continue);
        }
        // The typed decode was tried by `delta` already.
        self.parsed(data, cx, "Invalid Codex SSE JSON").await.map_err(|failure| failure.stop)
    }

    fn delta<'c>(&mut self, event: &SseEventRef<'_>, cx: &'c mut Cx<'_>) -> Option<Handover<'c, Result<Flow, Stop>>> {
        if !self.typed || (self.emit_start && !self.started) {
            return None;
        }
        let delta = typed::decode_event(js_json::js_trim(&event.data), &mut self.heads)?;
        let handover = self.state.delta(&delta, cx.out)?;
        Some(handover.map(|result| result.map(|()| Flow::Continue).map_err(Stop::from)))
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        self.checks(cx, cx.cancelled())?;
        driver::tail(cx, NO_STOP_REASON)
    }
}

/// The message and code of an `error` event: `Codex error: <message, code or the event>`.
pub(super) fn event_error(event: &Value) -> (String, Option<String>) {
    let nested = event.get("error").filter(|e| e.is_object());
    let field = |key: &str| {
        event
            .get(key)
            .and_then(Value::as_str)
            .or_else(|| nested.and_then(|n| n.get(key)).and_then(Value::as_str))
            .map(str::to_owned)
    };
    let code = field("code");
    let detail = field("message")
        .filter(|m| !m.is_empty())
        .or_else(|| code.clone().filter(|c| !c.is_empty()))
        .unwrap_or_else(|| js_json::stringify(event));
    (format!("Codex error: {detail}"), code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_errors() {
        let text = |event: Value| event_error(&event).0;
        assert_eq!(text(json!({"type": "error", "message": "m", "code": "c"})), "Codex error: m");
        assert_eq!(text(json!({"type": "error", "error": {"code": "c"}})), "Codex error: c");
        assert_eq!(text(json!({"type": "error"})), r#"Codex error: {"type":"error"}"#);
        assert_eq!(event_error(&json!({"type": "error", "error": {"code": "c"}})).1.as_deref(), Some("c"));
    }
}
