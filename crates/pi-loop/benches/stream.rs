//! The loop's streaming paths with a counting sink, 4-character deltas. Time must grow
//! linearly in N on each:
//!
//! * `loop_stream`: one text response of N characters through the callback (emit) form;
//! * `loop_stream_form`: the same through the `Stream` form (`agent_loop`), the consumer
//!   counting and dropping each event;
//! * `loop_tool_argument`: one tool call whose argument is an N-character string (a model
//!   writing a file), callback form, the tool executed.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use pi_loop::{agent_loop, run_agent_loop, AgentContext, AgentEventSink, LoopConfig};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
use pi_types::CancellationToken;
use pi_types::{AgentEvent, AgentMessage, AgentToolResult, FnTool, StopReason, Tool, ToolSpec, UserMessage};
use serde_json::json;

#[derive(Default)]
struct CountingSink {
    events: AtomicUsize,
    type_chars: AtomicUsize,
}

impl CountingSink {
    fn count(&self, event: &AgentEvent) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.type_chars.fetch_add(black_box(event).type_name().len(), Ordering::Relaxed);
    }
}

impl AgentEventSink for CountingSink {
    fn deliver(&self, event: AgentEvent, _info: pi_loop::EventInfo) -> pi_loop::Delivery {
        self.count(&event);
        pi_loop::Delivery::done()
    }
}

fn text(n: usize) -> String {
    "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(n).collect()
}

fn prompt() -> Vec<AgentMessage> {
    vec![UserMessage::text("Run the benchmark.").into()]
}

fn text_config(body: &str) -> LoopConfig {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text(body)], StopReason::Stop))]);
    LoopConfig::new(faux.model(), Arc::new(faux))
}

fn run_once(runtime: &tokio::runtime::Runtime, body: &str) -> usize {
    let sink = Arc::new(CountingSink::default());
    let outcome = runtime.block_on(run_agent_loop(
        prompt(),
        AgentContext::default(),
        text_config(body),
        sink.clone(),
        CancellationToken::new(),
    ));
    assert!(outcome.is_ok());
    sink.events.load(Ordering::Relaxed)
}

fn run_stream_form(runtime: &tokio::runtime::Runtime, body: &str) -> usize {
    let sink = CountingSink::default();
    runtime.block_on(async {
        let mut stream = agent_loop(prompt(), AgentContext::default(), text_config(body), CancellationToken::new());
        while let Some(event) = stream.next().await {
            sink.count(&event);
        }
        assert_eq!(stream.result().await.map(|m| m.len()).ok(), Some(2));
    });
    sink.events.load(Ordering::Relaxed)
}

fn run_tool_argument(runtime: &tokio::runtime::Runtime, content: &str) -> usize {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    let mut arguments = serde_json::Map::new();
    arguments.insert("content".into(), json!(content));
    let call = faux_tool_call("call_write", "write", arguments);
    faux.set_responses([
        FauxResponse::Message(faux_assistant_message(vec![call], StopReason::ToolUse)),
        FauxResponse::Message(faux_assistant_message(vec![faux_text("done")], StopReason::Stop)),
    ]);
    let spec = ToolSpec::new(Tool {
        name: "write".into(),
        description: "write".into(),
        parameters: json!({"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]})
            .into(),
        constrained_sampling: None,
    })
    .expect("schema");
    let tool: Arc<dyn pi_types::AgentTool> =
        Arc::new(FnTool::new(spec, |_args, _ctx| std::future::ready(Ok(AgentToolResult::text("ok")))));
    let context = AgentContext::new(Vec::new(), vec![tool]);
    let sink = Arc::new(CountingSink::default());
    let config = LoopConfig::new(faux.model(), Arc::new(faux));
    let outcome = runtime.block_on(run_agent_loop(prompt(), context, config, sink.clone(), CancellationToken::new()));
    assert!(outcome.is_ok());
    sink.events.load(Ordering::Relaxed)
}

fn stream(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("loop_stream");
    group.sample_size(10);
    for size in [250_000usize, 1_000_000, 2_000_000] {
        let body = text(size);
        assert_eq!(run_once(&runtime, &body), size.div_ceil(4) + 10);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| b.iter(|| run_once(&runtime, body)));
    }
    group.finish();
}

fn stream_form(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("loop_stream_form");
    group.sample_size(10);
    for size in [250_000usize, 1_000_000, 2_000_000] {
        let body = text(size);
        assert_eq!(run_stream_form(&runtime, &body), size.div_ceil(4) + 10);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| {
            b.iter(|| run_stream_form(&runtime, body))
        });
    }
    group.finish();
}

fn tool_argument(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("loop_tool_argument");
    group.sample_size(10);
    for size in [100_000usize, 400_000] {
        let content = text(size);
        // agent_start, turn_start, user (2), assistant 2 + 2 + deltas, tool (4), turn_end, then
        // turn_start, "done" (5), turn_end, agent_end.
        assert_eq!(run_tool_argument(&runtime, &content), 4 + 4 + (size + 14).div_ceil(4) + 4 + 1 + 1 + 5 + 2);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &content, |b, content| {
            b.iter(|| run_tool_argument(&runtime, content))
        });
    }
    group.finish();
}

criterion_group!(benches, stream, stream_form, tool_argument);
criterion_main!(benches);
