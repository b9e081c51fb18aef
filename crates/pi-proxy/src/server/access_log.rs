//! The access log: one `tracing` event per request at target [`ACCESS_TARGET`], when the
//! response is done (its body sent, or dropped by a client that went away): method, path,
//! status, duration in milliseconds (a stream's whole length) and the token's id ("-" when
//! the request carried no valid token). Never the token, other headers or bodies.
//!
//! `pi proxy serve` prints these events as one line each, or as JSON lines with
//! `--log-json`; an embedding application routes them with its own subscriber.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::ProxyToken;

/// The `tracing` target of the access log's events.
pub const ACCESS_TARGET: &str = "pi_proxy::access";

/// The tokens, to name the one a request presented.
pub(super) struct Tokens(Vec<ProxyToken>);

impl Tokens {
    pub(super) fn new(tokens: &[ProxyToken]) -> Arc<Self> {
        Arc::new(Self(tokens.to_vec()))
    }

    /// The id of the presented token, compared in constant time as the handler does.
    fn label(&self, headers: &HeaderMap) -> String {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.as_bytes().split_at_checked(7))
            .filter(|(scheme, token)| scheme.eq_ignore_ascii_case(b"bearer ") && !token.is_empty())
            .map(|(_, token)| token);
        let mut found = None;
        if let Some(presented) = presented {
            for token in &self.0 {
                if bool::from(token.secret.as_bytes().ct_eq(presented)) && !token.secret.is_empty() {
                    found = Some(token.id.as_str());
                }
            }
        }
        found.unwrap_or("-").to_owned()
    }
}

/// The middleware (`axum::middleware::from_fn_with_state` with [`Tokens`]).
pub(super) async fn log(State(tokens): State<Arc<Tokens>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let token = tokens.label(request.headers());
    let response = next.run(request).await;
    let record = Record { method, path, status: response.status().as_u16(), token, started };
    response.map(|body| Body::new(Logged { body, record: Some(record) }))
}

struct Record {
    method: String,
    path: String,
    status: u16,
    token: String,
    started: Instant,
}

impl Record {
    fn emit(self) {
        let duration_ms = self.started.elapsed().as_millis() as u64;
        tracing::info!(
            target: ACCESS_TARGET,
            method = %self.method,
            path = %self.path,
            status = self.status,
            duration_ms,
            token = %self.token,
            "request"
        );
    }
}

/// The response body, logging the request once it has ended or was dropped.
struct Logged {
    body: Body,
    record: Option<Record>,
}

impl HttpBody for Logged {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            if let Some(record) = self.record.take() {
                record.emit();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            record.emit();
        }
    }
}
