//! Options of one provider request.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::cancel::CancellationToken;
use futures_core::future::BoxFuture;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{Model, ThinkingLevel};

/// Token budgets per thinking level (token-budget providers only).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingBudgets {
    /// Minimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimal: Option<u64>,
    /// Low.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<u64>,
    /// Medium.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<u64>,
    /// High.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<u64>,
}

/// Preferred transport where a provider offers several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Server-sent events.
    #[default]
    Sse,
    /// WebSocket.
    Websocket,
    /// WebSocket with cached continuation.
    WebsocketCached,
    /// Provider's choice.
    Auto,
}

/// Prompt-cache retention preference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheRetention {
    /// No caching.
    None,
    /// Provider's short retention (default).
    #[default]
    Short,
    /// Provider's long retention.
    Long,
}

/// Provider-neutral tool selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
}

/// How long a provider may take to finish a deferred response (the reference's `deferred.window`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeferredWindow {
    /// Fifteen minutes (`15m`).
    #[serde(rename = "15m")]
    FifteenMinutes,
    /// One hour (`1h`).
    #[serde(rename = "1h")]
    OneHour,
    /// One day (`24h`).
    #[serde(rename = "24h")]
    OneDay,
}

/// A request for a deferred response: a capable provider answers at once with a handle
/// ([`StopReason::Deferred`](crate::StopReason::Deferred), the message's `deferred`) and
/// finishes the response asynchronously; the response is then fetched with the handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeferredRequest {
    /// How long the provider may take; `None` leaves it to the provider.
    pub window: Option<DeferredWindow>,
}

/// How the `User-Agent` header reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserAgentMode {
    /// `pi`.
    Short,
    /// `pi/<version> (<os>; <runtime>; <arch>)` (the default).
    Detailed,
    /// A value of the caller's own.
    #[serde(untagged)]
    Custom {
        /// The header value.
        custom: String,
    },
}

/// The application a request is attributed to (OpenRouter, NVIDIA NIM and OpenCode headers).
///
/// The texts are `Cow`s so that pi's own attribution, which every agent request carries by
/// default, is built and copied without allocating: `"name".into()` and `String`s work alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientAttribution {
    /// Application name.
    pub name: Cow<'static, str>,
    /// Application URL.
    pub url: Cow<'static, str>,
    /// Application categories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Cow<'static, [Cow<'static, str>]>>,
}

impl ClientAttribution {
    /// pi's own attribution, which agent loops send by default.
    pub fn pi() -> Self {
        const CATEGORIES: &[Cow<'static, str>] = &[Cow::Borrowed("cli-agent")];
        Self {
            name: Cow::Borrowed("pi"),
            url: Cow::Borrowed("https://pi.dev"),
            categories: Some(Cow::Borrowed(CATEGORIES)),
        }
    }
}

/// Who is calling: `User-Agent` and attribution headers. Absent fields use the defaults: a
/// detailed `User-Agent` and no attribution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientIdentity {
    /// How the `User-Agent` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<UserAgentMode>,
    /// Attribution; `Some(None)` (JSON `null`) turns a default attribution off.
    #[serde(default, deserialize_with = "deserialize_attribution", skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Option<ClientAttribution>>,
    /// Client version in the detailed `User-Agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

fn deserialize_attribution<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<ClientAttribution>>, D::Error> {
    Option::<ClientAttribution>::deserialize(deserializer).map(Some)
}

impl ClientIdentity {
    /// The identity agent loops use unless told otherwise: pi's attribution.
    pub fn agent_default() -> Self {
        Self { attribution: Some(Some(ClientAttribution::pi())), ..Default::default() }
    }

    /// [`agent_default`](Self::agent_default), shared: every agent request carries it, and a
    /// copy of this costs a reference count.
    pub fn shared_agent_default() -> Arc<Self> {
        static DEFAULT: std::sync::OnceLock<Arc<ClientIdentity>> = std::sync::OnceLock::new();
        Arc::clone(DEFAULT.get_or_init(|| Arc::new(Self::agent_default())))
    }

    /// Merge field by field: fields set in `other` win.
    pub fn merged_with(&self, other: Option<&ClientIdentity>) -> ClientIdentity {
        let Some(other) = other else { return self.clone() };
        ClientIdentity {
            user_agent: other.user_agent.clone().or_else(|| self.user_agent.clone()),
            attribution: other.attribution.clone().or_else(|| self.attribution.clone()),
            version: other.version.clone().or_else(|| self.version.clone()),
        }
    }
}

/// Status and headers of an HTTP response, for [`StreamOptions::on_response`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderResponse {
    /// HTTP status.
    pub status: u16,
    /// Response headers (lower-case names).
    pub headers: IndexMap<String, String>,
}

