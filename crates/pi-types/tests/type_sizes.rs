//! Sizes of the values every agent keeps many of, held down so that a field added by value
//! (instead of behind a pointer, when it is rarely set) shows up here rather than as memory
//! per agent: an agent loop copies its `StreamOptions` into every request and keeps them for
//! the run, every emitted event is moved through the futures that emit it, and a transcript
//! keeps every message and tool call.

use pi_types::{
    AgentEvent, AgentMessage, AssistantContent, AssistantMessage, StreamOptions, SystemMessage, ToolResultMessage,
};

fn check<T>(name: &str, limit: usize) {
    let size = std::mem::size_of::<T>();
    assert!(size <= limit, "{name} is {size} bytes (at most {limit})");
}

#[test]
fn values_kept_per_agent_stay_small() {
    // 600 bytes before its rarely set, larger options were shared; `api_options` is one pointer;
    // 280 with pi-ai 1.6.1's `deferred`, `disable_continuation` and
    // `websocket_connect_timeout_ms` (a millisecond count, as every other timeout here).
    check::<StreamOptions>("StreamOptions", 280);
    // 128 bytes before the tool execution events boxed their arguments.
    check::<AgentEvent>("AgentEvent", 80);
    // 400 bytes before its rarely set strings were boxed.
    check::<AssistantMessage>("AssistantMessage", 360);
    // 160 bytes before its rarely set sections were boxed.
    check::<SystemMessage>("SystemMessage", 96);
    // 24 bytes while a custom message was a fat pointer: every transcript entry.
    check::<AgentMessage>("AgentMessage", 16);
    // 192 bytes before a tool call's rare strings were boxed.
    check::<AssistantContent>("AssistantContent", 168);
    // 328 bytes before its rare usage and nested calls were boxed.
    check::<ToolResultMessage>("ToolResultMessage", 192);
}
