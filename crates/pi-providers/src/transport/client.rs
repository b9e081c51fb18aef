//! The HTTP client the adapters send with, and how to configure it.
//!
//! Every HTTP request of this crate (the adapters' streams, the Codex and Vertex AI token
//! requests) is sent with a `reqwest::Client` chosen per request, the first of:
//!
//! 1. [`StreamOptions::http_client`] of the request (a [`handle`] to your client);
//! 2. the client of the provider that dispatches it ([`Provider::with_http_client`]);
//! 3. the client of the registry ([`Models::with_http_client`]);
//! 4. the [`shared`] default, one per process.
//!
//! A client of your own is how a corporate proxy, a private CA, a client certificate (mTLS)
//! or a different connection pool is configured; start from [`builder`], which carries pi's
//! settings (rustls, redirects off, environment proxies off), and add what you need. Builders
//! are `reqwest`'s own (re-exported as [`crate::reqwest`], the version this crate links).
//!
//! ```no_run
//! use pi_providers::transport::client;
//! use pi_providers::{reqwest, Models};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ca = reqwest::Certificate::from_pem(&std::fs::read("corp-ca.pem")?)?;
//! let http = client::builder()
//!     .add_root_certificate(ca)
//!     .proxy(reqwest::Proxy::https("http://proxy.corp.example:3128")?)
//!     .build()?;
//! let models = Models::with_builtins().with_http_client(http);
//! # let _ = models; Ok(()) }
//! ```
//!
//! # Environment proxies are opt-in
//!
//! No client built here reads `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` or `NO_PROXY` unless
//! asked to: requests carry provider keys, and a variable set for some other program (or by
//! whoever controls the environment) would otherwise send them to a host nobody configured
//! for pi. [`EnvProxy`] is the opt-in: [`with_env_proxy`] builds a client that honours them.
//!
//! # Limits hold whatever the client
//!
//! The time to response headers (connection and TLS included), the idle limit between body
//! chunks, the caps on event-stream lines, events and error bodies, cancellation, the bound
//! on error texts and the redaction of keys are applied per request by the code that reads
//! the response, not by the client's settings: a client of yours cannot lift them (a limit
//! it sets itself, such as a total `timeout`, applies as well). Byte caps count the bytes the
//! client hands over, after any decompression it does.
//!
//! Redirects are the exception: a client follows them or not by its own policy. [`builder`]
//! turns them off. A client whose policy follows them has already sent the request, with its
//! key, to the redirect's target by the time pi sees the answer; pi then ends the request
//! with an error naming the redirect instead of reading it. Build such clients with
//! `redirect(reqwest::redirect::Policy::none())`.
//!
//! # Connection pool
//!
//! A client keeps its connections in a pool shared by every request sent with it, so the
//! requests of one agent and of all agents that share a client (by default every one in the
//! process, through [`shared`]) reuse connections. [`builder`] sets the pool explicitly: no
//! cap on connections per host (HTTP/1.1 opens one per concurrent request and keeps up to
//! any number idle), idle connections closed after [`POOL_IDLE_TIMEOUT`]. Over HTTP/2 (TLS
//! servers that offer it) concurrent requests share one connection per host, up to the
//! server's own limit of concurrent streams (often 100); requests beyond it wait for a
//! stream. A client built with `http1_only()` opens connections instead.
//!
//! [`StreamOptions::http_client`]: pi_types::StreamOptions::http_client
//! [`Provider::with_http_client`]: crate::Provider::with_http_client
//! [`Models::with_http_client`]: crate::Models::with_http_client

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use pi_types::{HttpClientHandle, StreamOptions};

/// How long the default client keeps an idle connection for reuse (reqwest's default).
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Why a client could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// reqwest refused the configuration (TLS setup, for example).
    #[error("HTTP client could not be built: {0}")]
    Build(String),
    /// An environment proxy setting is not a usable proxy URL (its value is not repeated here:
    /// proxy URLs carry credentials).
    #[error("{variable} is not a usable proxy URL: {reason}")]
    Proxy {
        /// The variable, e.g. `HTTPS_PROXY`.
        variable: &'static str,
        /// reqwest's reason.
        reason: String,
    },
}

/// A client builder with pi's settings: rustls (the `ring` provider), `TCP_NODELAY`, no
/// redirects, no environment proxies, the pool described in the [module docs](self).
///
/// Add your own settings and call `build()`; [`shared`] is this builder, built once.
pub fn builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
        .tls_backend_rustls()
        .tcp_nodelay(true)
        // Requests carry provider keys in headers reqwest does not strip on a cross-origin
        // redirect (`x-api-key`, `x-goog-api-key`), and a 302 would turn the POST into a GET:
        // a redirect becomes an error instead.
        .redirect(reqwest::redirect::Policy::none())
        // Requests go where the model's base URL says (see `EnvProxy` for the opt-in).
        .no_proxy()
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
}

