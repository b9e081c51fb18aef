//! Wrong tokens, foreign base URLs and forbidden headers never reach an upstream: loopback
//! upstreams that count requests see none of them, and then exactly the one valid request.

use std::sync::atomic::Ordering;

use pi_providers::{Auth, Provider};
use pi_proxy::server::FORBIDDEN_HEADERS;
use pi_proxy::ProxyStreamFn;
use pi_types::{Model, StopReason, StreamFn, StreamOptions, TranscriptContext};
use serde_json::{json, Value};

use crate::loopback::{sse_head, Server, Step};
use crate::support::{body_for, config_with, TOKEN};

const SERVER_KEY: &str = "sk-upstream-server-key";

fn completion() -> String {
    [
        r#"data: {"id":"c1","choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
        r#"data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "data: [DONE]",
    ]
    .iter()
    .map(|line| format!("{line}\n\n"))
    .collect()
}

fn error_of(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or_default();
    value["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn refused_requests_never_reach_an_upstream() {
    let upstream = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(completion().into_bytes())]).await;
    let attacker = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(completion().into_bytes())]).await;
    let model = Model {
        base_url: upstream.url.clone(),
        ..Model::new("up-1").with_api("openai-completions").with_provider("up")
    };
    let provider = Provider::new("up").with_auth(Auth::ApiKey(SERVER_KEY.into())).with_model(model.clone());
    let mut config = config_with(vec![provider.with_http_apis()]);
    // Even allow-listed, the forbidden names stay forbidden.
    config.allowed_headers = FORBIDDEN_HEADERS.iter().map(|h| (*h).to_owned()).chain(["x-trace".into()]).collect();
    let server = crate::support::TestServer::start(config).await;
    let valid = body_for(&model);
    let mut refused = 0;
    let mut expect = |status: u16, body: &str, want: u16| {
        assert_eq!(status, want, "{body}");
        assert!(!error_of(body).is_empty(), "{body}");
        refused += 1;
    };

    // Wrong tokens.
    let wrong = [
        String::new(),
        "Bearer".into(),
        "Bearer ".into(),
        format!("Basic {TOKEN}"),
        format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]),
        format!("Bearer {TOKEN}x"),
        format!("Bearer {}", TOKEN.to_uppercase()),
        format!("Bearer  {TOKEN}"),
        format!("Bearer x{TOKEN}"),
        TOKEN.to_owned(),
    ];
    let client = pi_providers::http_client().expect("client");
    for value in &wrong {
        let mut request = client
            .post(format!("{}/api/stream", server.url))
            .header("content-type", "application/json")
            .body(valid.to_string());
        if !value.is_empty() {
            request = request.header("authorization", value.as_str());
        }
        let response = request.send().await.expect("answer");
        let status = response.status().as_u16();
        expect(status, &response.text().await.unwrap_or_default(), 401);
    }
    let message = ProxyStreamFn::new(&server.url, "not-the-token-0123456789")
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    assert_eq!(message.error_message.as_deref(), Some("Proxy error: Invalid token"));

    // Foreign base URLs, APIs, headers and models.
    let foreign = [
        Model { base_url: attacker.url.clone(), ..model.clone() },
        Model { base_url: format!("{}/", upstream.url), ..model.clone() },
        Model { base_url: format!("{}/v1", upstream.url), ..model.clone() },
        Model { base_url: upstream.url.replace("127.0.0.1", "localhost"), ..model.clone() },
        Model { base_url: upstream.url.replace("http://", "http://user:pass@"), ..model.clone() },
        Model { base_url: upstream.url.to_uppercase(), ..model.clone() },
        Model { base_url: format!("{}@{}", upstream.url, attacker.url.trim_start_matches("http://")), ..model.clone() },
        Model { api: "anthropic-messages".into(), ..model.clone() },
        Model {
            headers: Some([("x-forwarded-host".to_owned(), "evil".to_owned())].into_iter().collect()),
            ..model.clone()
        },
        Model { id: "../up-1".into(), ..model.clone() },
        Model { provider: "openai".into(), ..model.clone() },
    ];
    for model in &foreign {
        let (status, _, body) = crate::support::post(&server.url, Some(TOKEN), body_for(model).to_string()).await;
        expect(status, &body, 400);
        let message = ProxyStreamFn::new(&server.url, TOKEN)
            .stream(model, TranscriptContext::default(), StreamOptions::default())
            .result()
            .await
            .expect("final message");
        assert_eq!(message.stop_reason, StopReason::Error);
        assert!(message.error_message.as_deref().unwrap_or_default().starts_with("Proxy error: "));
    }

    // Forbidden headers in any case, and unlisted sampling parameters.
    let mut names: Vec<String> = FORBIDDEN_HEADERS.iter().map(|h| (*h).to_owned()).collect();
    names.extend(FORBIDDEN_HEADERS.iter().map(|h| h.to_uppercase()));
    names.extend(["X-Api-Key", "Proxy-Authorization", "x-unlisted", "authorization "].map(str::to_owned));
    for name in &names {
        let mut body = valid.clone();
        body["options"]["headers"] = json!({ name.as_str(): "Bearer stolen" });
        let (status, _, text) = crate::support::post(&server.url, Some(TOKEN), body.to_string()).await;
        expect(status, &text, 400);
        let mut options = StreamOptions::default();
        options.headers.insert(name.clone(), Some("value".into()));
        let message = ProxyStreamFn::new(&server.url, TOKEN)
            .stream(&model, TranscriptContext::default(), options)
            .result()
            .await
            .expect("final message");
        let expected = format!("Proxy error: Header not allowed: `options.headers.{name}`");
        assert_eq!(message.error_message.as_deref(), Some(expected.as_str()));
    }
    for key in ["model", "messages", "api_key", "base_url", "stream"] {
        let mut body = valid.clone();
        body["options"]["samplingParams"] = json!({ key: "x" });
        let (status, _, text) = crate::support::post(&server.url, Some(TOKEN), body.to_string()).await;
        expect(status, &text, 400);
    }
    assert!(refused >= 40, "{refused}");
    assert_eq!(upstream.requests.load(Ordering::SeqCst), 0, "a refused request reached the upstream");
    assert_eq!(attacker.requests.load(Ordering::SeqCst), 0, "a request reached a foreign origin");

    // The one valid request does reach it, with the server's key and not the client's token.
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(message.text(), "hi");
    assert_eq!(upstream.requests.load(Ordering::SeqCst), 1);
    let heads = upstream.heads.lock().expect("heads").clone();
    assert!(heads[0].contains(&format!("authorization: bearer {SERVER_KEY}")), "{}", heads[0]);
    assert!(!heads[0].contains(&TOKEN.to_lowercase()));
    assert_eq!(attacker.requests.load(Ordering::SeqCst), 0);
}
