//! `line-chat`: a made-up wire API, written against [`WireApi`] and [`Decoder`] to show what a
//! new API needs: its request and its events. The shared driver does the rest (HTTP, retries,
//! limits, framing, cancellation, the terminal event, the stop-reason tail, redaction).
//!
//! * **Request**: `POST {baseUrl}/chat`, `Authorization: Bearer <key>`, body
//!   `{"model": id, "messages": [{"role": "system" | "user" | "assistant", "text": ...}]}`.
//! * **Stream**: server-sent events; each data is `{"type": "text", "text": ...}`,
//!   `{"type": "done", "reason": "stop" | "length", "usage": {"input": n, "output": n}}` (the
//!   terminal event) or `{"type": "error", "message": ...}`.
//! * **Errors**: a non-2xx answer is `Line chat error (<status>): <body>`.

use pi_providers::api::driver::{
    self, ApiError, ApiErrorKind, Call, Cancel, Cx, Decoder, Dialect, Exchange, Flow, OnCancel,
};
use pi_providers::api::driver::{Request, Sse, Stop, WireApi};
use pi_providers::reqwest::header::HeaderMap;
use pi_providers::transport::sse::SseEventRef;
use pi_types::transcript::system_message_text;
use pi_types::{AssistantMessageEventStream, Message, Model, StopReason, StreamFn, StreamOptions, TranscriptContext};
use serde_json::{json, Value};

/// The API id.
pub const API: &str = "line-chat";

/// The `line-chat` adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct LineChat;

impl StreamFn for LineChat {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(*self, model, context, options)
    }
}

/// Error texts: the status and the body as sent.
pub struct LineDialect;

impl Dialect for LineDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let body = String::from_utf8_lossy(body);
        let mut error = ApiError::other(format!("Line chat error ({status}): {}", body.trim()));
        (error.kind, error.status, error.headers) = (ApiErrorKind::Status, Some(status), Some(headers.clone()));
        error
    }

    fn format(&self, error: &ApiError) -> String {
        error.message.clone()
    }
}

/// The open text block, if any.
#[derive(Default)]
pub struct Text(Option<usize>);

impl WireApi for LineChat {
    type Dialect = LineDialect;
    type Decoder = Text;
    const CANCEL: Cancel =
        Cancel { read: OnCancel::Fail("Request was aborted"), before_event: None, after_event: None };

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, .. } = call;
        let key = options.api_key.as_deref().ok_or_else(|| Stop::error("No API key"))?;
        let messages: Vec<Value> = context
            .messages()
            .iter()
            .filter_map(|message| match message {
                Message::System(system) => Some(json!({"role": "system", "text": system_message_text(system)})),
                Message::User(user) => Some(json!({"role": "user", "text": user.content.text()})),
                Message::Assistant(assistant) => Some(json!({"role": "assistant", "text": assistant.text()})),
                _ => None,
            })
            .collect();
        let body = json!({"model": model.id, "messages": messages}).to_string().into_bytes();
        let headers = vec![
            ("authorization".to_owned(), format!("Bearer {key}")),
            ("content-type".to_owned(), "application/json".to_owned()),
        ];
        let url = format!("{}/chat", model.base_url.trim_end_matches('/'));
        Ok(Exchange::new(Request { url, headers, body }, LineDialect, Text::default()))
    }
}

impl Decoder for Text {
    type Framing = Sse;

    async fn event<'e>(&mut self, event: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| Stop::error(e.to_string()))?;
        let field = |name: &str| data.get(name).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => {
                let index = match self.0 {
                    Some(index) => index,
                    None => *self.0.insert(cx.out.start_text().await),
                };
                cx.out.text_delta(index, field("text")).await?;
                Ok(Flow::Continue)
            }
            "done" => {
                if let Some(index) = self.0.take() {
                    cx.out.end_text(index).await?;
                }
                let count = |name: &str| data["usage"][name].as_f64().map_or(0, |n| n.max(0.0) as u64);
                let mut message = cx.out.metadata_mut();
                (message.usage.input, message.usage.output) = (count("input"), count("output"));
                message.stop_reason = if field("reason") == "length" { StopReason::Length } else { StopReason::Stop };
                Ok(Flow::End)
            }
            "error" => Err(Stop::error(field("message"))),
            _ => Ok(Flow::Continue),
        }
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        driver::tail(cx, "Line chat stream ended without a stop reason")
    }
}
