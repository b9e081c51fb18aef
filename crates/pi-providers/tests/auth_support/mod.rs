//! A loopback stand-in for the sign-in hosts, and a scripted user, shared by the sign-in tests.
//!
//! The mock serves every host at once: a flow is pointed at `<mock>/<host>/<path>`, and each
//! request is recorded as the reference's runner (`fixtures/auth/reference_flows.mjs`) records
//! it, under `https://<host>/<path>`, and answered from `fixtures/auth/answers.json` (a list of
//! answers per endpoint, given in order, the last one repeated; an answer's `delay_ms` holds it
//! back).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use pi_providers::auth::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, Pkce};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub type Timeline = Arc<Mutex<Vec<Value>>>;

pub struct Mock {
    pub origin: String,
    pub timeline: Timeline,
}

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/auth/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

impl Mock {
    /// A mock answering from `answers` (the shape of `answers.json`).
    pub async fn start(answers: Value) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let timeline: Timeline = Arc::default();
        let queues: HashMap<String, Vec<Value>> =
            answers.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_array().unwrap().clone())).collect();
        let queues = Arc::new(Mutex::new(queues));
        let recorded = Arc::clone(&timeline);
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let recorded = Arc::clone(&recorded);
                let queues = Arc::clone(&queues);
                tokio::spawn(async move {
                    let mut data = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let n = stream.read(&mut chunk).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&chunk[..n]);
                    };
                    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
                    let mut lines = head.lines();
                    let mut request_line = lines.next().unwrap().split(' ');
                    let method = request_line.next().unwrap().to_owned();
                    let target = request_line.next().unwrap().to_owned();
                    let headers: HashMap<String, String> = lines
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                        .collect();
                    let length: usize = headers.get("content-length").map_or(0, |l| l.parse().unwrap());
                    while data.len() < head_end + length {
                        let n = stream.read(&mut chunk).await.unwrap();
                        data.extend_from_slice(&chunk[..n]);
                    }
                    let body = String::from_utf8_lossy(&data[head_end..head_end + length]).into_owned();
                    let url = format!("https:/{target}");
                    let header = |name: &str| headers.get(name).map_or(Value::Null, |v| Value::String(v.clone()));
                    let authorization = headers
                        .get("authorization")
                        .map_or(Value::Null, |v| Value::String(format!("{} <token>", v.split(' ').next().unwrap())));
                    // The runner records the headers a flow sets; when it sets no `Accept`, node's
                    // fetch sends `*/*`, as reqwest does: the same on the wire.
                    let accept = match header("accept") {
                        Value::String(any) if any == "*/*" => Value::Null,
                        other => other,
                    };
                    recorded.lock().unwrap().push(json!({
                        "kind": "request",
                        "method": method,
                        "url": url,
                        "content_type": header("content-type"),
                        "accept": accept,
                        "authorization": authorization,
                        "body": if length == 0 { Value::Null } else { Value::String(body) },
                    }));
                    let key = format!("{method} {}", url.split('?').next().unwrap());
                    let answer = {
                        let mut queues = queues.lock().unwrap();
                        match queues.get_mut(&key) {
                            Some(queue) if queue.len() > 1 => queue.remove(0),
                            Some(queue) if !queue.is_empty() => queue[0].clone(),
                            _ => json!({"status": 404, "body": {"error": format!("no canned answer for {key}")}}),
                        }
                    };
                    // An answer may be held back (`delay_ms`), so that concurrent clients overlap.
                    if let Some(ms) = answer.get("delay_ms").and_then(Value::as_u64) {
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    }
                    let text = answer["body"].to_string();
                    let reply = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                        answer["status"],
                        text.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { origin, timeline }
    }

    /// `https://host/path` served by the mock.
    pub fn url(&self, real: &str) -> String {
        format!("{}/{}", self.origin, real.strip_prefix("https://").unwrap())
    }

    pub fn requests(&self) -> Vec<Value> {
        self.timeline.lock().unwrap().iter().filter(|e| e["kind"] == "request").cloned().collect()
    }
}

/// The scripted user: picks `select`, lets the browser follow the redirect (or, with
/// `paste_code`, pastes `test-code#<state>`), and records what it is shown on the timeline.
pub struct User {
    pub select: String,
    pub paste_code: bool,
    pub timeline: Timeline,
    pub answer_text: String,
}

