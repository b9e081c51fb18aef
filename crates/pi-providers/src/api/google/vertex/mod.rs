//! Google Vertex AI (`google-vertex`): Gemini models through the Vertex AI REST API.
//!
//! The wire protocol is Gemini's: `POST …:streamGenerateContent?alt=sse` with a JSON
//! `GenerateContentRequest`, answered by Server-Sent Events whose `data:` lines are
//! `GenerateContentResponse` chunks (CRLF framed). The request body, the chunk handling, the
//! error shapes and the events are those of the Gemini adapter ([`crate::api::google::gemini`]), reused
//! here; this module adds what Vertex does differently: where the request goes and how it is
//! authenticated.
//!
//! # Authentication and endpoint
//!
//! * **API key** (Vertex "express mode"): the request's key (`GOOGLE_CLOUD_API_KEY` through
//!   the registry), unless it is blank, the marker `gcp-vertex-credentials` or a placeholder
//!   such as `<authenticated>`. Sent as `x-goog-api-key`; the URL is
//!   `https://aiplatform.googleapis.com/v1/publishers/google/models/{model}:streamGenerateContent?alt=sse`.
//! * **Application default credentials** otherwise: `GOOGLE_CLOUD_PROJECT` (or
//!   `GCLOUD_PROJECT`) and `GOOGLE_CLOUD_LOCATION` are required, and an OAuth2 access token is
//!   sent as `Authorization: Bearer`. The token comes from the service-account or
//!   authorized-user JSON file named by `GOOGLE_APPLICATION_CREDENTIALS`, else from the
//!   usual ADC chain (gcloud's well-known file, the metadata server, the gcloud CLI). This
//!   needs the crate feature `vertex` (the `gcp_auth` crate); without it the stream ends with
//!   an error that says so. The URL is
//!   `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse`
//!   (`https://aiplatform.googleapis.com/…` for `global`, `https://aiplatform.{us|eu}.rep.googleapis.com/…`
//!   for the multi-regional locations).
//! * A **custom base URL** (the model's `baseUrl`, unless it is blank or still has the
//!   catalog's `{location}` template) replaces the host part and is used as the collection
//!   root in both modes: `{baseUrl}/v1/publishers/google/models/{model}:streamGenerateContent`,
//!   without `/v1` when the base URL already has a version segment (`v1`, `v1beta1`, …) and
//!   without the project/location path.
//!
//! Settings are read with [`StreamOptions::env_var`] (the request's `env` first, then the
//! process environment). Function calls without an id get `<name>_<unix ms>_<n>` from a
//! counter of their own, like the reference's.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};
use serde_json::Value;

use crate::api::driver::{self, Call, Cancel, Exchange, WireApi};
use crate::api::google::gemini::{self as google, GoogleDecode, GoogleDialect, ToolCallIds, GOOGLE_CANCEL};
use crate::api::own_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::js_json;

/// The API id.
pub const API: &str = "google-vertex";

mod options;
pub use options::GoogleVertexOptions;

/// Stream with the API's own options, as the reference's `stream()` (through a default
/// [`GoogleVertex`]): as [`crate::api::google::gemini::stream`], plus the project and location.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: GoogleVertexOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&GoogleVertex::default(), model, context, options, api)
}

/// The API version the adapter addresses.
const API_VERSION: &str = "v1";

/// The key value that asks for application default credentials instead of an API key.
pub const CREDENTIALS_MARKER: &str = "gcp-vertex-credentials";

/// The OAuth2 scope of Vertex AI requests.
#[cfg_attr(not(feature = "vertex"), allow(dead_code))]
const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Locations served from a multi-regional endpoint.
const MULTI_REGIONAL_LOCATIONS: [&str; 2] = ["us", "eu"];

/// The reference's own counter for synthesized function-call ids (separate from Gemini's).
#[derive(Debug, Default)]
pub struct VertexToolCallIds;

static VERTEX_COUNTER: AtomicU64 = AtomicU64::new(0);

impl ToolCallIds for VertexToolCallIds {
    fn next_id(&self, name: &str) -> String {
        crate::api::google::gemini::clock_id(name, &VERTEX_COUNTER)
    }
}

