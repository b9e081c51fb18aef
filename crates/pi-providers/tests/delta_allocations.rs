//! A streamed delta costs at most one allocation through each of the four main adapters:
//! loopback HTTP, SSE framing, the typed decode of the event, the builder, the agent and its
//! listener. Counted with a counting global allocator (so this test has its own binary), never
//! timed: a response of 8,000 more deltas may add fewer than 8,000 allocations (they add none).
//!
//! Before the typed decodes, each delta cost 15–25 allocations (lines copied into strings, a
//! `serde_json::Value` per event, its members cloned).
//!
//! The same binary bounds the bytes allocated per delta, and per argument byte for a Gemini
//! function call sent whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::alloc::System;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use loopback::{with_length, Server, Step};
use pi_agent::{Agent, AgentOptions};
use pi_providers::{Auth, Models, Provider};
use pi_types::{AgentEvent, AssistantMessageEvent, Model, StreamFn};
use serde_json::json;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn pieces(chars: usize) -> Vec<String> {
    let text: String = "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(chars).collect();
    text.as_bytes().chunks(4).map(|c| String::from_utf8_lossy(c).into_owned()).collect()
}

/// The body of a `chars`-character text answer in each API's wire format (as
/// `shared/bench/reference/sse-server.mjs` writes it, shortened).
fn body(api: &str, chars: usize) -> String {
    let mut out = String::new();
    match api {
        "anthropic-messages" => {
            let mut ev = |value: serde_json::Value| {
                out.push_str(&format!("event: {}\ndata: {value}\n\n", value["type"].as_str().unwrap()));
            };
            ev(json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 100, "output_tokens": 1}}}));
            ev(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
            for text in pieces(chars) {
                ev(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}));
            }
            ev(json!({"type": "content_block_stop", "index": 0}));
            ev(json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}));
            ev(json!({"type": "message_stop"}));
        }
        "openai-completions" => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                format!(
                    "data: {}\n\n",
                    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null})
                )
            };
            out.push_str(&chunk(json!({"role": "assistant", "content": ""}), json!(null)));
            for text in pieces(chars) {
                out.push_str(&chunk(json!({"content": text}), json!(null)));
            }
            out.push_str(&chunk(json!({}), json!("stop")));
            out.push_str("data: [DONE]\n\n");
        }
        "openai-responses" => {
            let mut sequence = 0;
            let mut ev = |kind: &str, mut fields: serde_json::Value| {
                fields["type"] = json!(kind);
                fields["sequence_number"] = json!(sequence);
                sequence += 1;
                out.push_str(&format!("event: {kind}\ndata: {fields}\n\n"));
            };
            ev("response.created", json!({"response": {"id": "resp_1", "status": "in_progress", "output": []}}));
            ev(
                "response.output_item.added",
                json!({"output_index": 0, "item": {"id": "msg_1", "type": "message",
                "status": "in_progress", "content": [], "role": "assistant"}}),
            );
            for text in pieces(chars) {
                ev(
                    "response.output_text.delta",
                    json!({"item_id": "msg_1", "output_index": 0, "content_index": 0,
                    "delta": text, "logprobs": []}),
                );
            }
            let item = json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "annotations": [], "text": "x"}]});
            ev("response.output_item.done", json!({"output_index": 0, "item": item}));
            ev(
                "response.completed",
                json!({"response": {"id": "resp_1", "status": "completed", "output": [item],
                "usage": {"input_tokens": 100, "output_tokens": 9, "total_tokens": 109}}}),
            );
        }
        _ => {
            let all = pieces(chars);
            for (i, text) in all.iter().enumerate() {
                let mut candidate = json!({"content": {"parts": [{"text": text}], "role": "model"}, "index": 0});
                if i + 1 == all.len() {
                    candidate["finishReason"] = json!("STOP");
                }
                let chunk = json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 100,
                    "totalTokenCount": 100}, "modelVersion": "gemini-2.5-flash", "responseId": "r1"});
                out.push_str(&format!("data: {chunk}\r\n\r\n"));
            }
        }
    }
    out
}

