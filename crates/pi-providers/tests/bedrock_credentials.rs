//! Bedrock credentials from aws-config's sources: a named profile (which wins over access keys
//! in the process environment) and ECS container credentials. One test, as it sets process
//! environment variables (this binary runs nothing else).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use loopback::{with_length, Server, Step};
use pi_providers::api::bedrock::BedrockConverseStream;
use pi_types::transcript::normalize_context;
use pi_types::{Context, Message, Model, StreamFn, StreamOptions, UserMessage};
use serde_json::json;

fn model(url: &str) -> Model {
    serde_json::from_value(json!({
        "id": "amazon.nova-pro-v1:0",
        "name": "Nova Pro",
        "api": "bedrock-converse-stream",
        "provider": "amazon-bedrock",
        "baseUrl": url,
        "reasoning": false,
        "input": ["text"],
        "cost": {"input": 0.8, "output": 3.2, "cacheRead": 0.2, "cacheWrite": 0},
        "contextWindow": 300000,
        "maxTokens": 10000
    }))
    .unwrap()
}

fn options(env: &[(&str, &str)]) -> StreamOptions {
    StreamOptions {
        max_retries: Some(0),
        timeout_ms: Some(5000),
        idle_timeout_ms: Some(5000),
        env: Some(Arc::new(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())),
        ..Default::default()
    }
}

/// The `authorization` header the server saw for one request of the adapter.
async fn authorization(options: StreamOptions) -> String {
    // Any answer will do: only the request matters.
    let server = Server::start(vec![Step::Bytes(with_length(400, "application/json", "", b"{}"))]).await;
    let context = normalize_context(Context {
        system_prompt: None,
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    });
    let mut stream = BedrockConverseStream.stream(&model(&server.url), context, options);
    let mut last = None;
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.next().await {
            last = Some(event);
        }
    })
    .await
    .expect("no hang");
    let heads = server.heads.lock().unwrap().clone();
    let head = heads.first().unwrap_or_else(|| panic!("no request; last event {last:?}"));
    head.lines().find_map(|l| l.strip_prefix("authorization:")).unwrap().trim().to_owned()
}

#[tokio::test]
async fn profiles_and_container_credentials() {
    let dir = std::env::temp_dir().join(format!("pi-bedrock-credentials-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let credentials = dir.join("credentials");
    std::fs::write(&credentials, "[dev]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n")
        .unwrap();
    let config = dir.join("config");
    std::fs::write(&config, "[profile dev]\nregion = eu-north-1\n").unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials);
    std::env::set_var("AWS_CONFIG_FILE", &config);
    for name in ["AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN"] {
        std::env::remove_var(name);
    }
    // Ambient keys that a profile chosen for the request must not lose to.
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDAMBIENT");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "ambient-secret");

    let auth = authorization(options(&[("AWS_PROFILE", "dev"), ("AWS_REGION", "us-east-2")])).await;
    assert!(auth.starts_with("aws4-hmac-sha256 credential=akidprofile/"), "{auth}");
    assert!(auth.contains("/us-east-2/bedrock/aws4_request"), "{auth}");

    // Without a profile, the ambient keys sign.
    let auth = authorization(options(&[("AWS_REGION", "us-east-2")])).await;
    assert!(auth.starts_with("aws4-hmac-sha256 credential=akidambient/"), "{auth}");

    // No keys anywhere: ECS container credentials from the chain.
    std::env::remove_var("AWS_ACCESS_KEY_ID");
    std::env::remove_var("AWS_SECRET_ACCESS_KEY");
    let body = br#"{"AccessKeyId":"AKIDCONTAINER","SecretAccessKey":"container-secret","Token":"container-token","Expiration":"2099-01-01T00:00:00Z"}"#;
    let ecs = Server::start(vec![Step::Bytes(with_length(200, "application/json", "", body))]).await;
    std::env::set_var("AWS_CONTAINER_CREDENTIALS_FULL_URI", format!("{}/creds", ecs.url));
    let auth = authorization(options(&[("AWS_REGION", "us-east-2")])).await;
    assert!(auth.starts_with("aws4-hmac-sha256 credential=akidcontainer/"), "{auth}");
    let _ = std::fs::remove_dir_all(&dir);
}
