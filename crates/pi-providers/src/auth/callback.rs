//! The loopback server a browser sign-in redirects to (`GET <path>?code=...&state=...`), as the
//! reference's callback server answers it: another path is 404, a wrong `state` 400, an
//! `error` parameter ends the sign-in with the provider's description, a missing code is 400,
//! a second callback after the first was taken is 409; the code is completed (exchanged) before
//! the browser gets its page, 200 on success and 502 when the completion failed.
//!
//! [`wait_for_callback_or_code`] races the callback against a pasted code or redirect URL, for
//! a browser that cannot reach the loopback server (a sign-in over SSH).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{AuthError, AuthInteraction, AuthPrompt};

/// How a callback server listens.
#[derive(Clone, Debug)]
pub struct CallbackServerOptions {
    /// The provider's name, for pages and errors.
    pub provider_name: String,
    /// The address to bind (`127.0.0.1`, or `$PI_OAUTH_CALLBACK_HOST`).
    pub host: String,
    /// The port (0: any free port).
    pub port: u16,
    /// The callback path.
    pub path: String,
    /// The host named in the redirect URI (default: `host`).
    pub redirect_host: Option<String>,
    /// The `state` the callback must carry, when the flow sends one.
    pub state: Option<String>,
    /// How long to wait for the callback, if bounded.
    pub timeout: Option<Duration>,
}

/// A bound callback server.
#[derive(Debug)]
pub struct CallbackServer {
    listener: TcpListener,
    options: CallbackServerOptions,
    redirect_uri: String,
}

/// The callback host: `$PI_OAUTH_CALLBACK_HOST`, else `127.0.0.1`.
pub(crate) fn callback_host() -> String {
    std::env::var("PI_OAUTH_CALLBACK_HOST").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "127.0.0.1".into())
}

fn page(status: u16, title: &str, detail: Option<&str>) -> Vec<u8> {
    let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>pi</title></head><body><p>{}</p>{}</body></html>",
        escape(title),
        detail.map(|d| format!("<p>{}</p>", escape(d))).unwrap_or_default()
    );
    format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        match status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            409 => "Conflict",
            _ => "Bad Gateway",
        },
        body.len()
    )
    .into_bytes()
}

/// The request line's method and target, from at most 16 KiB of head read within 5 seconds.
async fn read_request_line(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(5), read).await.ok()??;
    let line = String::from_utf8_lossy(&head).lines().next()?.to_owned();
    let mut parts = line.split(' ');
    Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
}

impl CallbackServer {
    /// Bind the server.
    pub async fn bind(options: CallbackServerOptions) -> Result<Self, AuthError> {
        let listener = TcpListener::bind((options.host.as_str(), options.port))
            .await
            .map_err(|e| AuthError::Login(format!("OAuth callback server could not listen: {e}")))?;
        let port = listener.local_addr().map_err(|e| AuthError::Login(e.to_string()))?.port();
        let host = options.redirect_host.clone().unwrap_or_else(|| options.host.clone());
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let redirect_uri = format!("http://{host}:{port}{}", options.path);
        Ok(Self { listener, options, redirect_uri })
    }

    /// Where the browser is sent back to.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// The bound address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Wait for the callback and complete its code with `complete` (the token exchange).
    pub async fn wait<T, F, Fut>(&self, complete: F) -> Result<T, AuthError>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<T, AuthError>>,
    {
        self.wait_with_params(|code, _| complete(code)).await
    }

    /// As [`wait`](Self::wait), `complete` also seeing the callback's query parameters.
    pub(crate) async fn wait_with_params<T, F, Fut>(&self, complete: F) -> Result<T, AuthError>
    where
        F: FnOnce(String, Vec<(String, String)>) -> Fut,
        Fut: Future<Output = Result<T, AuthError>>,
    {
        let name = &self.options.provider_name;
        let serve = async {
            let mut complete = Some(complete);
            loop {
                let Ok((mut stream, _)) = self.listener.accept().await else { continue };
                let Some((method, target)) = read_request_line(&mut stream).await else { continue };
                let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
                let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
                let param = |key: &str| params.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
                let reply = |bytes: Vec<u8>| async move {
                    let mut stream = stream;
                    let _ = stream.write_all(&bytes).await;
                    let _ = stream.shutdown().await;
                };
                if method != "GET" || path != self.options.path {
                    reply(page(404, "Callback route not found.", None)).await;
                    continue;
                }
                if self.options.state.as_deref().is_some_and(|state| param("state").as_deref() != Some(state)) {
                    reply(page(400, "State mismatch.", None)).await;
                    continue;
                }
                let Some(complete) = complete.take() else {
                    reply(page(409, "This sign-in has already been handled.", None)).await;
                    continue;
                };
                if let Some(error) = param("error") {
                    let description = param("error_description").unwrap_or(error);
                    reply(page(400, &format!("{name} authorization failed."), Some(&description))).await;
                    return Err(AuthError::Login(format!("{name} authorization failed: {description}")));
                }
                let Some(code) = param("code").filter(|c| !c.is_empty()) else {
                    reply(page(400, "Missing authorization code.", None)).await;
                    continue;
                };
                return match complete(code, params).await {
                    Ok(value) => {
                        let title = format!("Signed in to {name}. You may now close this page.");
                        reply(page(200, &title, None)).await;
                        Ok(value)
                    }
                    Err(error) => {
                        reply(page(502, &format!("{name} sign-in failed."), Some(&error.to_string()))).await;
                        Err(error)
                    }
                };
            }
        };
        match self.options.timeout {
            Some(limit) => tokio::time::timeout(limit, serve)
                .await
                .unwrap_or_else(|_| Err(AuthError::Login(format!("{name} sign-in timed out")))),
            None => serve.await,
        }
    }
}

/// What ended the wait: the callback's completed value, or what the user pasted.
pub(crate) enum Completion<T> {
    Callback(T),
    Manual(String),
}

/// Race the callback against a pasted code (the reference's `waitForCallbackOrManualInput`).
/// Without a server, only the prompt is asked.
pub(crate) async fn wait_for_callback_or_code<T, F, Fut>(
    interaction: &dyn AuthInteraction,
    server: Option<&CallbackServer>,
    complete: F,
    message: &str,
    placeholder: &str,
) -> Result<Completion<T>, AuthError>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<T, AuthError>>,
{
    let prompt = interaction
        .prompt(AuthPrompt::ManualCode { message: message.to_owned(), placeholder: Some(placeholder.to_owned()) });
    match server {
        None => prompt.await.map(Completion::Manual),
        Some(server) => {
            tokio::select! {
                result = server.wait(complete) => result.map(Completion::Callback),
                input = prompt => input.map(Completion::Manual),
            }
        }
    }
}
