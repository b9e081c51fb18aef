//! The stateful pi agent.
//!
//! [`Agent`] wraps the stateless loop of [`pi_loop`] the way the reference's `Agent` class
//! of `@earendil-works/pi-agent-core` does: it owns the transcript and the tools, runs one
//! prompt at a time, reduces every event into its [`AgentState`], awaits its listeners, and
//! queues steering and follow-up messages typed while it works.
//!
//! * **Runs** — [`Agent::prompt`] and [`Agent::continue_run`] start a run at once on the
//!   current Tokio runtime and return a [`RunHandle`]; awaiting it waits for the run to
//!   settle. Dropping the handle aborts the run as [`Agent::abort`] would (the run still
//!   reports its end and the agent returns to idle). A second run while one is active is
//!   refused with the reference's error text. Model and hook failures end the run with a
//!   failure message, they are not `Err`s of the handle.
//! * **State** — [`Agent::state`] (and the single-field accessors) can be read any time,
//!   from any task or from inside a listener, without waiting for the run. Snapshots share
//!   the transcript (`Arc`), so reading per event copies nothing.
//! * **Listeners** — [`Agent::subscribe`] registers an async listener, awaited in order for
//!   every event; the returned [`Subscription`] unsubscribes on drop.
//! * **Queues** — [`Agent::steer`] and [`Agent::follow_up`], drained per [`QueueMode`].
//! * **Stream function** — the reference falls back to a process-wide default stream
//!   function; Rust has no such global, so [`AgentOptions::new`] takes one explicitly.
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::{Agent, AgentOptions};
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_types::{AgentEvent, AssistantMessageEvent, StopReason};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let faux = FauxProvider::default();
//! faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hello!")], StopReason::Stop))]);
//! let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_system_prompt("Be brief.").with_model(faux.model()));
//! let _printer = agent.subscribe_fn(|event| {
//!     if let AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. }, .. } = event {
//!         print!("{delta}");
//!     }
//! });
//! agent.prompt("Hi").await.unwrap();
//! assert_eq!(agent.messages().len(), 3); // system prompt, user, assistant
//! assert_eq!(agent.system_prompt(), "Be brief.");
//! assert!(!agent.is_streaming());
//! # });
//! ```

mod agent;
mod error;
mod options;
mod state;

pub use agent::{Agent, Listener, PromptInput, RunHandle, Subscription, WeakAgent};
pub use error::AgentError;
pub use options::{
    default_model, AgentInitialState, AgentOptions, PrepareNextTurnFn, PrepareNextTurnWithContextFn, QueueMode,
};
pub use state::{AgentState, StreamingMessage};