impl ProviderResponse {
    /// The delay in ms this response asks for before a retry ([`server_retry_delay_ms`] of its
    /// headers).
    ///
    /// ```
    /// use pi_types::ProviderResponse;
    /// let mut response = ProviderResponse { status: 503, ..Default::default() };
    /// assert_eq!(response.retry_after_ms(), None);
    /// response.headers.insert("retry-after".into(), "2".into());
    /// assert_eq!(response.retry_after_ms(), Some(2000.0));
    /// response.headers.insert("retry-after-ms".into(), "250".into());
    /// assert_eq!(response.retry_after_ms(), Some(250.0));
    /// ```
    pub fn retry_after_ms(&self) -> Option<f64> {
        server_retry_delay_ms(|name| self.headers.get(name).map(String::as_str))
    }
}

/// The delay in ms a server asks for before a retry, read as pi-ai's provider retry reads it:
/// `retry-after-ms` (milliseconds), else `retry-after` (seconds, or an HTTP date taken relative
/// to now; negative when it is past). Numbers are read like JavaScript's `parseFloat`
/// ([`pi_json::js::parse_float`]); `None` when neither header holds a finite value.
///
/// `header` looks a header up by its lower-case name. This one rule serves the providers'
/// request-level retry and the agent's [retry policy](https://docs.rs/pi-rs-agent).
pub fn server_retry_delay_ms<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<f64> {
    let get = |name: &str| header(name).filter(|value| !value.is_empty());
    if let Some(delay) = get("retry-after-ms").and_then(pi_json::js::parse_float).filter(|d| d.is_finite()) {
        return Some(delay);
    }
    let raw = get("retry-after")?;
    let delay = match pi_json::js::parse_float(raw) {
        Some(seconds) => seconds * 1000.0,
        None => {
            let when = httpdate::parse_http_date(raw).ok()?;
            match when.duration_since(std::time::SystemTime::now()) {
                Ok(ahead) => ahead.as_secs_f64() * 1000.0,
                Err(behind) => -behind.duration().as_secs_f64() * 1000.0,
            }
        }
    };
    delay.is_finite().then_some(delay)
}

/// Inspect or replace the request payload before it is sent (`None` keeps it).
pub type OnPayload = Arc<dyn Fn(&Value, &Model) -> BoxFuture<'static, Option<Value>> + Send + Sync>;
/// Called with the HTTP status and headers before the body is read.
pub type OnResponse = Arc<dyn Fn(&ProviderResponse, &Model) -> BoxFuture<'static, ()> + Send + Sync>;
/// Observes each raw provider stream event before normalization.
pub type OnProviderStreamEvent = Arc<dyn Fn(&Value, &Model) -> BoxFuture<'static, ()> + Send + Sync>;

/// The HTTP client of a request ([`StreamOptions::http_client`]): a shared handle to a client
/// of the crate that sends the request, opaque here so that `pi-types` needs no HTTP stack.
///
/// pi-providers' adapters take a `reqwest::Client` in it (`pi_providers::transport::client::handle`);
/// a handle holding anything else makes their request fail with an error naming the type.
/// Cloning shares the client (a reference count), as an agent loop copies its options into
/// every request.
///
/// ```
/// use pi_types::HttpClientHandle;
/// #[derive(Debug)]
/// struct MyTransport;
/// let handle = HttpClientHandle::new(MyTransport);
/// assert!(handle.downcast_ref::<MyTransport>().is_some());
/// assert!(handle.downcast_ref::<String>().is_none());
/// assert!(format!("{handle:?}").contains("MyTransport"));
/// // One pointer in every request's options, set or not.
/// assert_eq!(std::mem::size_of::<Option<HttpClientHandle>>(), std::mem::size_of::<usize>());
/// ```
#[derive(Clone)]
pub struct HttpClientHandle(Arc<ErasedClient>);

/// The client behind one thin pointer: the handle is in every request's options.
struct ErasedClient {
    client: Box<dyn Any + Send + Sync>,
    type_name: &'static str,
}

impl HttpClientHandle {
    /// A handle to `client`.
    pub fn new<C: Any + Send + Sync>(client: C) -> Self {
        Self(Arc::new(ErasedClient { client: Box::new(client), type_name: std::any::type_name::<C>() }))
    }

