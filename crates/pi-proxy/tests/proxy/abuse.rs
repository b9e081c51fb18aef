//! What a hostile client or a careless upstream could do to the server: make it echo its own
//! credentials, hold its stream slots with slow bodies, flood it with big bodies or idle
//! connections, or run up its bill. Small limits keep each case to a few seconds.

use std::sync::Arc;

use pi_providers::{Auth, Provider};
use pi_proxy::ProxyStreamFn;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext,
};

use crate::loopback::{with_length, Server, Step};
use crate::support::{config_with, TestServer, TOKEN};

const ECHO_KEY_VAR: &str = "PI_PROXY_TEST_ECHO_KEY";
const ECHO_KEY: &str = "sk-echo-server-key-0123456789\"abc/+=";

/// An upstream's 401 that quotes the request it got: the key as is, JSON-escaped (inside a
/// JSON body), URL-encoded, and a runtime `Bearer` token the server never saw.
fn echoing_body() -> Vec<u8> {
    let url_key: String = url_encode(ECHO_KEY);
    let request = serde_json::json!({
        "headers": {"authorization": [format!("Bearer {ECHO_KEY}")], "x-oauth": "Bearer ya29.runtime-token-xyz"},
        "url": format!("http://upstream/v1/chat?key={url_key}")
    });
    let body = format!("Unauthorized: key {ECHO_KEY} refused. Your request: {request}");
    with_length(401, "text/plain", "", body.as_bytes())
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[tokio::test]
async fn an_upstream_error_echoing_the_servers_key_reaches_the_client_redacted() {
    std::env::set_var(ECHO_KEY_VAR, ECHO_KEY);
    let upstream = Server::start(vec![Step::Bytes(echoing_body())]).await;
    let model = Model { base_url: upstream.url.clone(), ..Model::new("echo-1", "openai-completions", "echo") };
    let provider =
        Provider::new("echo").with_auth(Auth::Env(vec![ECHO_KEY_VAR.into()])).with_model(model.clone()).with_http_apis();
    let mut config = config_with(vec![provider]);
    config.redaction.env.push(ECHO_KEY_VAR.into());
    let server = TestServer::start(config).await;
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    assert_eq!(message.stop_reason, StopReason::Error);
    let text = message.error_message.as_deref().unwrap_or_default();
    // The upstream did get the key (so it was there to leak).
    assert!(upstream.heads.lock().expect("heads")[0].contains("sk-echo-server-key"));
    assert!(text.starts_with("401 "), "{text}");
    for leak in ["0123456789", "runtime-token", "sk-echo"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    assert!(text.matches("<redacted>").count() >= 4, "{text}");
}

/// An upstream (user code) that ends with a 10 MiB error text holding the key near its end and
/// a text delta quoting it.
#[derive(Clone)]
struct Careless;

impl StreamFn for Careless {
    fn stream(&self, model: &Model, _: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let key = options.api_key.clone().unwrap_or_default();
        let partial = Arc::new(AssistantMessage { provider: model.provider.clone(), ..Default::default() });
        let mut failed = (*partial).clone();
        failed.stop_reason = StopReason::Error;
        failed.error_message = Some(format!("{}{key}", "x".repeat(10 << 20)).into());
        AssistantMessageEventStream::from_events([
            AssistantMessageEvent::Start { partial: Arc::clone(&partial) },
            AssistantMessageEvent::TextStart { content_index: 0, partial: Arc::clone(&partial) },
            AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: format!("your key is {key}").into(),
                partial: Arc::clone(&partial),
            },
            AssistantMessageEvent::Error { reason: StopReason::Error, error: Arc::new(failed) },
        ])
    }
}

#[tokio::test]
async fn a_provider_quoting_its_key_in_content_or_a_huge_error_is_redacted_and_bounded() {
    let model = Model { base_url: "http://careless.invalid".into(), ..Model::new("c-1", "careless", "careless") };
    let key = "sk-careless-key-0123456789";
    let provider = Provider::new("careless")
        .with_auth(Auth::ApiKey(key.into()))
        .with_model(model.clone())
        .with_api("careless", Arc::new(Careless));
    let mut config = config_with(vec![provider]);
    config.redaction.add(key);
    let server = TestServer::start(config).await;
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    let text = message.error_message.as_deref().unwrap_or_default();
    assert!(text.len() < 5000, "{} bytes", text.len());
    assert!(text.contains("[truncated"), "{}", &text[text.len() - 100..]);
    let content = serde_json::to_string(&message.content).expect("json");
    assert!(content.contains("your key is <redacted>"), "{content}");
    assert!(!content.contains("0123456789") && !text.contains("0123456789"));
}