/// Allocations and bytes allocated for one prompt answered with a `chars`-character text
/// through `api`'s adapter, and the text deltas the listener saw.
fn allocations_for(api: &str, adapter: Arc<dyn StreamFn>, chars: usize) -> (usize, usize, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let bytes = with_length(200, "text/event-stream", "", body(api, chars).as_bytes());
        let server = Server::start(vec![Step::Bytes(bytes)]).await;
        let mut model = Model::new("m").with_api(api).with_provider("p");
        model.base_url = server.url.clone();
        let models = Models::new();
        models.set_provider(
            Provider::new("p").with_auth(Auth::ApiKey("key".into())).with_model(model.clone()).with_api(api, adapter),
        );
        let agent = Agent::new(AgentOptions::new(Arc::new(models)).with_model(model));
        let deltas = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&deltas);
        let _listener = agent.subscribe_fn(move |event| {
            if let AgentEvent::MessageUpdate {
                assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. },
                ..
            } = event
            {
                std::hint::black_box(delta.len());
                seen.fetch_add(1, Ordering::Relaxed);
            }
        });
        let region = Region::new(GLOBAL);
        agent.prompt("go").await.unwrap();
        let change = region.change();
        assert_eq!(agent.error_message(), None, "{api}");
        (change.allocations, change.bytes_allocated, deltas.load(Ordering::Relaxed))
    })
}

fn check(api: &str, adapter: impl Fn() -> Arc<dyn StreamFn>) {
    // A first run creates what is made once (the shared HTTP client, lazy statics).
    allocations_for(api, adapter(), 400);
    let (small, small_bytes, small_deltas) = allocations_for(api, adapter(), 4_000);
    let (large, large_bytes, large_deltas) = allocations_for(api, adapter(), 36_000);
    assert_eq!((small_deltas, large_deltas), (1_000, 9_000), "{api}");
    let added = large.saturating_sub(small);
    let added_bytes = large_bytes.saturating_sub(small_bytes) as f64 / 8_000.0;
    println!(
        "{api}: 1,000 deltas {small} allocations, 9,000 deltas {large}: {:.3} per delta, {added_bytes:.0} bytes per delta",
        added as f64 / 8_000.0
    );
    // At most one per delta is the rule; none is what the path costs (reads are per chunk).
    assert!(added < 800, "{api}: 8,000 more deltas cost {added} more allocations");
    // 190-310 bytes here (hyper's reads, the message's text). A decoder fed each network chunk
    // whole grew its buffer to the chunk's size after every chunk: 420-520.
    assert!(added_bytes < 360.0, "{api}: {added_bytes:.0} bytes allocated per delta");
}

/// Bytes the Gemini adapter allocates for a response whose one chunk is a function call sent
/// whole with a `chars`-character argument (events consumed and dropped, no agent).
fn whole_call_bytes(chars: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let content: String = "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(chars).collect();
        let chunk = json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "write",
            "args": {"content": content}}}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "responseId": "r1"});
        let bytes = with_length(200, "text/event-stream", "", format!("data: {chunk}\r\n\r\n").as_bytes());
        let server = Server::start(vec![Step::Bytes(bytes)]).await;
        let mut model = Model::new("m").with_api("google-generative-ai").with_provider("p");
        model.base_url = server.url.clone();
        let context = pi_types::TranscriptContext::from_messages(vec![pi_types::UserMessage::text("go").into()]);
        let options = pi_types::StreamOptions { api_key: Some("key".into()), ..Default::default() };
        let region = Region::new(GLOBAL);
        let mut stream =
            pi_providers::api::google::gemini::GoogleGenerativeAi::default().stream(&model, context, options);
        while let Some(event) = futures::StreamExt::next(&mut stream).await {
            std::hint::black_box(&event);
        }
        region.change().bytes_allocated
    })
}

/// A Gemini call sent whole is parsed once (the error check shares the parse) and its
/// arguments move into the block (not cloned). What is left per argument byte: the
/// body read, framed and parsed, the `toolcall_delta`'s JSON text, the buffers' growth.
fn check_whole_call() {
    whole_call_bytes(1_000);
    let (small, large) = (whole_call_bytes(100_000), whole_call_bytes(400_000));
    let per_byte = large.saturating_sub(small) as f64 / 300_000.0;
    println!("google whole call: {per_byte:.1} bytes allocated per argument byte");
    // 6.7 here; parsed twice more (once by the error check) and cloned once more, 8.7.
    assert!(per_byte < 7.5, "{per_byte:.1} bytes allocated per argument byte");
}

/// One test for the four adapters: the counting allocator is process-wide, so they run in turn.
#[test]
fn a_delta_costs_at_most_one_allocation() {
    check("anthropic-messages", || Arc::new(pi_providers::api::anthropic::AnthropicMessages));
    check("openai-completions", || Arc::new(pi_providers::api::openai::completions::OpenAICompletions));
    check("openai-responses", || Arc::new(pi_providers::api::openai::responses::OpenAIResponses));
    check("google-generative-ai", || Arc::new(pi_providers::api::google::gemini::GoogleGenerativeAi::default()));
    check_whole_call();
}
