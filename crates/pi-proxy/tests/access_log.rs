//! The access log: one event per request at `pi_proxy::access` with method, path, status,
//! duration and the token's id, written when the response is done; never a token.
//!
//! Its own test binary, for the reason given in tracing_fields.rs (call-site interest is cached
//! process-wide).

#[allow(dead_code)]
#[path = "proxy/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use pi_providers::faux::{faux_assistant_message, faux_text};
use pi_proxy::server::ACCESS_TARGET;
use pi_proxy::ProxyStreamFn;
use pi_types::{Message, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use support::{config_with, faux, faux_provider, TestServer, TOKEN};

/// The fields of every access-log event.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Lines {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() == ACCESS_TARGET {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            if let Ok(mut lines) = self.0.lock() {
                lines.push(fields);
            }
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Lines {
    fn get(&self) -> Vec<BTreeMap<String, String>> {
        self.0.lock().map(|lines| lines.clone()).unwrap_or_default()
    }
}

#[tokio::test]
async fn one_line_per_request_with_the_token_id_not_the_token() {
    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(lines.clone());
    let faux = faux();
    faux.set_responses([faux_assistant_message(vec![faux_text("hello")], StopReason::Stop).into()]);
    let server = TestServer::start(config_with(vec![faux_provider(&faux)])).await;
    let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text("hi"))]);
    let message =
        ProxyStreamFn::new(&server.url, TOKEN).stream(&faux.model(), context.clone(), StreamOptions::default());
    assert_eq!(message.result().await.map(|m| m.text()).as_deref(), Some("hello"));
    let wrong = ProxyStreamFn::new(&server.url, "WRONG-SECRET-TOKEN-123");
    let _ = wrong.stream(&faux.model(), context, StreamOptions::default()).result().await;
    let health = reqwest::get(format!("{}/healthz", server.url)).await.map(|r| r.status().as_u16());
    assert_eq!(health.ok(), Some(200));

    // A streamed answer's line is written when hyper drops the finished body.
    for _ in 0..200 {
        if lines.get().len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut lines = lines.get();
    lines.sort_by_key(|line| (line.get("status").cloned(), line.get("path").cloned()));
    let summary: Vec<[&str; 4]> = lines
        .iter()
        .map(|line| {
            let field = |name: &str| line.get(name).map_or("", String::as_str);
            [field("method"), field("path"), field("status"), field("token")]
        })
        .collect();
    assert_eq!(
        summary,
        [["POST", "/api/stream", "200", "tests"], ["GET", "/healthz", "200", "-"], ["POST", "/api/stream", "401", "-"]]
    );
    assert!(lines.iter().all(|line| line.get("duration_ms").is_some_and(|d| d.parse::<u64>().is_ok())));
    for line in &lines {
        for secret in [TOKEN, "WRONG-SECRET"] {
            assert!(!line.values().any(|value| value.contains(secret)), "{secret} logged: {line:?}");
        }
    }
}
