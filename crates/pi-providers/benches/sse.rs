//! SSE decoding and event building on a large recorded stream.
//!
//! `sse_decode`: the byte-level decoder alone (1 KiB network chunks, events parsed as JSON).
//! `completions_stream`: the whole openai-completions adapter against a loopback server, every
//! event consumed (HTTP, SSE decoding, JSON parsing, partial-message updates).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::StreamExt;
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_providers::transport::sse::SseDecoder;
use pi_types::transcript::normalize_context;
use pi_types::{Context, Message, Model, StreamFn, StreamOptions, UserMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn recorded_stream(deltas: usize) -> Vec<u8> {
    let mut body = String::new();
    for i in 0..deltas {
        let text = format!("token {i} with some text, unicode \u{e9}\u{1f600} and \\\"escapes\\\" ");
        body.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    body.push_str(
        "data: {\"id\":\"chatcmpl-bench\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

fn sse_decode(c: &mut Criterion) {
    let body = recorded_stream(20_000);
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("sse_decode", |b| {
        b.iter(|| {
            let mut decoder = SseDecoder::new();
            let mut events = Vec::new();
            let mut count = 0usize;
            for chunk in body.chunks(1024) {
                decoder.push(chunk, &mut events);
                for event in events.drain(..) {
                    if event.data != "[DONE]" {
                        let value: serde_json::Value = serde_json::from_str(&event.data).unwrap();
                        count += value.as_object().map_or(0, serde_json::Map::len);
                    }
                }
            }
            decoder.finish(&mut events);
            black_box(count)
        });
    });
    group.finish();
}

async fn serve_forever(listener: tokio::net::TcpListener, body: std::sync::Arc<Vec<u8>>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let body = std::sync::Arc::clone(&body);
        tokio::spawn(async move {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                let n = socket.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                buffer.extend_from_slice(&chunk[..n]);
                if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buffer.len() < end + 4 + length {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buffer.extend_from_slice(&chunk[..n]);
                    }
                    buffer.drain(..end + 4 + length);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    for piece in body.chunks(16 * 1024) {
                        let _ = socket.write_all(piece).await;
                    }
                }
            }
        });
    }
}

fn completions_stream(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let body = std::sync::Arc::new(recorded_stream(20_000));
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    runtime.spawn(serve_forever(listener, std::sync::Arc::clone(&body)));
    let mut model = Model::new("m").with_api("openai-completions").with_provider("bench");
    model.base_url = url;
    model.max_tokens = 1000;
    model.context_window = 100_000;
    let context = normalize_context(Context {
        system_prompt: None,
        messages: vec![Message::from(UserMessage::text("go"))],
        tools: None,
    });
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.sample_size(10);
    group.bench_function("completions_stream", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let options = StreamOptions { api_key: Some("k".into()), ..Default::default() };
                let mut stream = OpenAICompletions.stream(&model, context.clone(), options);
                let mut events = 0usize;
                while let Some(event) = stream.next().await {
                    events += 1;
                    black_box(&event);
                }
                assert!(stream.final_message().is_some_and(|m| m.error_message.is_none()));
                events
            })
        });
    });
    group.finish();
}

criterion_group!(benches, sse_decode, completions_stream);
criterion_main!(benches);