google_adapter!(
    /// The Vertex AI adapter.
    GoogleVertex,
    VertexToolCallIds
);

/// How a request is authenticated (the key is never printed).
#[derive(Clone, PartialEq, Eq)]
pub enum VertexAuth {
    /// Express mode: an API key in `x-goog-api-key`.
    ApiKey(String),
    /// Application default credentials for a project and location.
    Adc {
        /// The Google Cloud project id.
        project: String,
        /// The Vertex AI location (`us-central1`, `global`, ...).
        location: String,
    },
}

impl std::fmt::Debug for VertexAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            Self::Adc { project, location } => {
                f.debug_struct("Adc").field("project", project).field("location", location).finish()
            }
        }
    }
}

/// The request's API key, unless it is blank, the credentials marker or a `<placeholder>`.
pub fn resolve_api_key(options: &StreamOptions) -> Option<String> {
    let key = options.api_key.as_deref().map(js_json::js_trim)?;
    let placeholder =
        key.len() > 2 && key.starts_with('<') && key.ends_with('>') && !key[1..key.len() - 1].contains('>');
    if key.is_empty() || key == CREDENTIALS_MARKER || placeholder {
        return None;
    }
    Some(key.to_owned())
}

/// The authentication mode for a request, or the reference's error when ADC settings are missing.
/// [`GoogleVertexOptions::project`] and `location` win over the variables.
pub fn resolve_auth(model: &Model, options: &StreamOptions) -> Result<VertexAuth, String> {
    if let Some(key) = resolve_api_key(options) {
        return Ok(VertexAuth::ApiKey(key));
    }
    let api = own_options::lookup::<GoogleVertexOptions>(model, options);
    let project = api
        .field(|api| &api.project)
        .filter(|p| !p.is_empty())
        .or_else(|| options.env_var("GOOGLE_CLOUD_PROJECT"))
        .or_else(|| options.env_var("GCLOUD_PROJECT"))
        .ok_or_else(|| {
            "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options."
                .to_owned()
        })?;
    let location = api
        .field(|api| &api.location)
        .filter(|l| !l.is_empty())
        .or_else(|| options.env_var("GOOGLE_CLOUD_LOCATION"))
        .ok_or_else(|| {
            "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options.".to_owned()
        })?;
    Ok(VertexAuth::Adc { project, location })
}

/// The model's base URL when it is a usable custom one (not blank, no `{location}` template).
fn custom_base_url(model: &Model) -> Option<&str> {
    let trimmed = js_json::js_trim(&model.base_url);
    (!trimmed.is_empty() && !trimmed.contains("{location}")).then_some(trimmed)
}

fn is_version_segment(part: &str) -> bool {
    let Some(rest) = part.strip_prefix('v') else { return false };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    match rest[digits..].strip_prefix("beta") {
        Some(tail) => tail.bytes().all(|b| b.is_ascii_digit()),
        None => digits == rest.len(),
    }
}

/// Whether a base URL's path already names an API version (`/v1`, `/v1beta1`, ...).
fn base_url_includes_version(base: &str) -> bool {
    match reqwest::Url::parse(base) {
        Ok(url) => url.path().split('/').any(is_version_segment),
        Err(_) => base.split('/').any(is_version_segment),
    }
}

/// The SDK's resource name of a model id (`publishers/google/models/{id}`).
fn model_resource(id: &str) -> Result<String, String> {
    if id.is_empty() {
        return Err("model is required and must be a string".to_owned());
    }
    if id.contains("..") || id.contains('?') || id.contains('&') {
        return Err("invalid model parameter".to_owned());
    }
    if id.starts_with("publishers/") || id.starts_with("projects/") || id.starts_with("models/") {
        return Ok(id.to_owned());
    }
    let mut parts = id.split('/');
    match (parts.next(), parts.next()) {
        (Some(publisher), Some(name)) => Ok(format!("publishers/{publisher}/models/{name}")),
        _ => Ok(format!("publishers/google/models/{id}")),
    }
}

