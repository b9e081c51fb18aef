//! Where a request goes and how it is authenticated: region and endpoint rules, the bearer
//! token, the AWS credential sources and SigV4 signing.
//!
//! Settings are read with [`StreamOptions::env_var`] (the request's `env`, then the process
//! environment). Access keys come from there first; profiles, ECS container credentials and
//! web identity come from `aws-config`'s default chain, which reads the process environment
//! and the shared config files itself.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use pi_types::{Model, StreamOptions};

use super::options::BedrockOptions;
use super::request::configured_region;
use crate::api::own_options;

/// The signing name of Bedrock runtime requests.
const SIGNING_NAME: &str = "bedrock";

/// How a request is authenticated.
pub(crate) enum Auth {
    /// `Authorization: Bearer <token>` (Bedrock API keys).
    Bearer(String),
    /// SigV4 with these credentials.
    SigV4(Credentials),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The token is a secret; `Credentials`' own Debug redacts the secret key.
            Self::Bearer(_) => f.write_str("Bearer(** redacted **)"),
            Self::SigV4(credentials) => f.debug_tuple("SigV4").field(credentials).finish(),
        }
    }
}

/// Where the request goes and for which region it is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Full URL of the `converse-stream` call.
    pub url: String,
    /// Region of the signature.
    pub region: String,
}

