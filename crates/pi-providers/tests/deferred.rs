//! Deferred responses through `Models` and the faux provider, step by step, compared with what
//! the reference prints for the same calls (`fixtures/deferred/deferred.json`, printed by
//! `fixtures/deferred/reference_deferred.mjs` from pi-ai 1.6.1's faux provider): each step's
//! events and final message, a cancel's outcome, and the provider's counters.

use std::sync::Arc;

use futures::StreamExt;
use pi_providers::deferred::DeferredFetchOptions;
use pi_providers::faux::{
    faux_assistant_message, faux_text, faux_thinking, faux_tool_call, FauxDeferredOptions, FauxOptions, FauxProvider,
    FauxRequest, FauxResponse,
};
use pi_providers::{Models, Provider};
use pi_types::{
    AssistantMessage, AssistantMessageEventStream, Context, DeferredHandle, DeferredRequest, DeferredWindow, Message,
    Model, StopReason, StreamOptions, UserMessage,
};
use serde_json::{json, Map, Value};

const GOLDEN: &str = include_str!("fixtures/deferred/deferred.json");

/// A value as the reference runner prints it: no times, generated handle ids as their shape,
/// whole numbers as integers.
fn normalize(value: Value) -> Value {
    let generated = regex::Regex::new(r"deferred:\d+:[0-9a-z]+").expect("pattern");
    fn walk(value: Value, generated: &regex::Regex) -> Value {
        match value {
            Value::Array(items) => Value::Array(items.into_iter().map(|item| walk(item, generated)).collect()),
            Value::Object(object) => Value::Object(
                object
                    .into_iter()
                    .filter(|(key, _)| key != "timestamp" && key != "durationMs")
                    .map(|(key, inner)| (key, walk(inner, generated)))
                    .collect(),
            ),
            Value::String(text) => Value::String(generated.replace_all(&text, "deferred:<ms>:<random>").into_owned()),
            // JSON has one number type: a whole float prints as the integer, as JavaScript does.
            Value::Number(number) => match number.as_f64() {
                Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < 1e15 => json!(float as i64),
                _ => Value::Number(number),
            },
            other => other,
        }
    }
    walk(value, &generated)
}

#[derive(Default)]
struct Steps(Vec<Value>);

impl Steps {
    /// Runs a stream; its final message.
    async fn run(&mut self, call: &str, mut stream: AssistantMessageEventStream) -> AssistantMessage {
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            let full = serde_json::to_value(&event).expect("event");
            let mut event = Map::new();
            for key in ["type", "contentIndex", "delta", "reason"] {
                if let Some(value) = full.get(key) {
                    event.insert(key.to_owned(), value.clone());
                }
            }
            events.push(Value::Object(event));
        }
        let message = stream.result().await.expect("final message");
        let printed = normalize(serde_json::to_value(&message).expect("message"));
        self.0.push(json!({ "call": call, "events": events, "message": printed }));
        message
    }

    async fn cancel(&mut self, models: &Models, model: &Model, handle: &DeferredHandle) {
        match models.cancel_deferred(model, handle, StreamOptions::default()).await {
            Ok(()) => self.0.push(json!({ "call": "cancel", "ok": true })),
            Err(error) => self.0.push(json!({ "call": "cancel", "error": error.to_string() })),
        }
    }

    fn state(&mut self, faux: &FauxProvider) {
        let state = json!({
            "callCount": faux.call_count(),
            "deferredFetchCount": faux.deferred_fetch_count(),
            "cancelledDeferred": faux.cancelled_deferred(),
            "pendingResponses": faux.pending_response_count(),
        });
        self.0.push(json!({ "call": "state", "state": normalize(state) }));
    }

    /// Compares with the reference's steps of `case` and snapshots the sequence.
    fn check(self, case: &str) {
        let golden: Value = serde_json::from_str(GOLDEN).expect("golden");
        let trace = Value::Array(self.0);
        insta::assert_json_snapshot!(case, trace);
        assert_eq!(trace, golden[case], "{case} differs from the reference");
    }
}

fn setup(deferred: FauxDeferredOptions) -> (FauxProvider, Models, Model) {
    let faux = FauxProvider::new(FauxOptions { deferred, ..FauxOptions::default().with_token_size(2) });
    let models = Models::new();
    models.set_provider(faux.provider());
    let model = faux.model();
    (faux, models, model)
}

fn context(text: &str) -> Context {
    Context { messages: vec![Message::from(UserMessage::text(text))], ..Default::default() }
}

fn deferred() -> StreamOptions {
    StreamOptions { deferred: Some(DeferredRequest::default()), ..Default::default() }
}

fn fetch() -> DeferredFetchOptions {
    DeferredFetchOptions::default()
}

fn handle_of(message: &AssistantMessage) -> DeferredHandle {
    message.deferred.as_deref().cloned().expect("a deferred handle")
}

#[tokio::test]
async fn submit_then_fetch() {
    let (faux, models, model) = setup(FauxDeferredOptions::default());
    let mut scripted = faux_assistant_message(
        vec![
            faux_thinking("weighing the question"),
            faux_text("The answer is forty-two."),
            faux_tool_call("call_1", "lookup", json!({ "q": "meaning" }).as_object().cloned().unwrap_or_default()),
        ],
        StopReason::ToolUse,
    );
    scripted.response_id = Some("resp_1".into());
    faux.set_responses([scripted.into()]);
    let mut steps = Steps::default();
    let submitted = steps.run("submit", models.stream_simple(&model, context("What is the answer?"), deferred())).await;
    let handle = handle_of(&submitted);
    steps.run("fetch", models.stream_deferred(&model, &handle, fetch())).await;
    let waiting = DeferredFetchOptions { wait_ms: Some(1000), ..fetch() };
    steps.run("fetch", models.stream_deferred(&model, &handle, waiting)).await;
    steps.state(&faux);
    steps.check("submit_then_fetch");
}

