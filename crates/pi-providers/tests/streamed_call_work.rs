//! A Gemini call whose arguments stream in pieces (`partialArgs`) costs memory linear in its
//! pieces: counted in bytes allocated over the whole run (a counting global allocator, so this
//! test has its own binary), never timed. Merging each piece into a copy of everything merged
//! before it (and writing that copy's JSON into the message) allocated ~n² bytes: 4 times the
//! pieces cost about 16 times the bytes; merged in place they cost about 4 times.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::alloc::System;

use futures::StreamExt;
use loopback::{with_length, Server, Step};
use pi_providers::api::google::gemini::GoogleGenerativeAi;
use pi_types::transcript::normalize_context;
use pi_types::{AssistantContent, Context, Message, Model, StreamFn, StreamOptions, UserMessage};
use serde_json::json;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn body(pieces: usize) -> String {
    let chunk = |part: serde_json::Value| {
        format!("data: {}\r\n\r\n", json!({"candidates": [{"content": {"role": "model", "parts": [part]}}]}))
    };
    let mut out = chunk(json!({"functionCall": {"name": "write", "willContinue": true}}));
    for i in 0..pieces {
        let piece =
            json!({"jsonPath": "$.text", "stringValue": format!("piece {i:06} of the text; "), "willContinue": true});
        out.push_str(&chunk(json!({"functionCall": {"partialArgs": [piece], "willContinue": true}})));
    }
    out.push_str(&chunk(json!({"functionCall": {}})));
    out.push_str(&format!(
        "data: {}\r\n\r\n",
        json!({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]})
    ));
    out
}

/// Bytes allocated by one run over a call of `pieces` pieces; checks the merged arguments.
async fn allocated(pieces: usize) -> u64 {
    let body = body(pieces);
    let server = Server::start(vec![Step::Bytes(with_length(200, "text/event-stream", "", body.as_bytes()))]).await;
    let mut model = Model::new("gemini-test").with_api("google-generative-ai").with_provider("google");
    model.base_url = server.url.clone();
    let context = normalize_context(Context {
        system_prompt: None,
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    });
    let options = StreamOptions { api_key: Some("key".into()), max_retries: Some(0), ..Default::default() };
    let region = Region::new(GLOBAL);
    let mut stream = GoogleGenerativeAi::default().stream(&model, context, options);
    while stream.next().await.is_some() {}
    let stats = region.change();
    let message = stream.final_message().expect("terminal event");
    let Some(AssistantContent::ToolCall(call)) = message.content.first() else { panic!("a tool call: {message:?}") };
    let text = call.arguments["text"].as_str().unwrap_or_default();
    assert_eq!(text.len(), pieces * "piece 000000 of the text; ".len());
    stats.bytes_allocated as u64 + stats.bytes_reallocated.max(0) as u64
}

#[tokio::test(flavor = "current_thread")]
async fn streamed_call_arguments_cost_linear_memory() {
    let small = allocated(1000).await;
    let large = allocated(4000).await;
    let ratio = large as f64 / small as f64;
    println!("1000 pieces: {small} bytes; 4000 pieces: {large} bytes ({ratio:.2}x)");
    assert!(ratio < 6.0, "4x the pieces allocated {ratio:.2}x the bytes");
}
