//! GitHub Copilot sign-in (`github-copilot`), as the reference's flow does it:
//!
//! 1. The user names a GitHub Enterprise domain, or none for `github.com`.
//! 2. Device code (RFC 8628): `POST https://<domain>/login/device/code` (`client_id`,
//!    `scope=read:user`), then `POST https://<domain>/login/oauth/access_token` every interval,
//!    waiting one interval before the first poll, until a GitHub access token is granted.
//! 3. Token exchange: `GET https://api.<domain>/copilot_internal/v2/token` with the GitHub token
//!    as bearer answers the Copilot token (`token`, `expires_at` in seconds). The GitHub token
//!    is stored as `refresh`, the Copilot token as `access`, expiring five minutes before
//!    `expires_at`; an enterprise domain is kept as `enterpriseUrl`.
//! 4. Per-account base URL: the Copilot token's `proxy-ep=proxy.X` names the account's API host
//!    `https://api.X`; without one, `https://copilot-api.<enterprise domain>` or
//!    `https://api.individual.githubcopilot.com`. `GET <base>/models` lists the account's
//!    models (`availableModelIds`, `availableClassifierModelIds`); models whose policy is
//!    `unconfigured` are enabled by `POST <base>/models/<id>/policy` (best effort).
//! 5. Refresh repeats steps 3 and 4 (without enabling models).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::device::{poll_device_code, Poll};
use super::web::{self, route, text_field, trusted_http_url};
use super::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, ModelAuth, OAuthCredential, OAuthFlow};

/// The public OAuth client id of the Copilot editor plugins.
pub const CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// The base URL of individual accounts whose token names none.
pub const DEFAULT_BASE_URL: &str = "https://api.individual.githubcopilot.com";
const USER_AGENT: &str = "GitHubCopilotChat/0.35.0";
const COPILOT_HEADERS: [(&str, &str); 4] = [
    ("User-Agent", USER_AGENT),
    ("Editor-Version", "vscode/1.107.0"),
    ("Editor-Plugin-Version", "copilot-chat/0.35.0"),
    ("Copilot-Integration-Id", "vscode-chat"),
];
const API_VERSION: &str = "2026-06-01";
const FIVE_MINUTES_MS: u64 = 5 * 60 * 1000;
/// Each models or policy request's limit (the reference's five seconds).
const MODELS_TIMEOUT: Duration = Duration::from_secs(5);

/// The flow, against the real hosts or a test's stand-in.
#[derive(Clone, Debug, Default)]
pub struct GitHubCopilotOAuth {
    via: Option<String>,
    http_client: Option<reqwest::Client>,
}

/// A domain typed by the user (`company.ghe.com`, `https://company.ghe.com/x`): its host name.
fn normalize_domain(input: &str) -> Option<String> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return None;
    }
    let text = if trimmed.contains("://") { trimmed.to_owned() } else { format!("https://{trimmed}") };
    reqwest::Url::parse(&text).ok()?.host_str().map(str::to_owned)
}

/// The account's API base URL (step 4 of the module docs).
pub fn base_url(copilot_token: &str, enterprise_domain: Option<&str>) -> String {
    let from_token =
        copilot_token.split(';').find_map(|part| part.strip_prefix("proxy-ep=")).filter(|host| !host.is_empty()).map(
            |host| format!("https://{}", host.strip_prefix("proxy.").map_or(host.to_owned(), |h| format!("api.{h}"))),
        );
    match (from_token, enterprise_domain) {
        (Some(url), _) => url,
        (None, Some(domain)) => format!("https://copilot-api.{domain}"),
        (None, None) => DEFAULT_BASE_URL.into(),
    }
}

fn enterprise_domain(credential: &OAuthCredential) -> Option<String> {
    credential.extra_str("enterpriseUrl").and_then(normalize_domain)
}

/// The account's model lists, as the reference reads `GET /models`.
struct AccountModels {
    available: Vec<String>,
    classifiers: Vec<String>,
    to_enable: Vec<String>,
}

