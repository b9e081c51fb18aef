//! `GET /api/models` and `ProxyStreamFn::models`: token holders see what the server serves,
//! without the server's headers, and can stream a model only the server defines.

use std::sync::Arc;

use futures::StreamExt;
use pi_providers::faux::{faux_assistant_message, faux_text};
use pi_providers::{Auth, Provider};
use pi_proxy::{ProxyError, ProxyStreamFn};
use pi_types::{Message, Model, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage};

use crate::support::{config_with, faux, Stall, TestServer, TOKEN};

/// The faux provider's models as a server-only provider `house` with a secret header.
fn house(faux: &pi_providers::faux::FauxProvider) -> (Provider, Vec<Model>) {
    let models: Vec<Model> = faux
        .models()
        .into_iter()
        .map(|model| Model {
            provider: "house".into(),
            base_url: "http://10.0.0.5:8000/v1".into(),
            headers: Some([("x-house-key".to_owned(), "s3cret-header-value".to_owned())].into_iter().collect()),
            ..model
        })
        .collect();
    let provider = Provider::new("house")
        .with_auth(Auth::None)
        .with_models(models.clone())
        .with_api(faux.api(), Arc::new(faux.clone()));
    (provider, models)
}

async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let client = pi_providers::http_client().expect("http client");
    let mut request = client.get(format!("{url}/api/models"));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = request.send().await.expect("response");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn token_holders_get_the_served_models_without_headers() {
    let faux = faux();
    let (provider, models) = house(&faux);
    let stall = Stall::default();
    let server = TestServer::start(config_with(vec![provider, stall.provider()])).await;

    assert_eq!(get(&server.url, None).await, (401, r#"{"error":"Missing bearer token"}"#.to_owned()));
    assert_eq!(
        get(&server.url, Some("wrong-token-0123456789")).await,
        (401, r#"{"error":"Invalid token"}"#.to_owned())
    );
    let (status, body) = get(&server.url, Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("s3cret") && !body.contains("x-house-key"), "{body}");

    let listed = ProxyStreamFn::new(&server.url, TOKEN).models().await.expect("models");
    let expected: Vec<Model> = models
        .iter()
        .cloned()
        .map(|model| Model { headers: None, ..model })
        .chain(std::iter::once(Stall::model()))
        .collect();
    assert_eq!(listed, expected);
}

#[tokio::test]
async fn a_listed_model_streams_through_the_server() {
    let faux = faux();
    let (provider, _) = house(&faux);
    let server = TestServer::start(config_with(vec![provider])).await;
    let proxy = ProxyStreamFn::new(&server.url, TOKEN);
    let model = proxy.models().await.expect("models").into_iter().next().expect("one model");
    assert_eq!((model.provider.as_str(), model.base_url.as_str()), ("house", "http://10.0.0.5:8000/v1"));
    faux.set_responses([faux_assistant_message(vec![faux_text("Served.")], StopReason::Stop).into()]);
    let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text("hi"))]);
    let events: Vec<_> = proxy.stream(&model, context, StreamOptions::default()).collect().await;
    let last = events.last().and_then(|e| e.final_message()).expect("final message");
    assert_eq!((last.stop_reason, last.error_message.as_deref()), (StopReason::Stop, None));
    assert_eq!(last.content.len(), 1);
}

#[tokio::test]
async fn failures_read_like_the_stream_and_never_carry_the_token() {
    let server = TestServer::start(config_with(vec![Stall::default().provider()])).await;
    let wrong = "wrong-token-0123456789";
    match ProxyStreamFn::new(&server.url, wrong).models().await {
        Err(ProxyError::Request(message)) => assert_eq!(message, "Proxy error: Invalid token"),
        other => panic!("{other:?}"),
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    match ProxyStreamFn::new(format!("http://127.0.0.1:{port}"), wrong).models().await {
        Err(ProxyError::Request(message)) => {
            assert!(message.starts_with("fetch failed: ") && !message.contains(wrong), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

/// A served model carrying four planted credentials: a known key in its `baseUrl` query, a
/// password in its `baseUrl`, an unknown field `apiKey` and a `compat` value.
#[tokio::test]
async fn the_listing_carries_no_credentials_and_its_models_still_stream() {
    const KNOWN: &str = "sk-known-planted-0123456789";
    const PASSWORD: &str = "hunter2-planted-password";
    const FIELD: &str = "sk-field-planted-0123456789";
    const COMPAT: &str = "sk-compat-planted-0123456789";
    let faux = faux();
    let models: Vec<Model> = faux
        .models()
        .into_iter()
        .map(|model| {
            let mut model = Model {
                provider: "house".into(),
                base_url: format!("http://bob:{PASSWORD}@10.0.0.5:8000/v1?key={KNOWN}"),
                compat: Some([("token".to_owned(), serde_json::json!(COMPAT))].into_iter().collect()),
                ..model
            };
            model.extra.insert("apiKey".into(), serde_json::json!(FIELD));
            model
        })
        .collect();
    let provider =
        Provider::new("house").with_auth(Auth::None).with_models(models).with_api(faux.api(), Arc::new(faux.clone()));
    let mut config = config_with(vec![provider]);
    config.redaction.add(KNOWN);
    let server = TestServer::start(config).await;
    let (status, body) = get(&server.url, Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    for planted in [KNOWN, PASSWORD, FIELD, COMPAT, "apiKey", "compat"] {
        assert!(!body.contains(planted), "{planted} in {body}");
    }
    // The listed model, sent back as it came, is still the server's model.
    let proxy = ProxyStreamFn::new(&server.url, TOKEN);
    let model = proxy.models().await.expect("models").into_iter().next().expect("one model");
    assert_eq!(model.base_url, "http://<redacted>@10.0.0.5:8000/v1?<redacted>");
    faux.set_responses([faux_assistant_message(vec![faux_text("Served.")], StopReason::Stop).into()]);
    let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text("hi"))]);
    let events: Vec<_> = proxy.stream(&model, context, StreamOptions::default()).collect().await;
    let last = format!("{:?}", events.last());
    assert!(last.contains("Served."), "{last}");
}