    /// The client, if it is a `C`.
    pub fn downcast_ref<C: Any>(&self) -> Option<&C> {
        (*self.0.client).downcast_ref()
    }

    /// The Rust type name of the client (for error texts).
    pub fn type_name(&self) -> &'static str {
        self.0.type_name
    }

    /// Whether both handles share one client.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for HttpClientHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HttpClientHandle").field(&self.type_name()).finish()
    }
}

/// Options of one request (the reference's `SimpleStreamOptions`).
///
/// The options that are rarely set and larger than a pointer (`headers`, `sampling_params`,
/// `metadata`, `thinking_budgets`, `identity`) are shared (`Arc`): an agent loop copies its
/// options into every request, and each copy, which the provider keeps for the request's
/// lifetime, stays small and costs reference counts, whatever is set.
#[derive(Clone, Default)]
pub struct StreamOptions {
    /// Cancels the request; the stream then ends with `aborted`.
    pub cancel: Option<CancellationToken>,
    /// API key; never printed by `Debug`.
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output token limit.
    pub max_tokens: Option<u64>,
    /// Extra sampling parameters merged into OpenAI-compatible request bodies.
    pub sampling_params: Option<Arc<Map<String, Value>>>,
    /// Requested reasoning level (`None` = off).
    pub reasoning: Option<ThinkingLevel>,
    /// Token budgets per level.
    pub thinking_budgets: Option<Arc<ThinkingBudgets>>,
    /// Tool selection.
    pub tool_choice: Option<ToolChoice>,
    /// Ask a capable provider for a deferred response (the reference's `deferred`).
    pub deferred: Option<DeferredRequest>,
    /// Session id for prompt caching and routing.
    pub session_id: Option<String>,
    /// Neither use nor record server-side continuation state for this request (Anthropic
    /// message threads): for replays such as cache warming, which must not replace the state
    /// of the real conversation. APIs that keep no such state ignore it.
    pub disable_continuation: bool,
    /// Extra headers; a `None` value removes a default header.
    pub headers: RequestHeaders,
    /// Caller identity.
    pub identity: Option<Arc<ClientIdentity>>,
    /// Time to response headers, in ms.
    pub timeout_ms: Option<u64>,
    /// Longest silence between stream chunks before the stream is ended, in ms.
    pub idle_timeout_ms: Option<u64>,
    /// Time to open a WebSocket (connection, TLS and upgrade), in ms, for an API with a
    /// WebSocket transport (default 15 000; 0 disables).
    pub websocket_connect_timeout_ms: Option<u64>,
    /// Retries before the first byte.
    pub max_retries: Option<u32>,
    /// Cap on a server-requested retry delay (default 60 000; 0 disables the cap).
    pub max_retry_delay_ms: Option<u64>,
    /// Transport preference.
    pub transport: Option<Transport>,
    /// Cache retention preference.
    pub cache_retention: Option<CacheRetention>,
    /// Request metadata (e.g. Anthropic `user_id`).
    pub metadata: Option<Arc<Map<String, Value>>>,
    /// Payload hook.
    pub on_payload: Option<OnPayload>,
    /// Response hook.
    pub on_response: Option<OnResponse>,
    /// Raw provider event hook.
    pub on_provider_stream_event: Option<OnProviderStreamEvent>,
    /// Variables an adapter reads before the process environment (credentials, region, Azure
    /// and Vertex settings): the reference's `options.env`. `Debug` prints the names only.
    pub env: Option<Arc<IndexMap<String, String>>>,
    /// The HTTP client to send this request with. `None`: the client configured on the
    /// provider or registry that dispatches the request, else the adapters' shared default.
    /// Whatever the client, the adapters apply the time limits, size caps, cancellation and
    /// redaction of these options themselves (see pi-providers' `client` module).
    pub http_client: Option<HttpClientHandle>,
    /// Options of particular APIs (pi-providers' `AnthropicOptions`, `OpenAIResponsesOptions`,
    /// ...): each adapter applies the entry of its own type for the request's model, on top of
    /// what it derives from the neutral options above.
    pub api_options: ApiOptions,
}

