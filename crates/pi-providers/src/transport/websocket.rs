//! A WebSocket client (RFC 6455) with the limits of the HTTP transport: Codex's `websocket`
//! transports stream over it.
//!
//! [`connect`] opens `ws://` or `wss://` (TCP, then rustls with the platform's roots, as the
//! HTTP client verifies), sends the upgrade with the caller's headers and waits for `101`, all
//! under one connect timeout and the request's cancellation. [`Socket::next`] reads the next
//! text message under the idle limit and cancellation; pings are answered by tungstenite. A
//! frame over [`MAX_FRAME_BYTES`] or a message over [`MAX_MESSAGE_BYTES`] (the SSE line and
//! event caps) ends the read, as the peer's `1009` close would. Error texts are the ones the
//! reference's runtime reports (`Unexpected server response: 404`, `WebSocket closed 1011
//! reason`, `WebSocket idle timeout after Nms`, `WebSocket connect timeout after Nms`); the
//! caller's driver removes credentials from them.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pi_types::CancellationToken;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use crate::transport::http::cancelled;

/// The largest frame read (the SSE line cap).
pub const MAX_FRAME_BYTES: usize = crate::transport::sse::MAX_LINE_BYTES;
/// The largest message read (the SSE event cap).
pub const MAX_MESSAGE_BYTES: usize = crate::transport::sse::MAX_EVENT_BYTES;
/// The connect timeout when the caller sets none (the reference's).
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 15_000;

/// The close code of a message too big.
const MESSAGE_TOO_BIG: u16 = 1009;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Why a socket failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsFailure {
    /// The error's class as the reference names it (`Error`, `WebSocketCloseError`).
    pub name: &'static str,
    /// The text.
    pub message: String,
    /// The close code, for a close.
    pub code: Option<u16>,
    /// The request was cancelled.
    pub aborted: bool,
}

impl WsFailure {
    fn error(message: impl Into<String>) -> Self {
        Self { name: "Error", message: message.into(), code: None, aborted: false }
    }

    fn aborted() -> Self {
        Self { aborted: true, ..Self::error("Request was aborted") }
    }

    fn closed(code: Option<u16>, reason: &str) -> Self {
        let code_text = code.map(|c| format!(" {c}")).unwrap_or_default();
        let reason_text = match (reason.is_empty(), code) {
            (false, _) => format!(" {reason}"),
            (true, Some(MESSAGE_TOO_BIG)) => " message too big".to_owned(),
            (true, _) => String::new(),
        };
        Self {
            name: "WebSocketCloseError",
            message: format!("WebSocket closed{code_text}{reason_text}"),
            code,
            aborted: false,
        }
    }
}

/// An open WebSocket.
pub struct Socket {
    inner: WebSocketStream<Box<dyn Io>>,
    open: bool,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("open", &self.open).finish_non_exhaustive()
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            crate::transport::client::install_crypto_provider();
            use rustls_platform_verifier::ConfigVerifierExt;
            rustls::ClientConfig::with_platform_verifier().map(Arc::new).map_err(|e| e.to_string())
        })
        .clone()
}

/// Open `url` (`ws://` or `wss://`) with `headers`, within `timeout` (`None`: no limit).
pub async fn connect(
    url: &str,
    headers: &[(String, String)],
    timeout: Option<Duration>,
    cancel: Option<&CancellationToken>,
) -> Result<Socket, WsFailure> {
    let opening = open(url, headers);
    tokio::select! {
        biased;
        () = cancelled(cancel) => Err(WsFailure::aborted()),
        result = async {
            match timeout {
                Some(limit) => tokio::time::timeout(limit, opening).await.unwrap_or_else(|_| {
                    Err(WsFailure::error(format!("WebSocket connect timeout after {}ms", limit.as_millis())))
                }),
                None => opening.await,
            }
        } => result,
    }
}

async fn open(url: &str, headers: &[(String, String)]) -> Result<Socket, WsFailure> {
    let parsed = reqwest::Url::parse(url).map_err(|e| WsFailure::error(format!("Invalid URL: {e}")))?;
    let secure = match parsed.scheme() {
        "wss" => true,
        "ws" => false,
        other => return Err(WsFailure::error(format!("Unsupported WebSocket scheme: {other}"))),
    };
    let host = parsed.host_str().ok_or_else(|| WsFailure::error("Invalid URL: no host"))?.to_owned();
    let port = parsed.port_or_known_default().unwrap_or(if secure { 443 } else { 80 });
    let mut request = url.into_client_request().map_err(|e| WsFailure::error(e.to_string()))?;
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) else {
            return Err(WsFailure::error(format!("Invalid header: {name}")));
        };
        request.headers_mut().insert(name, value);
    }
    let address = (host.trim_start_matches('[').trim_end_matches(']'), port);
    let tcp = TcpStream::connect(address).await.map_err(|e| WsFailure::error(connect_text(&e, &host, port)))?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if secure {
        let config = tls_config().map_err(WsFailure::error)?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| WsFailure::error(format!("Invalid host: {e}")))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| WsFailure::error(e.to_string()))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let config =
        WebSocketConfig::default().max_frame_size(Some(MAX_FRAME_BYTES)).max_message_size(Some(MAX_MESSAGE_BYTES));
    let (inner, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config)).await.map_err(
        |error| match error {
            WsError::Http(response) => {
                WsFailure::error(format!("Unexpected server response: {}", response.status().as_u16()))
            }
            other => WsFailure::error(other.to_string()),
        },
    )?;
    Ok(Socket { inner, open: true })
}