impl AuthInteraction for User {
    fn prompt<'a>(&'a self, prompt: AuthPrompt) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            match prompt {
                AuthPrompt::Select { .. } => Ok(self.select.clone()),
                AuthPrompt::Text { .. } => Ok(self.answer_text.clone()),
                AuthPrompt::ManualCode { .. } if self.paste_code => {
                    let url = self.timeline.lock().unwrap().iter().find(|e| e["kind"] == "auth_url").unwrap()["url"]
                        .as_str()
                        .unwrap()
                        .to_owned();
                    let url = reqwest::Url::parse(&url).unwrap();
                    let state = url.query_pairs().find(|(k, _)| k == "state").unwrap().1.into_owned();
                    Ok(format!("test-code#{state}"))
                }
                _ => futures::future::pending().await,
            }
        })
    }

    fn notify(&self, event: AuthEvent) {
        match event {
            AuthEvent::AuthUrl { url, .. } => {
                self.timeline.lock().unwrap().push(json!({"kind": "auth_url", "url": url}));
                let parsed = reqwest::Url::parse(&url).unwrap();
                let param = |name: &str| parsed.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
                let Some(redirect) = param("redirect_uri").or_else(|| param("callback_url")) else { return };
                if !redirect.starts_with("http://") {
                    return;
                }
                let mut back = reqwest::Url::parse(&redirect).unwrap();
                back.set_host(Some("127.0.0.1")).unwrap();
                back.query_pairs_mut().append_pair("code", "test-code");
                if let Some(state) = param("state") {
                    back.query_pairs_mut().append_pair("state", &state);
                }
                // Sign in with ChatGPT registers a client per sign-in; the callback names the issued id.
                if param("client_id").as_deref() == Some("dynamic_agent_client") {
                    back.query_pairs_mut().append_pair("client_id", "app_issued_1");
                }
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    let client = pi_providers::transport::client::shared().unwrap();
                    let _ = client.get(back).send().await;
                });
            }
            AuthEvent::DeviceCode { user_code, verification_uri, .. } => {
                self.timeline
                    .lock()
                    .unwrap()
                    .push(json!({"kind": "device_code", "user_code": user_code, "verification_uri": verification_uri}));
            }
            AuthEvent::Info(_) | AuthEvent::Progress(_) => {}
        }
    }
}

/// The timeline as the reference's runner prints it: the mock's origin mapped back to the real
/// hosts, the PKCE pair checked (S256, 43 base64url characters) and replaced by placeholders, the
/// loopback ports and the callback's random path too.
pub fn normalize(mock: &Mock, events: &[Value]) -> Value {
    let mut text = serde_json::to_string_pretty(events).unwrap();
    text = text.replace(&format!("{}/", mock.origin), "https://");
    let encoded_origin = mock.origin.replace(':', "%3A").replace('/', "%2F");
    text = text.replace(&format!("{encoded_origin}%2F"), "https%3A%2F%2F");
    if let Some(auth_url) = events.iter().find(|e| e["kind"] == "auth_url") {
        let url = reqwest::Url::parse(auth_url["url"].as_str().unwrap()).unwrap();
        let challenge = url.query_pairs().find(|(k, _)| k == "code_challenge").unwrap().1.into_owned();
        let exchange = events
            .iter()
            .find(|e| e["kind"] == "request" && e["body"].as_str().is_some_and(|b| b.contains("code_verifier")))
            .expect("a code exchange");
        let body = exchange["body"].as_str().unwrap();
        let verifier = if body.starts_with('{') {
            let json: Value = serde_json::from_str(body).unwrap();
            json["code_verifier"].as_str().unwrap().to_owned()
        } else {
            form_urlencoded_value(body, "code_verifier").unwrap()
        };
        let verifier = verifier.as_str();
        assert!(regex::Regex::new("^[A-Za-z0-9_-]{43}$").unwrap().is_match(verifier), "{verifier}");
        assert_eq!(Pkce::from_verifier(verifier.to_owned()).challenge, challenge);
        text = text.replace(verifier, "<verifier>").replace(&challenge, "<challenge>");
        // A random `state` (when it is not the verifier) and `nonce`.
        for name in ["state", "nonce"] {
            if let Some((_, value)) = url.query_pairs().find(|(k, _)| k == name) {
                if value != verifier {
                    text = text.replace(value.as_ref(), &format!("<{name}>"));
                }
            }
        }
    }
    let port = regex::Regex::new(r"(localhost|127\.0\.0\.1)(:|%3A)\d+").unwrap();
    text = port.replace_all(&text, "$1$2<port>").into_owned();
    let uuid =
        regex::Regex::new(r"(callback(?:%2F|/))[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
            .unwrap();
    text = uuid.replace_all(&text, "${1}<uuid>").into_owned();
    serde_json::from_str(&text).unwrap()
}

fn form_urlencoded_value(body: &str, key: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://x/?{body}")).ok()?;
    let value = url.query_pairs().find(|(k, _)| k == key).map(|(_, v)| v.into_owned());
    value
}

/// A credential as the runner prints it: its fields, with the expiry counted from now (whole
/// minutes) or `never`.
pub fn credential_event(credential: &pi_providers::auth::OAuthCredential, relative: bool) -> Value {
    let mut value = serde_json::to_value(pi_providers::auth::Credential::OAuth(credential.clone())).unwrap();
    let object = value.as_object_mut().unwrap();
    let expires = object.remove("expires").unwrap().as_u64().unwrap();
    let mut event = serde_json::Map::new();
    event.insert("kind".into(), json!("credential"));
    event.extend(object.clone());
    if !relative {
        event.insert("expires".into(), json!(expires));
    } else if expires > 8_000_000_000_000_000 {
        event.insert("expires_in_ms".into(), json!("never"));
    } else {
        let left = expires as f64 - pi_types::now_ms() as f64;
        event.insert("expires_in_ms".into(), json!(((left / 60000.0).round() * 60000.0) as u64));
    }
    Value::Object(event)
}