impl StreamOptions {
    /// A provider setting by name: the non-empty value in [`StreamOptions::env`], else the
    /// non-empty value of the process environment (the reference's `getProviderEnvValue`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pi_types::StreamOptions;
    /// let options = StreamOptions {
    ///     env: Some(Arc::new([("PI_DOC_REGION".to_owned(), "eu-west-1".to_owned())].into_iter().collect())),
    ///     ..Default::default()
    /// };
    /// assert_eq!(options.env_var("PI_DOC_REGION").as_deref(), Some("eu-west-1"));
    /// assert_eq!(options.env_var("PI_DOC_UNSET_VARIABLE"), None);
    /// ```
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env
            .as_deref()
            .and_then(|env| env.get(name))
            .filter(|value| !value.is_empty())
            .cloned()
            .or_else(|| std::env::var(name).ok().filter(|value| !value.is_empty()))
    }
}

/// Extra request headers in insertion order: name to value, where `None` removes a default
/// header the provider would send.
///
/// One pointer wide, allocated only once a header is set, and shared between copies of the
/// options until one of them changes. `Debug` prints the names only: values are often
/// credentials.
///
/// ```
/// use pi_types::RequestHeaders;
/// let mut headers = RequestHeaders::new();
/// headers.insert("x-trace", Some("1".to_owned()));
/// headers.insert("user-agent", None);
/// assert_eq!(headers.get("x-trace"), Some(&Some("1".to_owned())));
/// assert_eq!(headers.names().collect::<Vec<_>>(), ["x-trace", "user-agent"]);
/// assert_eq!(format!("{headers:?}"), r#"RequestHeaders(["x-trace", "user-agent"])"#);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RequestHeaders(Option<Arc<IndexMap<String, Option<String>>>>);

impl RequestHeaders {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set a header (`None` removes the provider's default of that name); the previous value
    /// of that name, if any. A name set again keeps its place.
    pub fn insert(&mut self, name: impl Into<String>, value: Option<String>) -> Option<Option<String>> {
        Arc::make_mut(self.0.get_or_insert_with(Default::default)).insert(name.into(), value)
    }

    /// Remove a header; its value, if it was set.
    pub fn remove(&mut self, name: &str) -> Option<Option<String>> {
        let map = Arc::make_mut(self.0.as_mut()?);
        let removed = map.shift_remove(name);
        if map.is_empty() {
            self.0 = None;
        }
        removed
    }

    /// The value set for `name`.
    pub fn get(&self, name: &str) -> Option<&Option<String>> {
        self.0.as_ref()?.get(name)
    }

    /// Whether no header is set.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|map| map.is_empty())
    }

    /// Number of headers set.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |map| map.len())
    }

    /// The headers in insertion order.
    pub fn iter(&self) -> indexmap::map::Iter<'_, String, Option<String>> {
        static EMPTY: std::sync::OnceLock<IndexMap<String, Option<String>>> = std::sync::OnceLock::new();
        self.0.as_deref().unwrap_or_else(|| EMPTY.get_or_init(IndexMap::new)).iter()
    }

    /// The header names in insertion order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.iter().map(|(name, _)| name.as_str())
    }

    /// The headers as a map (a copy).
    pub fn to_map(&self) -> IndexMap<String, Option<String>> {
        self.0.as_deref().cloned().unwrap_or_default()
    }
}

impl fmt::Debug for RequestHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RequestHeaders").field(&self.names().collect::<Vec<_>>()).finish()
    }
}

impl From<IndexMap<String, Option<String>>> for RequestHeaders {
    fn from(map: IndexMap<String, Option<String>>) -> Self {
        Self((!map.is_empty()).then(|| Arc::new(map)))
    }
}

impl<N: Into<String>> FromIterator<(N, Option<String>)> for RequestHeaders {
    fn from_iter<I: IntoIterator<Item = (N, Option<String>)>>(headers: I) -> Self {
        headers.into_iter().map(|(name, value)| (name.into(), value)).collect::<IndexMap<_, _>>().into()
    }
}

impl<N: Into<String>> Extend<(N, Option<String>)> for RequestHeaders {
    fn extend<I: IntoIterator<Item = (N, Option<String>)>>(&mut self, headers: I) {
        for (name, value) in headers {
            self.insert(name, value);
        }
    }
}

impl<'a> IntoIterator for &'a RequestHeaders {
    type Item = (&'a String, &'a Option<String>);
    type IntoIter = indexmap::map::Iter<'a, String, Option<String>>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for StreamOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("reasoning", &self.reasoning)
            .field("deferred", &self.deferred)
            .field("session_id", &self.session_id)
            .field("disable_continuation", &self.disable_continuation)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_retries", &self.max_retries)
            .field("env", &self.env.as_deref().map(|env| env.keys().collect::<Vec<_>>()))
            .field("http_client", &self.http_client)
            .field("api_options", &self.api_options)
            .finish_non_exhaustive()
    }
}