/// The region of a standard runtime endpoint (`bedrock-runtime[-fips].<region>.amazonaws.com[.cn]`).
pub(crate) fn standard_endpoint_region(base_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(base_url).ok()?;
    let host = url.host_str()?.to_lowercase();
    let rest = host.strip_prefix("bedrock-runtime-fips.").or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let region = rest.strip_suffix(".amazonaws.com").or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    (!region.is_empty() && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
        .then(|| region.to_owned())
}

/// The region embedded in an inference-profile ARN model id.
fn arn_region(model_id: &str) -> Option<String> {
    let rest = model_id.strip_prefix("arn:aws")?;
    let rest = match rest.strip_prefix('-') {
        Some(partition) => {
            let end = partition.find(':')?;
            let name = &partition[..end];
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
                return None;
            }
            &partition[end..]
        }
        None => rest,
    };
    let rest = rest.strip_prefix(":bedrock:")?;
    let end = rest.find(':')?;
    let region = &rest[..end];
    (!region.is_empty() && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
        .then(|| region.to_owned())
}

/// JavaScript's `encodeURIComponent` plus `!'()*`: what the SDK does to a path label.
fn encode_label(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for byte in label.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The profile explicitly configured for this request ([`BedrockOptions::profile`], else its
/// own `env`), which wins over keys.
fn request_profile(model: &Model, options: &StreamOptions) -> Option<String> {
    own_options::lookup::<BedrockOptions>(model, options)
        .field(|api| &api.profile)
        .or_else(|| options.env.as_deref().and_then(|env| env.get("AWS_PROFILE")).cloned())
        .filter(|p| !p.is_empty())
}

/// The endpoint and signing region, by the reference's rules: an ARN's region first, then
/// `AWS_REGION` / `AWS_DEFAULT_REGION`, then a standard endpoint's region; a custom base URL
/// (proxy, VPC endpoint) is always used as it is, a standard one only when no region or
/// profile is configured.
pub(crate) async fn target(model: &Model, options: &StreamOptions) -> Target {
    let configured = configured_region(model, options);
    let ambient_profile = request_profile(model, options).or_else(|| options.env_var("AWS_PROFILE"));
    let endpoint_region = standard_endpoint_region(&model.base_url);
    let explicit = endpoint_region.is_none() || (configured.is_none() && ambient_profile.is_none());
    let region = match (arn_region(&model.id), &configured) {
        (Some(region), _) => region,
        (None, Some(region)) => region.clone(),
        (None, None) => match (&endpoint_region, explicit) {
            (Some(region), true) => region.clone(),
            _ if ambient_profile.is_none() => "us-east-1".to_owned(),
            _ => profile_region(ambient_profile.as_deref()).await.unwrap_or_else(|| "us-east-1".to_owned()),
        },
    };
    let base = if explicit {
        model.base_url.trim_end_matches('/').to_owned()
    } else {
        let suffix = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
        format!("https://bedrock-runtime.{region}.{suffix}")
    };
    Target { url: format!("{base}/model/{}/converse-stream", encode_label(&model.id)), region }
}

/// How to authenticate: a bearer token (`apiKey`, else `AWS_BEARER_TOKEN_BEDROCK`) unless
/// `AWS_BEDROCK_SKIP_AUTH=1`; else SigV4 with dummy keys (skip-auth proxies), the request's
/// profile, the access keys of `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
/// `AWS_SESSION_TOKEN`, or the default chain (profile, web identity, ECS, instance metadata).
pub(crate) async fn resolve(model: &Model, options: &StreamOptions, region: &str) -> Result<Auth, String> {
    let skip_auth = options.env_var("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1");
    let bearer = own_options::lookup::<BedrockOptions>(model, options)
        .field(|api| &api.bearer_token)
        .filter(|k| !k.is_empty())
        .or_else(|| options.api_key.clone().filter(|k| !k.is_empty()))
        .or_else(|| options.env_var("AWS_BEARER_TOKEN_BEDROCK"));
    if let Some(token) = bearer.filter(|_| !skip_auth) {
        return Ok(Auth::Bearer(token));
    }
    if skip_auth {
        return Ok(Auth::SigV4(Credentials::new("dummy-access-key", "dummy-secret-key", None, None, "pi-skip-auth")));
    }
    let profile = request_profile(model, options);
    if profile.is_none() {
        if let (Some(key), Some(secret)) =
            (options.env_var("AWS_ACCESS_KEY_ID"), options.env_var("AWS_SECRET_ACCESS_KEY"))
        {
            return Ok(Auth::SigV4(Credentials::new(
                key,
                secret,
                options.env_var("AWS_SESSION_TOKEN"),
                None,
                "pi-env",
            )));
        }
    }
    let profile = profile.or_else(|| options.env_var("AWS_PROFILE"));
    chain_credentials(profile.as_deref(), region).await.map(Auth::SigV4)
}

type ProviderCache = Mutex<HashMap<Option<String>, SharedCredentialsProvider>>;

static PROVIDERS: OnceLock<ProviderCache> = OnceLock::new();
static CACHED: OnceLock<Mutex<HashMap<Option<String>, Credentials>>> = OnceLock::new();

/// The HTTP client of the credential providers (ECS, STS for web identity and roles): rustls
/// on `ring`, like the adapters.
fn provider_http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https()
}

/// The default chain's configuration for a profile (or the default one).
async fn load_config(profile: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(provider_http_client());
    if let Some(profile) = profile {
        loader = loader.profile_name(profile);
    }
    loader.load().await
}

/// The region a profile names (`region = ...` in `~/.aws/config`).
async fn profile_region(profile: Option<&str>) -> Option<String> {
    load_config(profile).await.region().map(|r| r.as_ref().to_owned())
}

/// The credentials of a named profile (static keys, roles, web identity, `credential_process`
/// as the profile says): only the profile, so that access keys in the process environment
/// do not win over a profile chosen on purpose, as the JS SDK's chain behaves.
fn profile_provider(profile: &str, region: &str) -> SharedCredentialsProvider {
    let config = aws_config::provider_config::ProviderConfig::default()
        .with_http_client(provider_http_client())
        .with_region(Some(aws_config::Region::new(region.to_owned())));
    SharedCredentialsProvider::new(
        aws_config::profile::ProfileFileCredentialsProvider::builder().configure(&config).profile_name(profile).build(),
    )
}

/// Credentials of a profile, else of aws-config's default chain (environment, shared files,
/// web identity, ECS, instance metadata), reused until five minutes before they expire.
async fn chain_credentials(profile: Option<&str>, region: &str) -> Result<Credentials, String> {
    let key = profile.map(str::to_owned);
    let cached = CACHED.get_or_init(Default::default);
    if let Ok(cache) = cached.lock() {
        if let Some(credentials) = cache.get(&key) {
            let fresh = credentials.expiry().is_none_or(|expiry| expiry > SystemTime::now() + Duration::from_secs(300));
            if fresh {
                return Ok(credentials.clone());
            }
        }
    }
    let providers = PROVIDERS.get_or_init(Default::default);
    let existing = providers.lock().ok().and_then(|p| p.get(&key).cloned());
    let provider = match existing {
        Some(provider) => provider,
        None => {
            let provider = match profile {
                Some(profile) => profile_provider(profile, region),
                None => match aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .http_client(provider_http_client())
                    // The STS call of web identity needs a region: the request's.
                    .region(aws_config::Region::new(region.to_owned()))
                    .load()
                    .await
                    .credentials_provider()
                {
                    Some(provider) => provider,
                    None => return Err(NO_CREDENTIALS.to_owned()),
                },
            };
            if let Ok(mut p) = providers.lock() {
                p.insert(key.clone(), provider.clone());
            }
            provider
        }
    };
    match provider.provide_credentials().await {
        Ok(credentials) => {
            if let Ok(mut cache) = cached.lock() {
                cache.insert(key, credentials.clone());
            }
            Ok(credentials)
        }
        Err(error) => Err(credentials_error_text(&error)),
    }
}

const NO_CREDENTIALS: &str = "Could not load credentials from any providers";

fn credentials_error_text(error: &aws_credential_types::provider::error::CredentialsError) -> String {
    use aws_credential_types::provider::error::CredentialsError;
    match error {
        CredentialsError::CredentialsNotLoaded(_) => NO_CREDENTIALS.to_owned(),
        other => {
            let cause = crate::transport::http::deepest_cause(other);
            let text = other.to_string();
            if cause.is_empty() || text.contains(&cause) {
                text
            } else {
                format!("{text}: {cause}")
            }
        }
    }
}

/// The SigV4 headers (`authorization`, `x-amz-date`, `x-amz-content-sha256`,
/// `x-amz-security-token`) for a POST of
/// `body` to `url` with `headers`, signed now for `region`.
pub(crate) fn sigv4_headers(
    credentials: &Credentials,
    region: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("Invalid Bedrock endpoint URL: {e}"))?;
    if parsed.host_str().is_none_or(str::is_empty) || !matches!(parsed.scheme(), "http" | "https") {
        return Err("Invalid Bedrock endpoint URL: an http(s) URL with a host is required".to_owned());
    }
    let identity = credentials.clone().into();
    // `x-amz-content-sha256` as the JS SDK's signer adds it (its `applyChecksum` default).
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| format!("Could not sign the Bedrock request: {e}"))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        parsed.as_str(),
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("Could not sign the Bedrock request: {e}"))?;
    let (instructions, _signature) =
        sign(signable, &params).map_err(|e| format!("Could not sign the Bedrock request: {e}"))?.into_parts();
    Ok(instructions.headers().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn standard_endpoints_name_their_region() {
        assert_eq!(
            standard_endpoint_region("https://bedrock-runtime.eu-central-1.amazonaws.com").as_deref(),
            Some("eu-central-1")
        );
        assert_eq!(
            standard_endpoint_region("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com/").as_deref(),
            Some("us-gov-west-1")
        );
        assert_eq!(
            standard_endpoint_region("https://bedrock-runtime.cn-north-1.amazonaws.com.cn").as_deref(),
            Some("cn-north-1")
        );
        assert_eq!(standard_endpoint_region("http://127.0.0.1:8080"), None);
        assert_eq!(standard_endpoint_region("not a url"), None);
    }

    #[test]
    fn arn_model_ids_carry_a_region() {
        assert_eq!(
            arn_region("arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(arn_region("arn:aws-us-gov:bedrock:us-gov-west-1:1:x").as_deref(), Some("us-gov-west-1"));
        assert_eq!(arn_region("anthropic.claude-sonnet-4-5-20250929-v1:0"), None);
        assert_eq!(arn_region("arn:aws:s3:us-east-1:1:x"), None);
    }

    #[test]
    fn labels_are_encoded_like_the_sdk() {
        assert_eq!(
            encode_label("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0"
        );
        assert_eq!(encode_label("arn:aws:bedrock:x/y(1)!"), "arn%3Aaws%3Abedrock%3Ax%2Fy%281%29%21");
    }

    #[test]
    fn sigv4_headers_have_the_expected_shape() {
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", Some("session-token".into()), None, "test");
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        let signed = sigv4_headers(
            &credentials,
            "eu-west-1",
            "http://127.0.0.1:4000/model/amazon.nova-pro-v1%3A0/converse-stream",
            &headers,
            b"{}",
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600),
        )
        .unwrap();
        let get = |name: &str| signed.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let authorization = get("authorization").unwrap();
        assert!(
            authorization
                .starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/eu-west-1/bedrock/aws4_request, "),
            "{authorization}"
        );
        assert!(authorization
            .contains("SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "));
        let signature = authorization.rsplit("Signature=").next().unwrap();
        assert_eq!(signature.len(), 64);
        assert!(signature.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(get("x-amz-date").as_deref(), Some("20260101T000000Z"));
        assert_eq!(get("x-amz-security-token").as_deref(), Some("session-token"));
        assert!(!authorization.contains("secret"));
    }

    /// The same request signed by the reference SDK's signer (`@smithy/signature-v4`, as pi-ai's
    /// Bedrock client uses it) at the same instant gives the same signature: canonical request,
    /// double-encoded path (`%3A`), payload hash header and session token all agree.
    #[test]
    fn signature_matches_the_reference_signer() {
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", Some("session-token".into()), None, "test");
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        let signed = sigv4_headers(
            &credentials,
            "eu-west-1",
            "http://127.0.0.1:4000/model/amazon.nova-pro-v1%3A0/converse-stream",
            &headers,
            b"{}",
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600),
        )
        .unwrap();
        let get = |name: &str| signed.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        assert_eq!(
            get("authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/eu-west-1/bedrock/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, \
                 Signature=21b0a26778b23506327c6b4532d2b577ee686e0843962d7f643e0951d47c9ced"
            )
        );
        assert_eq!(
            get("x-amz-content-sha256"),
            Some("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
        );
    }

    #[test]
    fn a_url_without_a_host_is_an_error_not_a_panic() {
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        for url in ["/model/x/converse-stream", "file:///x", "nonsense"] {
            let error = sigv4_headers(&credentials, "us-east-1", url, &[], b"", SystemTime::now()).unwrap_err();
            assert!(error.starts_with("Invalid Bedrock endpoint URL"), "{error}");
        }
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let sigv4 =
            Auth::SigV4(Credentials::new("AKIDEXAMPLE", "very-secret-key", Some("tok-secret".into()), None, "t"));
        let bearer = Auth::Bearer("bearer-secret-token".into());
        let text = format!("{sigv4:?} {bearer:?}");
        assert!(!text.contains("very-secret-key") && !text.contains("bearer-secret-token"), "{text}");
        assert!(!text.contains("tok-secret"), "{text}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod target_tests {
    use std::sync::Arc;

    use super::*;

    fn options(pairs: &[(&str, &str)]) -> StreamOptions {
        let env = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        StreamOptions { env: Some(Arc::new(env)), ..Default::default() }
    }

    fn model(id: &str, base_url: &str) -> Model {
        let mut model = Model::new(id).with_api("bedrock-converse-stream").with_provider("amazon-bedrock");
        model.base_url = base_url.into();
        model
    }

    #[tokio::test]
    async fn regions_and_endpoints() {
        let standard = "https://bedrock-runtime.us-east-1.amazonaws.com";
        // A configured region wins over the catalog's standard endpoint.
        let t = target(&model("amazon.nova-pro-v1:0", standard), &options(&[("AWS_REGION", "eu-west-3")])).await;
        assert_eq!(t.region, "eu-west-3");
        assert_eq!(
            t.url,
            "https://bedrock-runtime.eu-west-3.amazonaws.com/model/amazon.nova-pro-v1%3A0/converse-stream"
        );
        // A custom endpoint is kept; an ARN's region signs.
        let arn = "arn:aws:bedrock:ap-south-1:123:application-inference-profile/x";
        let t = target(&model(arn, "https://proxy.example/bedrock/"), &options(&[("AWS_REGION", "eu-west-3")])).await;
        assert_eq!(t.region, "ap-south-1");
        assert!(t.url.starts_with("https://proxy.example/bedrock/model/arn%3Aaws%3Abedrock%3A"), "{}", t.url);
        // Nothing configured: the standard endpoint and its region.
        let t = target(&model("x", "https://bedrock-runtime.eu-central-1.amazonaws.com"), &options(&[])).await;
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            assert_eq!(t.region, "eu-central-1");
            assert_eq!(t.url, "https://bedrock-runtime.eu-central-1.amazonaws.com/model/x/converse-stream");
        }
    }

    #[tokio::test]
    async fn auth_sources_in_order() {
        let keys = [("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "s")];
        let bearer = StreamOptions { api_key: Some("key".into()), ..options(&keys) };
        assert!(
            matches!(resolve(&Model::default(), &bearer, "us-east-1").await.unwrap(), Auth::Bearer(t) if t == "key")
        );
        let env_bearer = options(&[("AWS_BEARER_TOKEN_BEDROCK", "tok"), keys[0], keys[1]]);
        assert!(
            matches!(resolve(&Model::default(), &env_bearer, "us-east-1").await.unwrap(), Auth::Bearer(t) if t == "tok")
        );
        let skip = StreamOptions { api_key: Some("key".into()), ..options(&[("AWS_BEDROCK_SKIP_AUTH", "1")]) };
        assert!(
            matches!(resolve(&Model::default(), &skip, "us-east-1").await.unwrap(), Auth::SigV4(c) if c.access_key_id() == "dummy-access-key")
        );
        match resolve(&Model::default(), &options(&keys), "us-east-1").await.unwrap() {
            Auth::SigV4(c) => assert_eq!((c.access_key_id(), c.secret_access_key()), ("AKID", "s")),
            Auth::Bearer(_) => panic!("keys sign"),
        }
    }
}
