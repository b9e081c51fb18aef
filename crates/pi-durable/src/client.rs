//! A client of a Restate server's ingress (runs, steering, follow-ups, transcripts) and admin
//! API (deployments, cancellation), for the services of this crate.

use std::time::Duration;

use pi_types::AgentMessage;
use serde::de::DeserializeOwned;

use crate::service::RunRequest;
use crate::DurableError;

/// Longest wait for a run's result (`run`, `attach`).
const RUN_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Longest wait for every other request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Error bodies quoted in errors are cut to this many bytes.
const BODY_QUOTE: usize = 1000;

/// Talks to one Restate server.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    ingress: String,
    admin: String,
    run_timeout: Duration,
}

/// A run started with [`Client::start`]: its Restate invocation id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunHandle {
    /// The invocation id (`inv_...`), for [`Client::attach`] and [`Client::abort`].
    pub invocation_id: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Accepted {
    invocation_id: String,
}

impl Client {
    /// A client of the server whose ingress listens at `ingress` (e.g. `http://127.0.0.1:8080`)
    /// and admin API at `admin` (e.g. `http://127.0.0.1:9070`).
    pub fn new(ingress: impl Into<String>, admin: impl Into<String>) -> Result<Self, DurableError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| DurableError::Http(e.to_string()))?;
        let trim = |url: String| url.trim_end_matches('/').to_owned();
        Ok(Self { http, ingress: trim(ingress.into()), admin: trim(admin.into()), run_timeout: RUN_TIMEOUT })
    }

    /// Wait at most `timeout` for a run's result (default 30 min).
    pub fn with_run_timeout(mut self, timeout: Duration) -> Self {
        self.run_timeout = timeout;
        self
    }

    /// Register (or re-register) the worker endpoint at `uri` as a deployment.
    pub async fn register(&self, uri: &str) -> Result<(), DurableError> {
        let body = serde_json::json!({ "uri": uri, "force": true });
        let request = self.http.post(format!("{}/deployments", self.admin)).json(&body).timeout(REQUEST_TIMEOUT);
        send(request).await.map(drop)
    }

    /// Run the session's agent on `prompts` and wait for the messages the run added.
    pub async fn run(&self, session: &str, prompts: Vec<AgentMessage>) -> Result<Vec<AgentMessage>, DurableError> {
        let url = format!("{}/PiSession/{}/run", self.ingress, segment(session));
        let request = self.http.post(url).json(&RunRequest { prompts }).timeout(self.run_timeout);
        decode(send(request).await?)
    }

    /// Start a run without waiting for it; `idempotency_key` makes a repeated start the same run.
    pub async fn start(
        &self,
        session: &str,
        prompts: Vec<AgentMessage>,
        idempotency_key: Option<&str>,
    ) -> Result<RunHandle, DurableError> {
        let url = format!("{}/PiSession/{}/run/send", self.ingress, segment(session));
        let mut request = self.http.post(url).json(&RunRequest { prompts }).timeout(REQUEST_TIMEOUT);
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let accepted: Accepted = decode(send(request).await?)?;
        Ok(RunHandle { invocation_id: accepted.invocation_id })
    }

    /// Wait for a started run's added messages.
    pub async fn attach(&self, run: &RunHandle) -> Result<Vec<AgentMessage>, DurableError> {
        let url = format!("{}/restate/invocation/{}/attach", self.ingress, segment(&run.invocation_id));
        decode(send(self.http.get(url).timeout(self.run_timeout)).await?)
    }

    /// Deliver steering messages to the session's running agent (taken at its next turn).
    pub async fn steer(&self, session: &str, messages: Vec<AgentMessage>) -> Result<(), DurableError> {
        self.inbox(session, "steer", messages).await
    }

    /// Deliver follow-up messages to the session's running agent (taken when it would stop).
    pub async fn follow_up(&self, session: &str, messages: Vec<AgentMessage>) -> Result<(), DurableError> {
        self.inbox(session, "follow_up", messages).await
    }

    async fn inbox(&self, session: &str, handler: &str, messages: Vec<AgentMessage>) -> Result<(), DurableError> {
        let url = format!("{}/PiSessionInbox/{}/{handler}", self.ingress, segment(session));
        send(self.http.post(url).json(&messages).timeout(REQUEST_TIMEOUT)).await.map(drop)
    }

    /// Abort a run: cancel its invocation. The run ends at its next step and adds nothing to
    /// the transcript.
    pub async fn abort(&self, run: &RunHandle) -> Result<(), DurableError> {
        let url = format!("{}/invocations/{}/cancel", self.admin, segment(&run.invocation_id));
        send(self.http.patch(url).timeout(REQUEST_TIMEOUT)).await.map(drop)
    }

    /// The session's transcript as of its last finished run.
    pub async fn messages(&self, session: &str) -> Result<Vec<AgentMessage>, DurableError> {
        let url = format!("{}/PiSession/{}/messages", self.ingress, segment(session));
        decode(send(self.http.post(url).timeout(REQUEST_TIMEOUT)).await?)
    }
}

/// A session id or invocation id as one path segment.
fn segment(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>().replace('+', "%20")
}

async fn send(request: reqwest::RequestBuilder) -> Result<bytes::Bytes, DurableError> {
    let response = request.send().await.map_err(|e| DurableError::Http(e.without_url().to_string()))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| DurableError::Http(e.without_url().to_string()))?;
    if !status.is_success() {
        let cut = body.len().min(BODY_QUOTE);
        let text = String::from_utf8_lossy(&body[..cut]).into_owned();
        return Err(DurableError::Status { status: status.as_u16(), body: text });
    }
    Ok(body)
}

fn decode<T: DeserializeOwned>(body: bytes::Bytes) -> Result<T, DurableError> {
    serde_json::from_slice(&body).map_err(|e| DurableError::Decode(e.to_string()))
}
