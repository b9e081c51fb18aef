//! Allocation counts that would catch a return of per-event work that grows with the response
//! (never timings): one response with many parallel tool calls must cost the same number of
//! allocations per call whatever the number of calls.
//!
//! The binary has one test, because the counting allocator is process-wide.
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::sync::Arc;

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
use pi_types::{AgentToolResult, FnTool, StopReason, Tool, ToolSpec};
use serde_json::{json, Map, Value};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn echo() -> Arc<dyn pi_types::AgentTool> {
    let spec = ToolSpec::new(Tool {
        name: "echo".into(),
        description: "Echo".into(),
        parameters: json!({"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}).into(),
        constrained_sampling: None,
    })
    .unwrap();
    Arc::new(FnTool::new(spec, |_args: Value, _ctx| async { Ok(AgentToolResult::text("ok")) }))
}

/// Allocations of one prompt whose response calls `echo` `calls` times in parallel.
fn allocations_for(calls: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
        let blocks = (0..calls)
            .map(|i| {
                let mut arguments = Map::new();
                arguments.insert("n".into(), json!(format!("{i:08}")));
                faux_tool_call(format!("call_{i:08}"), "echo", arguments)
            })
            .collect();
        faux.set_responses([
            FauxResponse::Message(faux_assistant_message(blocks, StopReason::ToolUse)),
            FauxResponse::Message(faux_assistant_message(vec![faux_text("done")], StopReason::Stop)),
        ]);
        let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_tools([echo()]));
        let _listener = agent.subscribe_fn(|event| {
            std::hint::black_box(event.type_name());
        });
        let region = Region::new(GLOBAL);
        agent.prompt("go").await.unwrap();
        let allocations = region.change().allocations;
        // system (the tool declaration), user, assistant, the results, assistant.
        assert_eq!(agent.messages().len(), calls + 4);
        allocations
    })
}

#[test]
fn parallel_tool_calls_cost_the_same_allocations_per_call_at_any_count() {
    let small = allocations_for(100);
    let large = allocations_for(800);
    // Linear: 8× the calls, about 8× the allocations. A per-event copy of the pending calls or
    // of the message's blocks would give about 64×.
    assert!(large <= small * 10, "100 calls: {small} allocations; 800 calls: {large}");
}