/// Options of particular APIs, keyed by their type: a request's adapter looks up the entry of
/// its own options type ([`ApiOptions::get`]) and ignores the others, so one set can hold the
/// options of every API an agent may switch between. An entry is for every model of its API,
/// or for one model (provider and model id), which then wins over the API-wide entry.
///
/// One pointer wide, allocated only once an entry is set, and shared between copies (an agent
/// loop copies its options into every request). The types are the adapters' own (defined in
/// pi-providers, which this crate does not know); `Debug` prints their names and scopes.
///
/// ```
/// use pi_types::{ApiOptions, Model};
/// #[derive(Debug, PartialEq)]
/// struct MyApiOptions { effort: &'static str }
/// let options = ApiOptions::new()
///     .with(MyApiOptions { effort: "high" })
///     .with_model("acme", "acme-large", MyApiOptions { effort: "low" });
/// let mut model = Model { provider: "acme".into(), id: "acme-small".into(), ..Default::default() };
/// assert_eq!(options.get::<MyApiOptions>(&model), Some(&MyApiOptions { effort: "high" }));
/// model.id = "acme-large".into();
/// assert_eq!(options.get::<MyApiOptions>(&model), Some(&MyApiOptions { effort: "low" }));
/// assert_eq!(options.get::<String>(&model), None);
/// assert_eq!(std::mem::size_of::<ApiOptions>(), std::mem::size_of::<usize>());
/// ```
#[derive(Clone, Default)]
pub struct ApiOptions(Option<Arc<Vec<ApiOptionsEntry>>>);

#[derive(Clone)]
struct ApiOptionsEntry {
    /// `(provider, model id)`, or `None` for every model.
    scope: Option<(String, String)>,
    value: Arc<dyn Any + Send + Sync>,
    type_name: &'static str,
}

impl ApiOptions {
    /// No entry.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `options` for every model of its API (replacing an API-wide entry of that type).
    pub fn with<T: Any + Send + Sync>(mut self, options: T) -> Self {
        self.insert(options);
        self
    }

    /// With `options` for one model (replacing that model's entry of that type).
    pub fn with_model<T: Any + Send + Sync>(
        mut self,
        provider: impl Into<String>,
        model_id: impl Into<String>,
        options: T,
    ) -> Self {
        self.insert_for_model(provider, model_id, options);
        self
    }

    /// Set `options` for every model of its API (replacing an API-wide entry of that type).
    pub fn insert<T: Any + Send + Sync>(&mut self, options: T) {
        self.put(None, options);
    }

    /// Set `options` for one model (replacing that model's entry of that type).
    pub fn insert_for_model<T: Any + Send + Sync>(
        &mut self,
        provider: impl Into<String>,
        model_id: impl Into<String>,
        options: T,
    ) {
        self.put(Some((provider.into(), model_id.into())), options);
    }

    fn put<T: Any + Send + Sync>(&mut self, scope: Option<(String, String)>, options: T) {
        let entries = Arc::make_mut(self.0.get_or_insert_with(Default::default));
        entries.retain(|entry| !(entry.scope == scope && entry.value.is::<T>()));
        entries.push(ApiOptionsEntry { scope, value: Arc::new(options), type_name: std::any::type_name::<T>() });
    }

    /// The `T` options for `model`: its own entry, else the API-wide one.
    pub fn get<T: Any>(&self, model: &Model) -> Option<&T> {
        let entries = self.0.as_deref()?;
        let scoped = |entry: &&ApiOptionsEntry| {
            entry.scope.as_ref().is_some_and(|(provider, id)| *provider == model.provider && *id == model.id)
        };
        entries
            .iter()
            .filter(|entry| entry.value.is::<T>())
            .find(scoped)
            .or_else(|| entries.iter().find(|entry| entry.scope.is_none() && entry.value.is::<T>()))
            .and_then(|entry| entry.value.downcast_ref())
    }

    /// Whether no entry is set.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|entries| entries.is_empty())
    }
}

impl fmt::Debug for ApiOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.0.as_deref().map(Vec::as_slice).unwrap_or_default();
        f.debug_list()
            .entries(entries.iter().map(|entry| match &entry.scope {
                Some((provider, id)) => format!("{} for {provider}/{id}", entry.type_name),
                None => entry.type_name.to_owned(),
            }))
            .finish()
    }
}