/// The streaming URL for `model` under `auth` (see the module documentation).
pub fn endpoint(model: &Model, auth: &VertexAuth) -> Result<String, String> {
    let resource = model_resource(&model.id)?;
    let path = format!("{resource}:streamGenerateContent?alt=sse");
    if let Some(base) = custom_base_url(model) {
        let root = base.strip_suffix('/').unwrap_or(base);
        return Ok(if base_url_includes_version(base) {
            format!("{root}/{path}")
        } else {
            format!("{root}/{API_VERSION}/{path}")
        });
    }
    Ok(match auth {
        VertexAuth::ApiKey(_) => format!("https://aiplatform.googleapis.com/{API_VERSION}/{path}"),
        VertexAuth::Adc { project, location } => {
            let host = if location == "global" {
                "https://aiplatform.googleapis.com".to_owned()
            } else if MULTI_REGIONAL_LOCATIONS.contains(&location.as_str()) {
                format!("https://aiplatform.{location}.rep.googleapis.com")
            } else {
                format!("https://{location}-aiplatform.googleapis.com")
            };
            format!("{host}/{API_VERSION}/projects/{project}/locations/{location}/{path}")
        }
    })
}

/// The request body the adapter sends for a context: Gemini's (the two share the thinking
/// budgets too).
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
) -> Result<Value, String> {
    google::build_request_body(model, context, options)
}

/// Vertex's request: authenticated and addressed as the module docs say.
async fn prepare(ids: &Arc<dyn ToolCallIds>, call: Call<'_>) -> Result<Exchange<Wire>, Stop> {
    let Call { model, context, options, .. } = call;
    let auth = resolve_auth(model, options).map_err(Stop::error)?;
    let params = build_request_body(model, &context, options).map_err(Stop::error)?;
    let params = adapter_support::apply_on_payload(options, model, params).await;
    let url = endpoint(model, &auth).map_err(Stop::error)?;
    let credential = match auth {
        VertexAuth::ApiKey(key) => ("x-goog-api-key".to_owned(), Some(key)),
        VertexAuth::Adc { .. } => {
            ("Authorization".to_owned(), Some(format!("Bearer {}", adc::access_token(options).await?)))
        }
    };
    let user_headers = [adapter_support::model_headers(model), adapter_support::option_headers(options)].concat();
    // A caller's own credential header wins over the resolved one, as with the SDK.
    let caller_auth =
        user_headers.iter().any(|(name, value)| name.eq_ignore_ascii_case(&credential.0) && value.is_some());
    let credential = (!caller_auth).then_some(credential);
    Ok(google::exchange(ids, model, options, params, url, credential, user_headers, "Google Vertex"))
}

/// Application default credentials. A credentials file (named by
/// `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's well-known file) is read here and its grant
/// sent with the request's HTTP client: a service account's JWT (signed by `gcp_auth`), an
/// authorized user's refresh token. Without a file, `gcp_auth`'s chain (the metadata server,
/// the gcloud CLI) provides the token with its own client.
#[cfg(feature = "vertex")]
mod adc {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    use gcp_auth::TokenProvider;
    use pi_types::StreamOptions;
    use serde_json::Value;

    use super::CLOUD_PLATFORM_SCOPE;
    use crate::api::support::Stop;
    use crate::js_json;

    const NO_CREDENTIALS: &str = "Could not load the default credentials. Browse to https://cloud.google.com/docs/authentication/getting-started for more information.";
    const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

    /// Where tokens come from.
    #[derive(Clone)]
    enum Source {
        /// gcp_auth's chain without a credentials file: the metadata server, the gcloud CLI.
        Gcp(Arc<dyn TokenProvider>),
        /// A credentials file: an OAuth grant sent with the request's HTTP client.
        File(Arc<Grant>),
    }

    /// The OAuth grant of a credentials file and its cached token.
    struct Grant {
        kind: GrantKind,
        token_uri: String,
        cached: tokio::sync::Mutex<Option<(String, Instant)>>,
    }

    enum GrantKind {
        /// `authorized_user`: a refresh token and its OAuth client.
        RefreshToken { client_id: String, client_secret: String, refresh_token: String },
        /// `service_account`: a JWT signed with the account's key (RFC 7523).
        ServiceAccount { account: Box<gcp_auth::CustomServiceAccount>, email: String },
    }

