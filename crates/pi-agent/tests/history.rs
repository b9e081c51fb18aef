//! Bytes allocated by one prompt must not grow with the conversation before it (never
//! timings): the run shares the agent's transcript instead of copying it, and replays only the
//! system messages to declare tool changes. A per-prompt copy of the history allocates 16 bytes
//! per earlier message, which this test sees as soon as the history is long.
//!
//! The binary has one test, because the counting allocator is process-wide.
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::sync::Arc;

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxOptions, FauxProvider, FauxResponse};
use pi_types::{AgentMessage, StopReason, UserMessage};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn reply() -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text("ok")], StopReason::Stop))
}

/// Bytes and allocations of one prompt after a conversation of `history` messages.
fn prompt_after(history: usize) -> (usize, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let faux = FauxProvider::new(FauxOptions::default());
        faux.set_responses([reply(), reply()]);
        let agent = Agent::new(
            AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_system_prompt("Be brief."),
        );
        let earlier: Vec<AgentMessage> =
            (0..history).map(|i| AgentMessage::from(UserMessage::text(format!("message {i}")))).collect();
        agent.set_messages(agent.messages().into_iter().chain(earlier));
        let _listener = agent.subscribe_fn(|event| {
            std::hint::black_box(event.type_name());
        });
        // The first prompt converts the history for the provider once; the second is the one
        // a long conversation pays on every turn.
        agent.prompt("first").await.unwrap();
        let region = Region::new(GLOBAL);
        agent.prompt("second").await.unwrap();
        let change = region.change();
        assert_eq!(agent.messages().len(), history + 5);
        (change.bytes_allocated, change.allocations)
    })
}

#[test]
fn a_prompt_costs_the_same_after_a_short_and_a_long_conversation() {
    let (short_bytes, short_allocations) = prompt_after(1_000);
    let (long_bytes, long_allocations) = prompt_after(32_000);
    // The persistent transcript copies at most a chunk and a tree path per push. A copy of the
    // history would add 31,000 × 16 bytes (about 500 KB).
    assert!(
        long_bytes <= short_bytes + 16 * 1024,
        "after 1,000 messages: {short_bytes} bytes; after 32,000: {long_bytes} bytes"
    );
    assert!(
        long_allocations <= short_allocations + 16,
        "after 1,000 messages: {short_allocations} allocations; after 32,000: {long_allocations}"
    );
}
