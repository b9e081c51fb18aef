//! One span per request with token id, model, status, outcome and duration; no secrets and no
//! message content in any field.
//!
//! Its own test binary: `tracing` caches each call site's interest process-wide, and a server
//! span first entered by a concurrent test (the proxy binary runs hundreds of streams at once)
//! while this test installs its subscriber could be cached as uninteresting and go missing.

#[allow(dead_code)]
#[path = "proxy/support.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pi_providers::faux::{faux_assistant_message, faux_text};
use pi_proxy::ProxyStreamFn;
use pi_types::{Message, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use support::{config_with, faux, faux_provider, TestServer, TOKEN};

/// Every field value recorded, as `name=debug`.
#[derive(Clone, Default)]
struct Capture {
    fields: Arc<Mutex<Vec<String>>>,
    spans: Arc<AtomicU64>,
}

struct Fields<'a>(&'a mut Vec<String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl Capture {
    fn push(&self, visit: impl FnOnce(&mut Fields<'_>)) {
        if let Ok(mut fields) = self.fields.lock() {
            visit(&mut Fields(&mut fields));
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.push(|fields| {
            fields.0.push(format!("span={}", span.metadata().name()));
            span.record(fields);
        });
        Id::from_u64(self.spans.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        self.push(|fields| values.record(fields));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        self.push(|fields| event.record(fields));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn spans_carry_ids_not_secrets() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let faux = faux();
    faux.set_responses([faux_assistant_message(vec![faux_text("SECRET-ANSWER")], StopReason::Stop).into()]);
    let server = TestServer::start(config_with(vec![faux_provider(&faux)])).await;
    let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text("SECRET-QUESTION"))]);
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let message = client.stream(&faux.model(), context.clone(), StreamOptions::default()).result().await;
    assert_eq!(message.map(|m| m.text()).as_deref(), Some("SECRET-ANSWER"));
    let wrong = ProxyStreamFn::new(&server.url, "WRONG-SECRET-TOKEN-123");
    let _ = wrong.stream(&faux.model(), context, StreamOptions::default()).result().await;
    // The stream's record is written when hyper drops the finished body.
    let expected = ["outcome=\"done\"", "outcome=\"refused\""];
    for _ in 0..200 {
        let fields = capture.fields.lock().map(|f| f.clone()).unwrap_or_default();
        if expected.iter().all(|e| fields.iter().any(|f| f == e)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let fields = capture.fields.lock().map(|f| f.clone()).unwrap_or_default();
    for expected in [
        "span=proxy_request",
        "token_id=\"tests\"",
        "provider=\"faux\"",
        "model=\"faux-1\"",
        "status=200",
        "status=401",
        "outcome=\"done\"",
        "outcome=\"refused\"",
    ] {
        assert!(fields.iter().any(|f| f == expected), "{expected} missing from {fields:?}");
    }
    assert!(fields.iter().any(|f| f.starts_with("duration_ms=")));
    assert_eq!(fields.iter().filter(|f| *f == "span=proxy_request").count(), 2);
    for secret in [TOKEN, "WRONG-SECRET", "SECRET-ANSWER", "SECRET-QUESTION"] {
        assert!(!fields.iter().any(|f| f.contains(secret)), "{secret} logged: {fields:?}");
    }
}
