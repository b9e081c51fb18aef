//! The span tree of a run (docs/tracing.md): names, nesting and OpenTelemetry GenAI attributes,
//! recorded by a layer on tracing-subscriber's registry; no message content unless the run
//! opts in.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use pi_loop::{run_agent_loop, AgentContext, LoopConfig, NullSink, TraceOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxResponse};
use pi_types::{AgentMessage, AgentTool, AgentToolResult, FnTool, StopReason, Tool, ToolSpec, UserMessage};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// One span as the layer saw it: its name, its parent's index, its fields as text.
#[derive(Clone, Debug)]
struct Seen {
    name: &'static str,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
    closed: bool,
}

/// Records every span (the registry reuses ids of closed spans, so they are mapped to indices).
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Seen>>>,
    live: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent_id = ctx.span(id).and_then(|span| span.parent()).map(|parent| parent.id().into_u64());
        let mut live = self.live.lock().unwrap();
        let parent = parent_id.and_then(|parent| live.get(&parent).copied());
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(Seen { name: attrs.metadata().name(), parent, fields, closed: false });
        live.insert(id.into_u64(), spans.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let Some(&index) = self.live.lock().unwrap().get(&id.into_u64()) else { return };
        values.record(&mut Fields(&mut self.spans.lock().unwrap()[index].fields));
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if let Some(index) = self.live.lock().unwrap().remove(&id.into_u64()) {
            self.spans.lock().unwrap()[index].closed = true;
        }
    }
}

impl Recorder {
    fn spans(&self) -> Vec<Seen> {
        self.spans.lock().unwrap().clone()
    }
}

const SECRET_PROMPT: &str = "prompt-text-7f3a";
const SECRET_ARGUMENT: &str = "argument-text-91c2";
const SECRET_RESULT: &str = "result-text-4d0e";
const SECRET_ANSWER: &str = "answer-text-b815";

fn echo() -> Arc<dyn AgentTool> {
    let spec = ToolSpec::new(Tool {
        name: "echo".into(),
        description: "echo tool".into(),
        parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}).into(),
        constrained_sampling: None,
    })
    .unwrap();
    Arc::new(FnTool::new(spec, |_args, _ctx| async { Ok(AgentToolResult::text(SECRET_RESULT)) }))
}

/// A tool call, then an answer (or a failed response), under a recording subscriber.
fn run_scenario(trace: TraceOptions, last: FauxResponse) -> Vec<Seen> {
    let faux = FauxProvider::default();
    let arguments = json!({"text": SECRET_ARGUMENT}).as_object().cloned().unwrap();
    let mut first = faux_assistant_message(vec![faux_tool_call("call_1", "echo", arguments)], StopReason::ToolUse);
    first.response_id = Some("resp_1".into());
    faux.set_responses([FauxResponse::Message(first), last]);
    let mut config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    config.trace = trace;
    config.options.session_id = Some("session-1".into());
    let context = AgentContext { tools: vec![echo()], ..AgentContext::default() };
    let prompt: AgentMessage = UserMessage::text(SECRET_PROMPT).into();

    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(run_agent_loop(vec![prompt], context, config, Arc::new(NullSink), Default::default())).unwrap();
    recorder.spans()
}

fn answer() -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(SECRET_ANSWER)], StopReason::Stop))
}

fn field<'a>(span: &'a Seen, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