fn parse_models(raw: &Value, allow_policy_fallback: bool) -> Result<AccountModels, String> {
    let data = raw.get("data").and_then(Value::as_array).ok_or("Invalid Copilot models response")?;
    struct Entry<'a> {
        id: &'a str,
        kind: Option<&'a str>,
        picker: bool,
        policy: Option<&'a str>,
    }
    let entries: Vec<Entry<'_>> = data
        .iter()
        .filter_map(|item| {
            let id = item.get("id")?.as_str()?;
            let capabilities = item.get("capabilities");
            if capabilities.and_then(|c| c.get("supports")).and_then(|s| s.get("tool_calls")) == Some(&json!(false)) {
                return None;
            }
            Some(Entry {
                id,
                kind: capabilities.and_then(|c| c.get("type")).and_then(Value::as_str),
                picker: item.get("model_picker_enabled") == Some(&json!(true)),
                policy: item.get("policy").and_then(|p| p.get("state")).and_then(Value::as_str),
            })
        })
        .collect();
    let ids = |keep: &dyn Fn(&Entry<'_>) -> bool| entries.iter().filter(|e| keep(e)).map(|e| e.id.to_owned()).collect();
    let classifiers = ids(&|e| e.kind == Some("decisions") && e.policy != Some("disabled"));
    let picker: Vec<String> = ids(&|e| e.picker && e.policy != Some("disabled"));
    let fallback = allow_policy_fallback && picker.is_empty();
    let catalog = crate::catalog::models("github-copilot");
    let to_enable =
        ids(&|e| e.policy == Some("unconfigured") && catalog.iter().any(|m| m.id == e.id) && (e.picker || fallback));
    let available = if fallback { ids(&|e| e.policy == Some("enabled")) } else { picker };
    Ok(AccountModels { available, classifiers, to_enable })
}