#[tokio::test]
async fn pending_then_ready() {
    let (faux, models, model) = setup(FauxDeferredOptions { pending_fetches: 2, poll_after_ms: Some(250) });
    faux.set_responses([FauxResponse::Build(Arc::new(|request: &FauxRequest| {
        let last = request.context.messages().last().map(|message| match message {
            Message::User(user) => user.content.text(),
            _ => String::new(),
        });
        let text = format!(
            "{} read \"{}\" after {} fetches, session {}, deferred {}",
            request.model.id,
            last.unwrap_or_default(),
            request.deferred_fetch_count,
            request.options.session_id.as_deref().unwrap_or("undefined"),
            if request.options.deferred.is_some() { "set" } else { "undefined" },
        );
        Box::pin(async move { Ok(faux_assistant_message(vec![faux_text(text)], StopReason::Stop)) })
    }))]);
    let mut steps = Steps::default();
    let options = StreamOptions {
        deferred: Some(DeferredRequest { window: Some(DeferredWindow::OneHour) }),
        session_id: Some("session-1".into()),
        ..Default::default()
    };
    let submitted = steps.run("submit", models.stream_simple(&model, context("Summarize the report"), options)).await;
    let handle = handle_of(&submitted);
    for _ in 0..3 {
        steps.run("fetch", models.stream_deferred(&model, &handle, fetch())).await;
    }
    steps.state(&faux);
    steps.check("pending_then_ready");
}

#[tokio::test]
async fn cancel() {
    let (faux, models, model) = setup(FauxDeferredOptions { pending_fetches: 1, poll_after_ms: None });
    faux.set_responses([faux_assistant_message(vec![faux_text("never fetched")], StopReason::Stop).into()]);
    let mut steps = Steps::default();
    let submitted = steps.run("submit", models.stream_simple(&model, context("Start"), deferred())).await;
    let handle = handle_of(&submitted);
    steps.run("fetch", models.stream_deferred(&model, &handle, fetch())).await;
    steps.cancel(&models, &model, &handle).await;
    steps.run("fetch", models.stream_deferred(&model, &handle, fetch())).await;
    let elsewhere = DeferredHandle {
        provider: "faux".into(),
        model_id: "faux-1".into(),
        api: "faux".into(),
        id: "deferred:elsewhere".into(),
        ..Default::default()
    };
    steps.cancel(&models, &model, &elsewhere).await;
    steps.state(&faux);
    steps.check("cancel");
}

#[tokio::test]
async fn unknown_handle() {
    let (faux, models, model) = setup(FauxDeferredOptions::default());
    faux.set_responses([faux_assistant_message(vec![faux_text("kept")], StopReason::Stop).into()]);
    let mut steps = Steps::default();
    let submitted = steps.run("submit", models.stream_simple(&model, context("Go"), deferred())).await;
    let handle = handle_of(&submitted);
    let missing = DeferredHandle { id: "deferred:missing".into(), ..handle.clone() };
    steps.run("fetch", models.stream_deferred(&model, &missing, fetch())).await;
    let other_model = DeferredHandle { model_id: "faux-2".into(), ..handle.clone() };
    steps.run("fetch", models.stream_deferred(&model, &other_model, fetch())).await;
    steps.run("submit", models.stream_simple(&model, context("Again"), deferred())).await;
    steps.run("fetch", models.stream_deferred(&model, &handle, fetch())).await;
    steps.state(&faux);
    steps.check("unknown_handle");
}

#[tokio::test]
async fn unsupported() {
    let faux = FauxProvider::new(FauxOptions { provider: "mixed".into(), ..FauxOptions::default().with_token_size(2) });
    let shared = Arc::new(faux.clone());
    let plain_model = Model { provider: "plain".into(), ..faux.model() };
    let other_model = Model { api: "other".into(), ..faux.model() };
    let models = Models::new();
    models.set_provider(Provider::new("plain").with_model(plain_model.clone()).with_api("faux", shared.clone()));
    models.set_provider(
        Provider::new("mixed")
            .with_models([faux.model(), other_model.clone()])
            .with_api("faux", shared.clone())
            .with_deferred("faux", shared.clone())
            .with_api("other", shared),
    );
    let handle = |model: &Model| DeferredHandle {
        provider: model.provider.to_string(),
        model_id: model.id.to_string(),
        api: model.api.to_string(),
        id: "deferred:given".into(),
        ..Default::default()
    };
    let mut steps = Steps::default();
    steps.run("fetch", models.stream_deferred(&plain_model, &handle(&plain_model), fetch())).await;
    steps.cancel(&models, &plain_model, &handle(&plain_model)).await;
    steps.run("fetch", models.stream_deferred(&other_model, &handle(&other_model), fetch())).await;
    steps.cancel(&models, &other_model, &handle(&other_model)).await;
    steps.run("fetch", models.stream_deferred(&faux.model(), &handle(&faux.model()), fetch())).await;
    steps.check("unsupported");
}