/// Install rustls' `ring` crypto provider as the process default, unless one is installed
/// already: what a client built from `reqwest::Client::builder()` itself needs before `build()`
/// ([`builder`] calls it).
pub fn install_crypto_provider() {
    // Another component may have installed a provider already; either is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

static SHARED: OnceLock<Result<reqwest::Client, ClientError>> = OnceLock::new();

/// The process-wide default client ([`builder`] as it is), built on first use.
pub fn shared() -> Result<reqwest::Client, ClientError> {
    shared_ref().cloned()
}

pub(crate) fn shared_ref() -> Result<&'static reqwest::Client, ClientError> {
    SHARED
        .get_or_init(|| builder().build().map_err(|e| ClientError::Build(deepest_cause(&e))))
        .as_ref()
        .map_err(Clone::clone)
}

/// `client` as a [`StreamOptions::http_client`](pi_types::StreamOptions::http_client) value,
/// for one request or one agent's requests.
///
/// ```
/// use pi_providers::transport::client;
/// use pi_types::StreamOptions;
/// let http = client::builder().build().expect("client");
/// let options = StreamOptions { http_client: Some(client::handle(http)), ..Default::default() };
/// # let _ = options;
/// ```
pub fn handle(client: reqwest::Client) -> HttpClientHandle {
    HttpClientHandle::new(client)
}

/// The client a request with `options` sends with: its own
/// [`StreamOptions::http_client`], else the shared default. For stream functions of other
/// crates that should honour a user's client as the adapters do (the proxy client); an error
/// names a handle that holds something other than a `reqwest::Client`.
pub fn of_options(options: &StreamOptions) -> Result<reqwest::Client, String> {
    for_request(options).cloned()
}

/// The client of one request: its own, else the shared default.
pub(crate) fn for_request(options: &StreamOptions) -> Result<&reqwest::Client, String> {
    match &options.http_client {
        Some(handle) => from_handle(handle),
        None => shared_ref().map_err(|e| e.to_string()),
    }
}

fn from_handle(handle: &HttpClientHandle) -> Result<&reqwest::Client, String> {
    handle.downcast_ref::<reqwest::Client>().ok_or_else(|| {
        format!(
            "StreamOptions::http_client holds a {}, not the reqwest::Client the adapters send with",
            handle.type_name()
        )
    })
}

tokio::task_local! {
    /// The client of the request whose key is being resolved (see [`resolving`]).
    static RESOLVING: Option<HttpClientHandle>;
}

/// Run a key resolver with the request's client in scope: the token requests it makes (the
/// Codex refresh) go through the client the request itself will use.
pub(crate) async fn resolving<F: std::future::Future>(client: Option<HttpClientHandle>, resolve: F) -> F::Output {
    RESOLVING.scope(client, resolve).await
}

/// The client for a token request: the request's (in a key resolver), else the default.
pub(crate) fn for_token_request() -> Result<reqwest::Client, String> {
    let scoped = RESOLVING.try_with(|client| client.as_ref().map(|h| from_handle(h).cloned())).ok().flatten();
    match scoped {
        Some(client) => client,
        None => shared().map_err(|e| e.to_string()),
    }
}

/// The opt-in to the proxy environment variables, read as reqwest's system proxy reads them:
/// `HTTPS_PROXY` for `https` URLs, `HTTP_PROXY` for `http` URLs, `ALL_PROXY` for both when
/// the specific one is unset, `NO_PROXY` for the hosts that go direct (comma-separated
/// domains, which match their subdomains, IP addresses and CIDR ranges, or `*`). Each name is
/// read upper-case first, then lower-case. A value without a scheme is an `http://` proxy.
/// When `REQUEST_METHOD` is set (a CGI program, where `HTTP_PROXY` may come from a request
/// header) no variable is used.
///
/// ```
/// use pi_providers::transport::client::{self, EnvProxy};
/// let vars = [("HTTPS_PROXY", "http://proxy.corp.example:3128"), ("NO_PROXY", "localhost,.internal")];
/// let proxy = EnvProxy::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()));
/// assert!(!proxy.is_empty());
/// let http = proxy.apply(client::builder()).expect("valid proxy").build().expect("client");
/// # let _ = http;
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EnvProxy {
    http: Option<String>,
    https: Option<String>,
    no_proxy: Option<String>,
}

