//! The stateless pi agent loop.
//!
//! `pi-loop` turns a streaming model into a tool-using agent, event for event as the
//! reference `runAgentLoop` of `@earendil-works/pi-agent-core`: a two-level loop (steering
//! messages inside, follow-ups outside), the response streamed into one partial message,
//! tool calls prepared in source order and executed sequentially or concurrently, and every
//! hook of the reference's `AgentLoopConfig`. It owns no state: the caller passes the
//! context, the configuration, a cancellation token and an event sink, and gets the new
//! messages back.
//!
//! [`pi_types`] (every type in the signatures) and [`CancellationToken`] are re-exported, so
//! the loop needs no other pi crate; a provider comes from `pi-providers` or your own
//! [`StreamFn`](pi_types::StreamFn), and the `Stream` form ([`agent_loop`]) is read with
//! `futures`' `StreamExt`.
//!
//! ```
//! use std::sync::Arc;
//! use pi_loop::{run_agent_loop, AgentContext, FnSink, LoopConfig};
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_types::{AgentMessage, StopReason, UserMessage};
//!
//! let faux = FauxProvider::default();
//! faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hello!")], StopReason::Stop))]);
//! let config = LoopConfig::new(faux.model(), Arc::new(faux.clone()));
//! let sink = Arc::new(FnSink(|event: &pi_types::AgentEvent| println!("{}", event.type_name())));
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let messages = runtime.block_on(run_agent_loop(
//!     vec![UserMessage::text("Hi").into()],
//!     AgentContext::default(),
//!     config,
//!     sink,
//!     Default::default(),
//! )).unwrap();
//! assert_eq!(messages.len(), 2);
//! ```

mod config;
mod context;
mod emit_order;
mod error;
mod handoff;
mod hooks;
pub mod message_list;
mod push;
mod run;
mod sink;
mod stream;
mod tools;
mod trace;
mod transcript_cache;

pub use config::LoopConfig;
pub use context::{
    AfterToolCallContext, AfterToolCallResult, AgentContext, BeforeToolCallContext, BeforeToolCallResult,
    RequestContext, RequestUpdate, TurnContext, TurnDecision, TurnUpdate,
};
pub use error::LoopError;
pub use hooks::{
    AfterToolCallFn, BeforeToolCallFn, ConvertToLlmFn, FinishTurnFn, GetApiKeyFn, HookFns, HookResult, Hooks,
    MessageSourceFn, PrepareNextTurnFn, PrepareRequestFn, SetHooks, TransformContextFn,
};
pub use message_list::MessageList;
pub use run::{declare_tool_changes, run_agent_loop, run_agent_loop_continue};
pub use sink::{AgentEventSink, Delivery, EventInfo, FnSink, NullSink};
pub use stream::{agent_loop, agent_loop_continue, AgentEventStream};
pub use tools::{run_tool_call, RunToolCallOptions, ToolCallOutcome};
pub use trace::{provider_name, TraceOptions};

pub use pi_types;
pub use pi_types::CancellationToken;
pub use transcript_cache::TranscriptCache;
