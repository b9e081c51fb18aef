//! The HTTP seam's spans (docs/tracing.md): one `POST` span per attempt under the span current
//! when the request is sent, with status, resend count and `error.type`, and a retry event;
//! never the key, headers or URL path.
//!
//! Its own test binary, for the reason given in pi-proxy's tracing_fields.rs (call-site
//! interest is cached process-wide).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use loopback::{with_length, Server, Step};
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_types::transcript::normalize_context;
use pi_types::{Context, Message, Model, StopReason, StreamFn, StreamOptions, UserMessage};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Instrument;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span or event: its name (an event's message), its parent's index, its fields.
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    live: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// This test's spans and pi-providers' (the HTTP client's own events are left out).
fn ours(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.target().starts_with("pi_providers") || metadata.target() == "http_spans"
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        if !ours(attrs.metadata()) {
            return;
        }
        let parent_id = ctx.span(id).and_then(|span| span.parent()).map(|parent| parent.id().into_u64());
        let mut live = self.live.lock().unwrap();
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut seen = self.seen.lock().unwrap();
        let parent = parent_id.and_then(|parent| live.get(&parent).copied());
        seen.push(Seen { name: attrs.metadata().name().to_owned(), parent, fields });
        live.insert(id.into_u64(), seen.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: LayerContext<'_, S>) {
        let Some(&index) = self.live.lock().unwrap().get(&id.into_u64()) else { return };
        values.record(&mut Fields(&mut self.seen.lock().unwrap()[index].fields));
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: LayerContext<'_, S>) {
        if !ours(event.metadata()) {
            return;
        }
        let parent_id = ctx.event_span(event).map(|span| span.id().into_u64());
        let parent = parent_id.and_then(|parent| self.live.lock().unwrap().get(&parent).copied());
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let name = fields.remove("message").unwrap_or_default();
        self.seen.lock().unwrap().push(Seen { name, parent, fields });
    }

    fn on_close(&self, id: Id, _ctx: LayerContext<'_, S>) {
        self.live.lock().unwrap().remove(&id.into_u64());
    }
}

const KEY: &str = "sk-secret-key-5d1c";

#[tokio::test]
async fn each_attempt_is_a_post_span_under_the_current_span() {
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    let busy = with_length(503, "application/json", "retry-after-ms: 1\r\n", br#"{"error":{"message":"busy"}}"#);
    let server = Server::start(vec![Step::Bytes(busy)]).await;
    let mut model = Model::new("test-model").with_api("openai-completions").with_provider("test");
    model.base_url = format!("{}/v1/secret-path", server.url);
    model.max_tokens = 1000;
    let context =
        normalize_context(Context { messages: vec![Message::from(UserMessage::text("Hi"))], ..Default::default() });
    let options = StreamOptions { api_key: Some(KEY.into()), max_retries: Some(1), ..Default::default() };

    let response = tracing::info_span!("response");
    let mut stream = response.in_scope(|| OpenAICompletions.stream(&model, context, options));
    async { while stream.next().await.is_some() {} }.instrument(response.clone()).await;
    assert_eq!(stream.final_message().map(|m| m.stop_reason), Some(StopReason::Error));
    drop(response);

    let seen = recorder.seen.lock().unwrap().clone();
    let names: Vec<(&str, Option<usize>)> = seen.iter().map(|s| (s.name.as_str(), s.parent)).collect();
    assert_eq!(
        names,
        [("response", None), ("POST", Some(0)), ("retrying provider request", Some(0)), ("POST", Some(0))],
        "{seen:#?}"
    );
    let port = server.url.rsplit(':').next().unwrap();
    for (index, resend) in [(1, None), (3, Some("1"))] {
        let span = &seen[index].fields;
        let field = |name: &str| span.get(name).map(String::as_str);
        assert_eq!(field("otel.kind"), Some("\"client\""));
        assert_eq!(field("http.request.method"), Some("\"POST\""));
        assert_eq!(field("server.address"), Some("\"127.0.0.1\""));
        assert_eq!(field("server.port"), Some(port));
        assert_eq!(field("http.request.resend_count"), resend);
        assert_eq!(field("http.response.status_code"), Some("503"));
        assert_eq!(field("error.type"), Some("\"503\""));
        assert_eq!(field("otel.status_code"), Some("\"ERROR\""));
    }
    assert_eq!(seen[2].fields.get("retry").map(String::as_str), Some("1"));
    for value in seen.iter().flat_map(|s| s.fields.values()) {
        assert!(!value.contains(KEY) && !value.contains("secret-path"), "{value}");
    }
}