fn failed(answer: &web::Answer) -> String {
    let reason = reqwest::StatusCode::from_u16(answer.status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    format!("{} {reason}: {}", answer.status, answer.text())
}

impl GitHubCopilotOAuth {
    /// Send every request to `<origin>/<host>/<path>` in place of `https://<host>/<path>` (a
    /// test's stand-in for all of GitHub's hosts).
    pub fn routed_through(mut self, origin: impl Into<String>) -> Self {
        self.via = Some(origin.into());
        self
    }

    /// Send requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    fn url(&self, url: &str) -> String {
        route(self.via.as_deref(), url)
    }

    fn client(&self) -> Result<reqwest::Client, String> {
        web::client(self.http_client.as_ref())
    }

    /// A form POST to GitHub answered in JSON; a failed status is an error.
    async fn github_form(&self, url: &str, form: &[(&str, &str)]) -> Result<Value, String> {
        let request = self
            .client()?
            .post(self.url(url))
            .header("Accept", "application/json")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("User-Agent", USER_AGENT)
            .body(crate::api::support::form_encode(form));
        let answer = web::send(request, web::REQUEST_TIMEOUT).await?;
        if !answer.ok() {
            return Err(failed(&answer));
        }
        answer.json().ok_or_else(|| "Invalid device code response".to_owned())
    }

    /// Steps 2 of the module docs: the GitHub access token.
    async fn device_login(&self, domain: &str, interaction: &dyn AuthInteraction) -> Result<String, String> {
        let client_form = [("client_id", CLIENT_ID), ("scope", "read:user")];
        let device = self.github_form(&format!("https://{domain}/login/device/code"), &client_form).await?;
        let string = |key: &str| device.get(key).and_then(Value::as_str).map(str::to_owned);
        let interval = device.get("interval");
        let (Some(device_code), Some(user_code), Some(verification), Some(expires_in)) = (
            string("device_code"),
            string("user_code"),
            string("verification_uri"),
            device.get("expires_in").and_then(Value::as_f64),
        ) else {
            return Err("Invalid device code response fields".into());
        };
        if interval.is_some_and(|i| !i.is_number()) {
            return Err("Invalid device code response fields".into());
        }
        let verification_uri = trusted_http_url(Some(&Value::String(verification)))
            .ok_or("Untrusted verification_uri in device code response")?;
        let interval = interval.and_then(Value::as_f64);
        interaction.notify(AuthEvent::DeviceCode {
            user_code,
            verification_uri,
            interval_seconds: interval.map(|i| i.max(0.0) as u64),
            expires_in_seconds: Some(expires_in.max(0.0) as u64),
        });
        let token_url = format!("https://{domain}/login/oauth/access_token");
        let form = [
            ("client_id", CLIENT_ID),
            ("device_code", device_code.as_str()),
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
        ];
        poll_device_code(interval, Some(expires_in), true, || async {
            let raw = self.github_form(&token_url, &form).await?;
            if let Some(token) = raw.get("access_token").and_then(Value::as_str) {
                return Ok(Poll::Complete(token.to_owned()));
            }
            Ok(match raw.get("error").and_then(Value::as_str) {
                Some("authorization_pending") => Poll::Pending,
                Some("slow_down") => Poll::SlowDown(raw.get("interval").and_then(Value::as_f64)),
                Some(error) => {
                    let description =
                        text_field(&raw, "error_description").map(|d| format!(": {d}")).unwrap_or_default();
                    Poll::Failed(format!("Device flow failed: {error}{description}"))
                }
                None => Poll::Failed("Invalid device token response".into()),
            })
        })
        .await
    }

    /// Step 3: the Copilot token for a GitHub token.
    async fn copilot_token(&self, github_token: &str, enterprise: Option<&str>) -> Result<OAuthCredential, String> {
        let domain = enterprise.unwrap_or("github.com");
        let mut request = self
            .client()?
            .get(self.url(&format!("https://api.{domain}/copilot_internal/v2/token")))
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {github_token}"));
        for (name, value) in COPILOT_HEADERS {
            request = request.header(name, value);
        }
        let answer = web::send(request, web::REQUEST_TIMEOUT).await?;
        if !answer.ok() {
            return Err(failed(&answer));
        }
        let raw = answer.json().filter(Value::is_object).ok_or("Invalid Copilot token response")?;
        let (Some(token), Some(expires_at)) =
            (raw.get("token").and_then(Value::as_str), raw.get("expires_at").and_then(Value::as_f64))
        else {
            return Err("Invalid Copilot token response fields".into());
        };
        let expires = web::expiry(0, expires_at, FIVE_MINUTES_MS);
        let mut credential = OAuthCredential::new(token, github_token, expires);
        if let Some(domain) = enterprise {
            credential.extra.insert("enterpriseUrl".into(), json!(domain));
        }
        Ok(credential)
    }

    /// A request to the account's API, retried on 429 at most `retries` times within
    /// `budget` (after `Retry-After`, else 0.5 s doubling).
    async fn copilot_request(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
        retries: u32,
        budget: Duration,
    ) -> Result<web::Answer, String> {
        let client = self.client()?;
        let started = std::time::Instant::now();
        for retry in 0u32.. {
            let answer = web::send(build(&client), MODELS_TIMEOUT).await?;
            if answer.status != 429 || retry >= retries {
                return Ok(answer);
            }
            let delay = match answer.retry_after.as_deref().map(str::trim) {
                Some(text) => match text.parse::<f64>() {
                    Ok(seconds) if seconds.is_finite() => Duration::from_secs_f64(seconds.clamp(0.0, 3600.0)),
                    Ok(_) => return Ok(answer),
                    Err(_) => match httpdate::parse_http_date(text) {
                        Ok(at) => at.duration_since(std::time::SystemTime::now()).unwrap_or_default(),
                        Err(_) => return Ok(answer),
                    },
                },
                None => Duration::from_millis(500u64.saturating_mul(1u64 << retry.min(20))),
            };
            if delay >= budget.saturating_sub(started.elapsed()) {
                return Ok(answer);
            }
            tokio::time::sleep(delay).await;
        }
        Err("unreachable retry loop".into())
    }

    /// Step 4: the account's models.
    async fn account_models(
        &self,
        token: &str,
        enterprise: Option<&str>,
        retries: u32,
        budget: Duration,
    ) -> Result<AccountModels, String> {
        let base = base_url(token, enterprise);
        let url = self.url(&format!("{base}/models"));
        let answer = self
            .copilot_request(
                |client| {
                    let mut request = client
                        .get(&url)
                        .header("Accept", "application/json")
                        .header("Authorization", format!("Bearer {token}"))
                        .header("X-GitHub-Api-Version", API_VERSION);
                    for (name, value) in COPILOT_HEADERS {
                        request = request.header(name, value);
                    }
                    request
                },
                retries,
                budget,
            )
            .await?;
        if !answer.ok() {
            return Err(failed(&answer));
        }
        parse_models(&answer.json().unwrap_or(Value::Null), base == DEFAULT_BASE_URL)
    }

    /// Enable `ids` for the account; the ones that were. A 429 after the retries ends the batch.
    async fn enable_models(&self, token: &str, enterprise: Option<&str>, ids: &[String]) -> Vec<String> {
        let base = base_url(token, enterprise);
        let mut enabled = Vec::new();
        for id in ids {
            let url = self.url(&format!("{base}/models/{id}/policy"));
            let answer = self
                .copilot_request(
                    |client| {
                        let mut request = client
                            .post(&url)
                            .header("Content-Type", "application/json")
                            .header("Authorization", format!("Bearer {token}"))
                            .header("openai-intent", "chat-policy")
                            .header("x-interaction-type", "chat-policy")
                            .body(json!({"state": "enabled"}).to_string());
                        for (name, value) in COPILOT_HEADERS {
                            request = request.header(name, value);
                        }
                        request
                    },
                    2,
                    Duration::from_secs(5),
                )
                .await;
            match answer {
                Ok(answer) if answer.status == 429 => break,
                Ok(answer) if answer.ok() => enabled.push(id.clone()),
                _ => {}
            }
        }
        enabled
    }
}