impl EnvProxy {
    /// The settings of the process environment, read now.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings from `lookup` (a variable's value by name; for example a request's
    /// [`StreamOptions::env`](pi_types::StreamOptions::env) or a configuration file).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Self {
        if lookup("REQUEST_METHOD").is_some() {
            return Self::default();
        }
        let first = |upper: &str, lower: &str| lookup(upper).or_else(|| lookup(lower));
        let url = |value: Option<String>| value.filter(|v| !v.trim().is_empty()).map(|v| with_scheme(v.trim()));
        let all = url(first("ALL_PROXY", "all_proxy"));
        Self {
            http: url(first("HTTP_PROXY", "http_proxy")).or_else(|| all.clone()),
            https: url(first("HTTPS_PROXY", "https_proxy")).or(all),
            no_proxy: first("NO_PROXY", "no_proxy").filter(|v| !v.trim().is_empty()),
        }
    }

    /// Whether no proxy is set (the client would go direct everywhere).
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// `builder` with these proxies (replacing none of its own: proxies added earlier are
    /// tried first).
    pub fn apply(&self, mut builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, ClientError> {
        let no_proxy = || self.no_proxy.as_deref().and_then(reqwest::NoProxy::from_string);
        if let Some(url) = &self.http {
            let proxy = reqwest::Proxy::http(url.as_str())
                .map_err(|e| ClientError::Proxy { variable: "HTTP_PROXY", reason: deepest_cause(&e) })?;
            builder = builder.proxy(proxy.no_proxy(no_proxy()));
        }
        if let Some(url) = &self.https {
            let proxy = reqwest::Proxy::https(url.as_str())
                .map_err(|e| ClientError::Proxy { variable: "HTTPS_PROXY", reason: deepest_cause(&e) })?;
            builder = builder.proxy(proxy.no_proxy(no_proxy()));
        }
        Ok(builder)
    }
}

/// A proxy URL as `scheme://host:port`, without credentials.
fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => format!(
            "{}://{}{}",
            parsed.scheme(),
            parsed.host_str().unwrap_or(""),
            parsed.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "<unparsed>".to_owned(),
    }
}

impl fmt::Debug for EnvProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvProxy")
            .field("http", &self.http.as_deref().map(redacted))
            .field("https", &self.https.as_deref().map(redacted))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

fn with_scheme(value: &str) -> String {
    if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    }
}

/// A client with pi's settings ([`builder`]) that honours the proxy variables of the process
/// environment ([`EnvProxy::from_env`]), read now: the opt-in for users behind a proxy.
pub fn with_env_proxy() -> Result<reqwest::Client, ClientError> {
    EnvProxy::from_env().apply(builder())?.build().map_err(|e| ClientError::Build(deepest_cause(&e)))
}

/// The most specific message of an error's source chain.
pub(crate) fn deepest_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current: &(dyn std::error::Error + 'static) = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn env_proxy_reads_like_reqwest() {
        let proxy = EnvProxy::from_vars(vars(&[("ALL_PROXY", "proxy.example:8080"), ("https_proxy", "http://s:1")]));
        assert_eq!(proxy.http.as_deref(), Some("http://proxy.example:8080"));
        assert_eq!(proxy.https.as_deref(), Some("http://s:1"));
        let upper_first = EnvProxy::from_vars(vars(&[("HTTP_PROXY", "http://a:1"), ("http_proxy", "http://b:1")]));
        assert_eq!(upper_first.http.as_deref(), Some("http://a:1"));
        assert!(upper_first.https.is_none());
        assert!(EnvProxy::from_vars(vars(&[("HTTP_PROXY", "  ")])).is_empty());
        let cgi = EnvProxy::from_vars(vars(&[("HTTP_PROXY", "http://a:1"), ("REQUEST_METHOD", "GET")]));
        assert!(cgi.is_empty());
    }

    #[test]
    fn env_proxy_debug_hides_credentials() {
        let proxy = EnvProxy::from_vars(vars(&[("HTTPS_PROXY", "http://user:hunter2@proxy.example:3128")]));
        let text = format!("{proxy:?}");
        assert!(!text.contains("hunter2") && !text.contains("user"), "{text}");
        assert!(text.contains("http://proxy.example:3128"), "{text}");
    }

    #[test]
    fn a_handle_of_another_type_is_a_clear_error() {
        let options = StreamOptions { http_client: Some(HttpClientHandle::new(7u8)), ..Default::default() };
        let error = for_request(&options).unwrap_err();
        assert_eq!(error, "StreamOptions::http_client holds a u8, not the reqwest::Client the adapters send with");
    }
}