/// Node's wording of a failed TCP connect (`connect ECONNREFUSED 127.0.0.1:1`).
fn connect_text(error: &std::io::Error, host: &str, port: u16) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => format!("connect ECONNREFUSED {host}:{port}"),
        _ => format!("connect {error} {host}:{port}"),
    }
}

impl Socket {
    /// Whether the socket can carry another request (no close seen, no failure).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Send one text message; `limit` bounds the wait for the peer to take it (a kept socket
    /// whose peer stopped reading), and `cancel` ends it.
    pub async fn send(
        &mut self,
        text: String,
        limit: Option<Duration>,
        cancel: Option<&CancellationToken>,
    ) -> Result<(), WsFailure> {
        let send = self.inner.send(Message::text(text));
        let outcome = tokio::select! {
            biased;
            () = cancelled(cancel) => Err(WsFailure::aborted()),
            sent = async {
                match limit {
                    Some(limit) => tokio::time::timeout(limit, send).await.map_err(|_| limit),
                    None => Ok(send.await),
                }
            } => match sent {
                Err(limit) => Err(WsFailure::error(format!("WebSocket send timeout after {}ms", limit.as_millis()))),
                Ok(sent) => sent.map_err(|e| WsFailure::error(e.to_string())),
            },
        };
        if outcome.is_err() {
            self.open = false;
        }
        outcome
    }

    /// The next text (or UTF-8 binary) message; `idle` bounds the wait.
    pub async fn next(
        &mut self,
        idle: Option<Duration>,
        cancel: Option<&CancellationToken>,
    ) -> Result<String, WsFailure> {
        loop {
            let read = self.inner.next();
            let item = tokio::select! {
                biased;
                () = cancelled(cancel) => {
                    self.open = false;
                    return Err(WsFailure::aborted());
                }
                item = async {
                    match idle {
                        Some(limit) => tokio::time::timeout(limit, read).await.map_err(|_| limit),
                        None => Ok(read.await),
                    }
                } => item,
            };
            let message = match item {
                Err(limit) => {
                    self.open = false;
                    return Err(WsFailure::error(format!("WebSocket idle timeout after {}ms", limit.as_millis())));
                }
                Ok(None) => {
                    self.open = false;
                    return Err(WsFailure::closed(Some(1006), ""));
                }
                Ok(Some(Err(WsError::Capacity(_)))) => {
                    self.open = false;
                    return Err(WsFailure::closed(Some(MESSAGE_TOO_BIG), ""));
                }
                Ok(Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed))) => {
                    self.open = false;
                    return Err(WsFailure::closed(Some(1006), ""));
                }
                Ok(Some(Err(error))) => {
                    self.open = false;
                    return Err(WsFailure::error(error.to_string()));
                }
                Ok(Some(Ok(message))) => message,
            };
            match message {
                Message::Text(text) => return Ok(text.as_str().to_owned()),
                Message::Binary(bytes) => return Ok(String::from_utf8_lossy(&bytes).into_owned()),
                Message::Close(frame) => {
                    self.open = false;
                    let (code, reason) = match &frame {
                        Some(frame) => (Some(u16::from(frame.code)), frame.reason.as_str()),
                        None => (Some(1005), ""),
                    };
                    return Err(WsFailure::closed(code, reason));
                }
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }

    /// Close with `code` and `reason`, waiting at most a second for the peer.
    pub async fn close(mut self, code: u16, reason: &str) {
        let frame = CloseFrame { code: CloseCode::from(code), reason: reason.to_owned().into() };
        let _ = tokio::time::timeout(Duration::from_secs(1), self.inner.close(Some(frame))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_texts_follow_the_reference() {
        assert_eq!(WsFailure::closed(Some(1011), "boom").message, "WebSocket closed 1011 boom");
        assert_eq!(WsFailure::closed(Some(1009), "").message, "WebSocket closed 1009 message too big");
        assert_eq!(WsFailure::closed(Some(1000), "").message, "WebSocket closed 1000");
    }
}
