//! A proxy server on a loopback port, scripted upstreams, and event normalization.

use std::sync::{Arc, Mutex};

use pi_providers::faux::{FauxOptions, FauxProvider};
use pi_providers::{Auth, Models, Provider};
use pi_proxy::server::{serve, ProxyToken, ServerConfig};
use pi_types::CancellationToken;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext,
};
use serde_json::Value;

pub const TOKEN: &str = "test-token-0123456789";
pub const OTHER_TOKEN: &str = "other-token-0123456789";

/// A running server; shut down on drop.
pub struct TestServer {
    pub url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    pub done: Option<tokio::task::JoinHandle<Result<(), pi_proxy::ProxyError>>>,
}

impl TestServer {
    pub async fn start(config: ServerConfig) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(serve(config, listener, async move {
            let _ = rx.await;
        }));
        Self { url, shutdown: Some(tx), done: Some(done) }
    }

    /// Start shutting down; the handle of the serve task.
    pub fn shutdown(&mut self) -> tokio::task::JoinHandle<Result<(), pi_proxy::ProxyError>> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.done.take().expect("serve task")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A faux provider with fixed chunk sizes, registered as provider `faux`.
pub fn faux() -> FauxProvider {
    FauxProvider::new(FauxOptions::default().with_token_size(1))
}

pub fn config_with(providers: Vec<Provider>) -> ServerConfig {
    let models = Models::new();
    for provider in providers {
        models.set_provider(provider);
    }
    ServerConfig::new(Arc::new(models), vec![ProxyToken::new("tests", TOKEN), ProxyToken::new("other", OTHER_TOKEN)])
}

pub fn faux_provider(faux: &FauxProvider) -> Provider {
    Provider::new(faux.provider_id())
        .with_auth(Auth::None)
        .with_models(faux.models())
        .with_api(faux.api(), Arc::new(faux.clone()))
}

/// An upstream that starts, then waits until cancelled; it keeps the tokens it was given.
#[derive(Clone, Default)]
pub struct Stall {
    pub tokens: Arc<Mutex<Vec<CancellationToken>>>,
}

impl Stall {
    pub fn model() -> Model {
        Model {
            base_url: "http://stall.invalid".into(),
            ..Model::new("stall-1").with_api("stall").with_provider("stall")
        }
    }

    pub fn provider(&self) -> Provider {
        Provider::new("stall").with_model(Self::model()).with_api("stall", Arc::new(self.clone()))
    }

    pub fn cancelled(&self) -> Vec<bool> {
        self.tokens.lock().expect("lock").iter().map(CancellationToken::is_cancelled).collect()
    }
}

impl StreamFn for Stall {
    fn stream(
        &self,
        model: &Model,
        _context: TranscriptContext,
        options: StreamOptions,
    ) -> AssistantMessageEventStream {
        let token = options.cancel.clone().unwrap_or_default();
        self.tokens.lock().expect("lock").push(token.clone());
        let partial = Arc::new(AssistantMessage {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            ..Default::default()
        });
        AssistantMessageEventStream::from_producer(move |tx| async move {
            tx.send(AssistantMessageEvent::Start { partial: Arc::clone(&partial) }).await;
            token.cancelled().await;
            let mut message = (*partial).clone();
            message.stop_reason = StopReason::Aborted;
            message.error_message = Some("Request was aborted".into());
            tx.send(AssistantMessageEvent::Error { reason: StopReason::Aborted, error: Arc::new(message) }).await;
        })
    }
}

/// An event as JSON without what the proxy protocol does not carry.
pub fn normalize(event: &AssistantMessageEvent) -> Value {
    let mut value = serde_json::to_value(event).expect("event JSON");
    let terminal = event.is_terminal();
    if let Some(map) = value.as_object_mut() {
        for key in ["partial", "message", "error"] {
            if let Some(Value::Object(message)) = map.get_mut(key) {
                for field in ["timestamp", "responseId", "responseModel", "diagnostics", "durationMs"] {
                    message.remove(field);
                }
                if !terminal {
                    // The faux provider's partials carry the scripted message's final usage and
                    // error text from the start; the protocol sends them with the terminal event.
                    message.remove("usage");
                    message.remove("errorMessage");
                }
            }
        }
    }
    value
}

/// Every event of a stream, normalized.
pub async fn collect(stream: AssistantMessageEventStream) -> Vec<Value> {
    use futures::StreamExt;
    stream.map(|event| normalize(&event)).collect().await
}

/// POST a raw body with a token; status, headers and body text.
pub async fn post(
    url: &str,
    token: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let client = pi_providers::http_client().expect("http client");
    let mut request = client.post(format!("{url}/api/stream")).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = request.body(body).send().await.expect("response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap_or_default())
}

/// A valid request body for `model`.
pub fn body_for(model: &Model) -> Value {
    serde_json::json!({
        "model": model,
        "context": {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]},
        "options": {}
    })
}

/// SplitMix64: a small, seeded, reproducible generator.
pub struct Rng(pub u64);

#[allow(dead_code)] // Each test binary uses its own part.
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Random bytes, fewer than `max`.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max);
        (0..n).map(|_| self.next() as u8).collect()
    }
}