fn with_models(mut credential: OAuthCredential, available: Vec<String>, classifiers: Vec<String>) -> OAuthCredential {
    let list = |ids: Vec<String>| Value::Array(ids.into_iter().map(Value::String).collect());
    credential.extra.insert("availableModelIds".into(), list(available));
    credential.extra.insert("availableClassifierModelIds".into(), list(classifiers));
    credential
}

impl OAuthFlow for GitHubCopilotOAuth {
    fn name(&self) -> &str {
        "GitHub Copilot"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let input = interaction
                .prompt(AuthPrompt::Text {
                    message: "GitHub Enterprise URL/domain (blank for github.com)".into(),
                    placeholder: Some("company.ghe.com".into()),
                })
                .await?;
            let enterprise = normalize_domain(&input);
            if !input.trim().is_empty() && enterprise.is_none() {
                return Err(AuthError::Login("Invalid GitHub Enterprise URL/domain".into()));
            }
            let enterprise = enterprise.as_deref();
            let domain = enterprise.unwrap_or("github.com");
            let github_token = self.device_login(domain, interaction).await.map_err(AuthError::Login)?;
            let credential = self.copilot_token(&github_token, enterprise).await.map_err(AuthError::Login)?;
            let token = credential.access.expose().to_owned();
            let models =
                self.account_models(&token, enterprise, 2, Duration::from_secs(5)).await.map_err(AuthError::Login)?;
            let mut available = models.available;
            if !models.to_enable.is_empty() {
                interaction.notify(AuthEvent::Progress("Enabling models...".into()));
                for id in self.enable_models(&token, enterprise, &models.to_enable).await {
                    if !available.contains(&id) {
                        available.push(id);
                    }
                }
            }
            Ok(with_models(credential, available, models.classifiers))
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move {
            let enterprise = enterprise_domain(credential);
            let enterprise = enterprise.as_deref();
            let fresh = self.copilot_token(credential.refresh.expose(), enterprise).await?;
            let models = self.account_models(fresh.access.expose(), enterprise, 0, Duration::ZERO).await?;
            Ok(with_models(fresh, models.available, models.classifiers))
        })
    }

    fn to_auth(&self, credential: &OAuthCredential) -> ModelAuth {
        let enterprise = enterprise_domain(credential);
        ModelAuth {
            api_key: Some(credential.access.clone()),
            base_url: Some(base_url(credential.access.expose(), enterprise.as_deref())),
            ..ModelAuth::default()
        }
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(GitHubCopilotOAuth::default())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_comes_from_the_token_then_the_enterprise_domain() {
        assert_eq!(
            base_url("tid=1;proxy-ep=proxy.business.githubcopilot.com;x=y", None),
            "https://api.business.githubcopilot.com"
        );
        assert_eq!(base_url("tid=1", Some("company.ghe.com")), "https://copilot-api.company.ghe.com");
        assert_eq!(base_url("tid=1", None), DEFAULT_BASE_URL);
        assert_eq!(normalize_domain(" https://company.ghe.com/login "), Some("company.ghe.com".into()));
        assert_eq!(normalize_domain("company.ghe.com"), Some("company.ghe.com".into()));
        assert_eq!(normalize_domain("  "), None);
    }

    #[test]
    fn individual_accounts_fall_back_to_enabled_policies() {
        let raw = json!({"data": [
            {"id": "a", "model_picker_enabled": false, "policy": {"state": "enabled"}},
            {"id": "d", "capabilities": {"type": "decisions"}, "policy": {"state": "enabled"}},
            {"id": "x", "model_picker_enabled": false, "policy": {"state": "disabled"}}
        ]});
        let strict = parse_models(&raw, false).unwrap();
        assert!(strict.available.is_empty());
        assert_eq!(strict.classifiers, vec!["d"]);
        let fallback = parse_models(&raw, true).unwrap();
        assert_eq!(fallback.available, vec!["a", "d"]);
        assert!(parse_models(&json!({}), true).is_err());
    }
}