#[test]
fn a_run_is_an_invoke_agent_span_with_chat_and_execute_tool_children() {
    let spans = run_scenario(TraceOptions::default(), answer());
    let shape: Vec<(&str, Option<usize>)> = spans.iter().map(|s| (s.name, s.parent)).collect();
    assert_eq!(
        shape,
        [("invoke_agent", None), ("chat", Some(0)), ("execute_tool", Some(0)), ("chat", Some(0))],
        "{spans:#?}"
    );
    assert!(spans.iter().all(|s| s.closed), "every span ends with the run");

    let run = &spans[0];
    assert_eq!(field(run, "otel.name"), Some("invoke_agent"));
    assert_eq!(field(run, "gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(field(run, "gen_ai.provider.name"), Some("faux"));
    assert_eq!(field(run, "gen_ai.request.model"), Some("faux-1"));
    assert_eq!(field(run, "gen_ai.conversation.id"), Some("session-1"));
    assert_eq!(field(run, "error.type"), None);

    let chat = &spans[1];
    assert_eq!(field(chat, "otel.name"), Some("chat faux-1"));
    assert_eq!(field(chat, "otel.kind"), Some("client"));
    assert_eq!(field(chat, "gen_ai.operation.name"), Some("chat"));
    assert_eq!(field(chat, "gen_ai.provider.name"), Some("faux"));
    assert_eq!(field(chat, "gen_ai.request.model"), Some("faux-1"));
    assert_eq!(field(chat, "gen_ai.response.id"), Some("resp_1"));
    assert_eq!(field(chat, "gen_ai.response.finish_reasons"), Some(r#"["tool_call"]"#));
    assert_eq!(field(&spans[3], "gen_ai.response.finish_reasons"), Some(r#"["stop"]"#));
    assert_eq!(field(chat, "error.type"), None);
    // The faux provider estimates usage; the run's totals are the sum of its responses'.
    let tokens = |span: &Seen, name: &str| field(span, name).unwrap().parse::<u64>().unwrap();
    let input = tokens(chat, "gen_ai.usage.input_tokens") + tokens(&spans[3], "gen_ai.usage.input_tokens");
    let output = tokens(chat, "gen_ai.usage.output_tokens") + tokens(&spans[3], "gen_ai.usage.output_tokens");
    assert!(input > 0 && output > 0, "{spans:#?}");
    assert_eq!(tokens(run, "gen_ai.usage.input_tokens"), input);
    assert_eq!(tokens(run, "gen_ai.usage.output_tokens"), output);

    let tool = &spans[2];
    assert_eq!(field(tool, "otel.name"), Some("execute_tool echo"));
    assert_eq!(field(tool, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(field(tool, "gen_ai.tool.name"), Some("echo"));
    assert_eq!(field(tool, "gen_ai.tool.call.id"), Some("call_1"));
    assert_eq!(field(tool, "error.type"), None);

    // No content by default: no field holds the prompt, the arguments, the result or the answer.
    for span in &spans {
        for (name, value) in &span.fields {
            for secret in [SECRET_PROMPT, SECRET_ARGUMENT, SECRET_RESULT, SECRET_ANSWER] {
                assert!(!value.contains(secret), "{} has {name} = {value}", span.name);
            }
        }
    }
}

#[test]
fn content_is_recorded_when_the_run_opts_in() {
    let mut trace = TraceOptions::default();
    trace.record_content = true;
    let spans = run_scenario(trace, answer());
    let input: serde_json::Value = serde_json::from_str(field(&spans[1], "gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(input, json!([{"role": "user", "parts": [{"type": "text", "content": SECRET_PROMPT}]}]));
    let output: serde_json::Value = serde_json::from_str(field(&spans[3], "gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(
        output,
        json!([{"role": "assistant", "parts": [{"type": "text", "content": SECRET_ANSWER}], "finish_reason": "stop"}])
    );
    let second_input = field(&spans[3], "gen_ai.input.messages").unwrap();
    assert!(second_input.contains(r#""type":"tool_call_response","id":"call_1","result":"result-text-4d0e""#));
    assert_eq!(field(&spans[2], "gen_ai.tool.call.arguments"), Some(r#"{"text":"argument-text-91c2"}"#));
    assert_eq!(field(&spans[2], "gen_ai.tool.call.result"), Some(r#"[{"type":"text","content":"result-text-4d0e"}]"#));
}

#[test]
fn a_failed_response_sets_error_type_on_its_chat_span_and_the_run() {
    let mut failed = faux_assistant_message(Vec::new(), StopReason::Error);
    failed.error_message = Some("upstream exploded".into());
    let spans = run_scenario(TraceOptions::default(), FauxResponse::Message(failed));
    assert_eq!(spans.len(), 4, "{spans:#?}");
    assert_eq!(field(&spans[3], "error.type"), Some("error"));
    assert_eq!(field(&spans[3], "otel.status_code"), Some("ERROR"));
    assert_eq!(field(&spans[1], "error.type"), None);
    assert_eq!(field(&spans[0], "error.type"), Some("error"));
}
