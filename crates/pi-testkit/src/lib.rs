//! Test support for pi, reusable by applications: compact event snapshots for `insta`
//! ([`snapshot`]), the event-grammar checker ([`grammar`]), `insta` redactions for raw events
//! ([`redactions`]), the conformance scenario runner ([`replay`]), trace normalization
//! ([`normalize`]), the provider replay runner (`provider_replay`, feature `provider-replay`,
//! which brings the HTTP adapters) and the benchmark workloads ([`mod@bench`]).
//!
//! Without `provider-replay` the crate depends on `pi-providers` without its HTTP stack, so it
//! is a light dev-dependency.
//!
//! ```
//! use pi_types::{AgentEvent, AgentMessage, UserMessage};
//! let note = AgentMessage::from(UserMessage::text("note"));
//! let events = [
//!     AgentEvent::AgentStart,
//!     AgentEvent::MessageStart { message: note.clone() },
//!     AgentEvent::MessageEnd { message: note.clone() },
//!     AgentEvent::AgentEnd { messages: vec![note] },
//! ];
//! let view = pi_testkit::snapshot::events_snapshot(&events);
//! assert_eq!(view[2]["message"], "[as started above]");
//! assert_eq!(view[3]["messages"], "[1 message ended above]");
//! // A run that never ends breaks the grammar:
//! assert!(pi_testkit::snapshot::try_events_snapshot(&events[..3]).is_err());
//! ```

mod agent_replay;
pub mod bench;
#[cfg(feature = "sse-bench")]
pub mod bench_sse;
mod bench_support;
mod error;
pub mod grammar;
pub mod normalize;
#[cfg(feature = "provider-replay")]
pub mod provider_replay;
pub mod provider_replay_compare;
pub mod redactions;
pub mod replay;
mod replay_setup;
pub mod scenario;
mod scenario_tool;
pub mod snapshot;

pub use error::ReplayError;