    /// Sources by credentials file ("" = the default chain); each caches its token.
    fn sources() -> &'static Mutex<HashMap<String, Source>> {
        static SOURCES: OnceLock<Mutex<HashMap<String, Source>>> = OnceLock::new();
        SOURCES.get_or_init(|| Mutex::new(HashMap::new()))
    }

    fn from_file(path: &str) -> Result<Source, String> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            format!("Vertex AI credentials: cannot read GOOGLE_APPLICATION_CREDENTIALS file {path}: {error}")
        })?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|_| format!("Vertex AI credentials: {path} is not a JSON credentials file"))?;
        let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
        let kind = match value.get("type").and_then(Value::as_str) {
            Some("service_account") => GrantKind::ServiceAccount {
                account: Box::new(
                    gcp_auth::CustomServiceAccount::from_json(&text)
                        .map_err(|error| format!("Vertex AI credentials: {error}"))?,
                ),
                email: field("client_email"),
            },
            Some("authorized_user") => GrantKind::RefreshToken {
                client_id: field("client_id"),
                client_secret: field("client_secret"),
                refresh_token: field("refresh_token"),
            },
            other => {
                return Err(format!(
                    "Vertex AI credentials: unsupported credentials type {} in {path}",
                    other.map_or_else(|| "(none)".to_owned(), |t| format!("\"{t}\""))
                ))
            }
        };
        let token_uri =
            Some(field("token_uri")).filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned());
        Ok(Source::File(Arc::new(Grant { kind, token_uri, cached: tokio::sync::Mutex::new(None) })))
    }

    /// gcloud's application default credentials file, where gcp_auth's chain looks for it.
    fn gcloud_file() -> Option<String> {
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty())?;
        let path = std::path::Path::new(&home).join(".config/gcloud/application_default_credentials.json");
        path.is_file().then(|| path.to_string_lossy().into_owned())
    }

    async fn source(path: Option<&str>) -> Result<Source, String> {
        // A credentials file, named or gcloud's, is read here so that its grant goes through
        // the request's client; gcp_auth keeps the sources that need no file.
        let path = path.map(str::to_owned).or_else(gcloud_file);
        let key = path.clone().unwrap_or_default();
        if let Some(found) = sources().lock().ok().and_then(|s| s.get(&key).cloned()) {
            return Ok(found);
        }
        let created = match &path {
            Some(path) => from_file(path)?,
            None => Source::Gcp(gcp_auth::provider().await.map_err(|error| match error {
                gcp_auth::Error::NoAuthMethod(..) => NO_CREDENTIALS.to_owned(),
                other => format!("Vertex AI credentials: {other}"),
            })?),
        };
        if let Ok(mut map) = sources().lock() {
            map.insert(key, created.clone());
        }
        Ok(created)
    }

    /// The signed JWT a service account presents for a token.
    fn assertion(account: &gcp_auth::CustomServiceAccount, email: &str, token_uri: &str) -> Result<String, String> {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let claims = serde_json::json!({
            "iss": email,
            "scope": CLOUD_PLATFORM_SCOPE,
            "aud": token_uri,
            "iat": now,
            // The longest life Google grants.
            "exp": now.saturating_add(3600),
        });
        let mut jwt = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature =
            account.signer().sign(jwt.as_bytes()).map_err(|error| format!("Vertex AI credentials: {error}"))?;
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(signature));
        Ok(jwt)
    }

    impl Grant {
        async fn token(&self, client: &reqwest::Client) -> Result<String, String> {
            let mut cached = self.cached.lock().await;
            if let Some((token, expires)) = cached.as_ref() {
                if Instant::now() < *expires {
                    return Ok(token.clone());
                }
            }
            let body = match &self.kind {
                GrantKind::RefreshToken { client_id, client_secret, refresh_token } => {
                    crate::api::support::form_encode(&[
                        ("grant_type", "refresh_token"),
                        ("client_id", client_id),
                        ("client_secret", client_secret),
                        ("refresh_token", refresh_token),
                    ])
                }
                GrantKind::ServiceAccount { account, email } => crate::api::support::form_encode(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &assertion(account, email, &self.token_uri)?),
                ]),
            };
            let response = client
                .post(&self.token_uri)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .map_err(|error| {
                    format!(
                        "Vertex AI credentials: token request failed: {}",
                        crate::transport::http::deepest_cause(&error)
                    )
                })?;
            let status = response.status();
            let bytes = crate::transport::http::read_to_cap(response, crate::transport::http::MAX_TOKEN_BODY_BYTES)
                .await
                .map_err(|error| {
                    format!(
                        "Vertex AI credentials: token request failed: {}",
                        crate::transport::http::deepest_cause(&error)
                    )
                })?;
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if !status.is_success() {
                // The error body of a token endpoint names the problem, never a token.
                let reason = value.get("error_description").or_else(|| value.get("error")).map(js_json::stringify);
                return Err(format!(
                    "Vertex AI credentials: token request failed with status {}{}",
                    status.as_u16(),
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                ));
            }
            let token = value
                .get("access_token")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| "Vertex AI credentials: the token response has no access_token".to_owned())?
                .to_owned();
            let lifetime = value.get("expires_in").and_then(Value::as_u64).unwrap_or(3600);
            let expires = Instant::now() + Duration::from_secs(lifetime.saturating_sub(60).min(86_400));
            *cached = Some((token.clone(), expires));
            Ok(token)
        }
    }

    /// An access token for Vertex AI (never part of an error text).
    pub(super) async fn access_token(options: &StreamOptions) -> Result<String, Stop> {
        let path = options.env_var("GOOGLE_APPLICATION_CREDENTIALS");
        let fetch = async {
            match source(path.as_deref()).await? {
                Source::Gcp(provider) => provider
                    .token(&[CLOUD_PLATFORM_SCOPE])
                    .await
                    .map(|token| token.as_str().to_owned())
                    .map_err(|error| format!("Vertex AI credentials: {error}")),
                Source::File(grant) => grant.token(crate::transport::client::for_request(options)?).await,
            }
        };
        // The request's time-to-headers limit bounds the token fetch too (0 = none).
        let limit = options.timeout_ms.unwrap_or(crate::transport::http::DEFAULT_HEADERS_TIMEOUT_MS);
        let bounded = async {
            if limit == 0 {
                return fetch.await;
            }
            tokio::time::timeout(Duration::from_millis(limit), fetch)
                .await
                .unwrap_or_else(|_| Err("Vertex AI credentials: token request timed out.".to_owned()))
        };
        let cancel = options.cancel.clone();
        tokio::select! {
            biased;
            () = async { match &cancel { Some(c) => c.cancelled().await, None => std::future::pending().await } } => {
                Err(Stop::aborted("Request was aborted."))
            }
            result = bounded => result.map_err(Stop::error),
        }
    }
}

