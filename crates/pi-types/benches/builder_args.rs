//! Criterion bench: one tool call whose argument is a long string, streamed through
//! `AssistantMessageBuilder` (the `args` workload of issue 8), events dropped as the loop drops
//! them. `cargo bench -p pi-rs-types --bench builder_args`.
//!
//! `copy_per_snapshot` is the former adapter path for comparison: the same parser, the whole
//! argument map cloned into the block on every published snapshot.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use pi_types::json::ToolCallArgumentsStream;
use pi_types::{AssistantMessage, AssistantMessageBuilder, AssistantMessageEventStream, JsonObject, StopReason};
use std::hint::black_box;

/// Argument text pieces: `{"path":"f.txt","content":"xxx…"}` with `size` characters of content,
/// in pieces of `piece` characters.
fn pieces(size: usize, piece: usize) -> Vec<String> {
    let mut pieces = vec![r#"{"path":"f.txt","content":""#.to_owned()];
    pieces.extend((0..size / piece).map(|_| "x".repeat(piece)));
    pieces.push("\"}".to_owned());
    pieces
}

fn through_builder(pieces: &[String]) -> usize {
    let pieces = pieces.to_vec();
    let mut stream = AssistantMessageEventStream::from_producer(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let call = out.start_tool_call("call_1", "write").await;
        for piece in pieces {
            out.tool_call_delta(call, piece).await.ok();
        }
        out.end_tool_call(call).await.ok();
        out.done(StopReason::ToolUse).await;
    });
    futures_executor::block_on(async move {
        let mut events = 0;
        while let Some(event) = stream.next().await {
            events += usize::from(black_box(&event).partial().is_some());
        }
        events
    })
}

fn copy_per_snapshot(pieces: &[String]) -> usize {
    let mut stream = ToolCallArgumentsStream::new();
    let mut block = JsonObject::new();
    let mut revision = stream.revision();
    for piece in pieces {
        stream.append(piece);
        if stream.revision() != revision {
            block = stream.arguments().clone();
            revision = stream.revision();
        }
        black_box(&block);
    }
    block.len()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("streamed_tool_argument");
    group.sample_size(10);
    for size in [100_000, 400_000] {
        let pieces = pieces(size, 40);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("builder", size), &pieces, |b, pieces| {
            b.iter(|| through_builder(pieces));
        });
        group.bench_with_input(BenchmarkId::new("copy_per_snapshot", size), &pieces, |b, pieces| {
            b.iter(|| copy_per_snapshot(pieces));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
