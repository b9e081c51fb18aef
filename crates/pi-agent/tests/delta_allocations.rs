//! A streamed token costs no allocation: the whole path (faux provider, builder, loop, agent,
//! listener) hands each delta on without a heap copy, so a longer text response adds no
//! allocations per delta (only the growing strings' reallocations, which are logarithmic).
//!
//! Its own binary, because the counting allocator is process-wide.
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::sync::Arc;

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxOptions, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, AssistantMessageEvent, StopReason};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations of one prompt answered by a `chars`-character text in 4-character deltas, and the
/// number of deltas the listener saw.
fn allocations_for(chars: usize) -> (usize, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
        let text: String = "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(chars).collect();
        faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text(text)], StopReason::Stop))]);
        let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()));
        let deltas = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = Arc::clone(&deltas);
        let _listener = agent.subscribe_fn(move |event| {
            if let AgentEvent::MessageUpdate {
                assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. },
                ..
            } = event
            {
                std::hint::black_box(delta.len());
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let region = Region::new(GLOBAL);
        agent.prompt("go").await.unwrap();
        let allocations = region.change().allocations;
        assert_eq!(agent.messages().last().map(|m| m.role()), Some("assistant"));
        (allocations, deltas.load(std::sync::atomic::Ordering::Relaxed))
    })
}

#[test]
fn streamed_deltas_cost_no_allocation_each() {
    let (small, small_deltas) = allocations_for(4_000);
    let (large, large_deltas) = allocations_for(32_000);
    assert_eq!((small_deltas, large_deltas), (1_000, 8_000));
    // 7,000 more deltas; one allocation per delta (a heap copy of each token) would add 7,000.
    let added = large.saturating_sub(small);
    assert!(added < 100, "4,000 chars: {small} allocations; 32,000 chars: {large} ({added} more)");
}