/// Without the `vertex` feature there is no token source: ADC requests end with this error.
#[cfg(not(feature = "vertex"))]
mod adc {
    use pi_types::StreamOptions;

    use crate::api::support::Stop;

    pub(super) async fn access_token(_options: &StreamOptions) -> Result<String, Stop> {
        Err(Stop::error(
            "Vertex AI application default credentials need pi-providers built with the `vertex` feature; \
             set GOOGLE_CLOUD_API_KEY to use an API key instead.",
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn options(key: Option<&str>, env: &[(&str, &str)]) -> StreamOptions {
        let mut map = indexmap::IndexMap::new();
        for (k, v) in env {
            map.insert((*k).to_owned(), (*v).to_owned());
        }
        StreamOptions { api_key: key.map(str::to_owned), env: Some(Arc::new(map)), ..Default::default() }
    }

    fn model(base: &str) -> Model {
        let mut m = Model::new("gemini-2.5-flash").with_api(API).with_provider("google-vertex");
        m.base_url = base.to_owned();
        m
    }

    const CATALOG_BASE: &str = "https://{location}-aiplatform.googleapis.com";

    #[test]
    fn key_resolution_skips_markers_and_placeholders() {
        assert_eq!(resolve_api_key(&options(Some(" k1 "), &[])), Some("k1".to_owned()));
        assert_eq!(resolve_api_key(&options(Some("gcp-vertex-credentials"), &[])), None);
        assert_eq!(resolve_api_key(&options(Some("<authenticated>"), &[])), None);
        assert_eq!(resolve_api_key(&options(Some("  "), &[])), None);
        assert_eq!(resolve_api_key(&options(Some("<a>b>"), &[])), Some("<a>b>".to_owned()));
    }

    #[test]
    fn adc_needs_project_and_location() {
        let o = options(None, &[("GOOGLE_CLOUD_LOCATION", "us-central1")]);
        if std::env::var("GOOGLE_CLOUD_PROJECT").is_err() && std::env::var("GCLOUD_PROJECT").is_err() {
            assert!(resolve_auth(&Model::default(), &o).unwrap_err().starts_with("Vertex AI requires a project ID."));
        }
        let o = options(None, &[("GCLOUD_PROJECT", "p"), ("GOOGLE_CLOUD_LOCATION", "europe-west4")]);
        assert_eq!(
            resolve_auth(&Model::default(), &o).unwrap(),
            VertexAuth::Adc { project: "p".into(), location: "europe-west4".into() }
        );
    }

    #[test]
    fn an_explicit_key_wins_over_project_and_location() {
        let o = options(Some("k"), &[("GOOGLE_CLOUD_PROJECT", "p"), ("GOOGLE_CLOUD_LOCATION", "us-central1")]);
        let auth = resolve_auth(&Model::default(), &o).unwrap();
        assert_eq!(auth, VertexAuth::ApiKey("k".into()));
        assert_eq!(
            endpoint(&model(CATALOG_BASE), &auth).unwrap(),
            "https://aiplatform.googleapis.com/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
    }

    #[test]
    fn urls_for_each_mode() {
        let adc = |loc: &str| VertexAuth::Adc { project: "proj".into(), location: loc.into() };
        let key = VertexAuth::ApiKey("k".into());
        let tail = "publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
        assert_eq!(
            endpoint(&model(CATALOG_BASE), &key).unwrap(),
            format!("https://aiplatform.googleapis.com/v1/{tail}")
        );
        assert_eq!(
            endpoint(&model(CATALOG_BASE), &adc("us-central1")).unwrap(),
            format!("https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/{tail}")
        );
        assert_eq!(
            endpoint(&model(""), &adc("global")).unwrap(),
            format!("https://aiplatform.googleapis.com/v1/projects/proj/locations/global/{tail}")
        );
        assert_eq!(
            endpoint(&model(CATALOG_BASE), &adc("eu")).unwrap(),
            format!("https://aiplatform.eu.rep.googleapis.com/v1/projects/proj/locations/eu/{tail}")
        );
        assert_eq!(endpoint(&model("http://h:1/"), &adc("us-central1")).unwrap(), format!("http://h:1/v1/{tail}"));
        assert_eq!(endpoint(&model("http://h:1/x/v1beta1"), &key).unwrap(), format!("http://h:1/x/v1beta1/{tail}"));
        assert_eq!(endpoint(&model("http://h:1/v2x"), &key).unwrap(), format!("http://h:1/v2x/v1/{tail}"));
        let mut m = model("http://h");
        m.id = "anthropic/claude-x".into();
        assert_eq!(
            endpoint(&m, &key).unwrap(),
            "http://h/v1/publishers/anthropic/models/claude-x:streamGenerateContent?alt=sse"
        );
        m.id = "../x".into();
        assert_eq!(endpoint(&m, &key).unwrap_err(), "invalid model parameter");
    }

    #[test]
    fn flash_lite_minimal_budget_is_gemini_s() {
        let mut m = model("http://h");
        m.id = "gemini-2.5-flash-lite".into();
        m.reasoning = true;
        let context = pi_types::transcript::normalize_context(pi_types::Context {
            messages: vec![pi_types::Message::from(pi_types::UserMessage::text("Hi"))],
            ..Default::default()
        });
        let o = StreamOptions { reasoning: Some(pi_types::ThinkingLevel::Minimal), ..Default::default() };
        let body = build_request_body(&m, &context, &o).unwrap();
        assert_eq!(body["generationConfig"]["thinkingConfig"]["thinkingBudget"], 512);
    }

    #[test]
    fn auth_debug_hides_the_key() {
        let text = format!("{:?}", VertexAuth::ApiKey("sekrit-key".into()));
        assert!(!text.contains("sekrit"));
    }
}
