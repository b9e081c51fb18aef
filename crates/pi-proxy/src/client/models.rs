//! [`ProxyStreamFn::models`]: the server's `GET /api/models`.

use std::time::Duration;

use futures::StreamExt;
use pi_types::Model;

use super::{deepest_cause, js_string, ProxyStreamFn};
use crate::wire::ModelList;
use crate::ProxyError;

/// Time allowed for the whole request, answer included.
pub const MODELS_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read: the whole built-in catalog is about 1 MB.
const MAX_LIST_BYTES: usize = 32 * 1024 * 1024;

impl ProxyStreamFn {
    /// The models the server serves (`GET {proxy_url}/api/models`, a [`ModelList`]), each
    /// ready to be passed to [`pi_types::StreamFn::stream`]: with the server's `baseUrl` and
    /// `api`, so the server accepts it, also for a model only the server defines.
    ///
    /// Waits at most [`MODELS_TIMEOUT`]. Errors read like the stream's: `Proxy error: …` for
    /// a refusal (`Proxy error: Invalid token`), `fetch failed: …` when the server cannot be
    /// reached; they never carry the token.
    pub async fn models(&self) -> Result<Vec<Model>, ProxyError> {
        let base = self.endpoint.strip_suffix("/api/stream").unwrap_or(&self.endpoint);
        let url = format!("{base}/api/models");
        let result = match tokio::time::timeout(MODELS_TIMEOUT, self.fetch_models(&url)).await {
            Ok(result) => result,
            Err(_) => Err(format!("Proxy error: no answer from {url} in {} s", MODELS_TIMEOUT.as_secs())),
        };
        result.map(|list| list.models).map_err(|message| {
            let message = if self.token.is_empty() { message } else { message.replace(&*self.token, "<redacted>") };
            ProxyError::Request(pi_providers::bound_error_message(message))
        })
    }

    async fn fetch_models(&self, url: &str) -> Result<ModelList, String> {
        let mut options = pi_types::StreamOptions::default();
        self.fill_client(&mut options);
        let client = pi_providers::transport::client::of_options(&options)?;
        let response = client
            .get(url)
            .header(reqwest::header::AUTHORIZATION, format!("Bearer {}", self.token))
            .send()
            .await
            .map_err(|error| format!("fetch failed: {}", deepest_cause(&error)))?;
        let status = response.status();
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|error| format!("terminated: {}", deepest_cause(&error)))?;
            if body.len() + chunk.len() > MAX_LIST_BYTES {
                return Err(format!("Proxy error: the model list is larger than {MAX_LIST_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let error = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v.get("error").cloned());
            return Err(match error {
                Some(error) if pi_types::json::js::truthy(&error) => format!("Proxy error: {}", js_string(&error)),
                _ => format!("Proxy error: {} {}", status.as_u16(), status.canonical_reason().unwrap_or("")),
            });
        }
        serde_json::from_slice(&body).map_err(|error| format!("Proxy error: invalid model list: {error}"))
    }
}
