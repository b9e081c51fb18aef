//! Criterion bench: the streaming tool-argument parser on large documents (MB/s).
// Throughput of ToolCallArgumentsStream on large documents fed in 4-character pieces, as
// providers deliver tool-call arguments. `cargo bench -p pi-rs-json --bench streaming_json`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pi_json::{utf16_chunks, ToolCallArgumentsStream};
use std::hint::black_box;

/// A tool-call-like document of about `target` bytes: a long escaped string, then an array of
/// small objects, then an open-ended array of numbers.
fn document(target: usize) -> String {
    let mut text = String::with_capacity(target + 256);
    text.push_str("{\"path\": \"/tmp/file.rs\", \"content\": \"");
    while text.len() < target / 2 {
        text.push_str("fn main() {\\n    println!(\\\"h\\u00e9llo \\ud83d\\ude00\\\");\\n}\\n");
    }
    text.push_str("\", \"edits\": [");
    let mut index = 0u64;
    while text.len() < target * 3 / 4 {
        if index > 0 {
            text.push_str(", ");
        }
        text.push_str(&format!(
            "{{\"line\": {index}, \"text\": \"value {index}\", \"ok\": true, \"w\": {}.5e-3}}",
            index * 7
        ));
        index += 1;
    }
    text.push_str("], \"numbers\": [");
    let mut first = true;
    while text.len() < target {
        if !first {
            text.push(',');
        }
        first = false;
        text.push_str(&(index % 1000).to_string());
        index += 1;
    }
    text.push_str("]}");
    text
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_call_arguments_stream");
    group.sample_size(10);
    for (label, size) in [("1MB", 1 << 20), ("4MB", 4 << 20)] {
        let text = document(size);
        let pieces = utf16_chunks(&text, 4);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::new("append_4_units", label), &pieces, |b, pieces| {
            b.iter(|| {
                let mut stream = ToolCallArgumentsStream::new();
                let mut members = 0;
                for piece in pieces {
                    members += stream.append(piece).len();
                }
                black_box((members, stream.finish()))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
