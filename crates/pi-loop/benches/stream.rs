//! The `stream` workload's script through the emit form with a counting sink: one text
//! response of N characters streamed in 4-character deltas. Time must grow linearly in N.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pi_loop::{run_agent_loop, AgentContext, AgentEventSink, LoopConfig};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxOptions, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, AgentMessage, StopReason, UserMessage};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct CountingSink {
    events: AtomicUsize,
    type_chars: AtomicUsize,
}

impl AgentEventSink for CountingSink {
    fn emit<'a>(&'a self, event: &'a AgentEvent) -> futures::future::BoxFuture<'a, Result<(), pi_types::BoxError>> {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.type_chars.fetch_add(black_box(event).type_name().len(), Ordering::Relaxed);
        Box::pin(std::future::ready(Ok(())))
    }
}

fn text(n: usize) -> String {
    "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(n).collect()
}

fn run_once(runtime: &tokio::runtime::Runtime, body: &str) -> usize {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text(body)], StopReason::Stop))]);
    let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
    let sink = Arc::new(CountingSink::default());
    let prompt = vec![AgentMessage::User(UserMessage::text("Run the benchmark."))];
    let outcome = runtime.block_on(run_agent_loop(
        prompt,
        AgentContext::default(),
        config,
        sink.clone(),
        CancellationToken::new(),
    ));
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

criterion_group!(benches, stream);
criterion_main!(benches);
