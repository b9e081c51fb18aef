//! Test support for pi, reusable by applications: the conformance scenario runner
//! ([`replay`]), trace normalization ([`normalize`]), the provider replay runner
//! ([`provider_replay`]), the event-grammar checker ([`grammar`]), `insta` redactions for
//! event snapshots ([`redactions`]) and the benchmark workloads ([`mod@bench`]).
//!
//! ```no_run
//! let trace = pi_testkit::replay::replay_file(std::path::Path::new("loop-single-tool.json")).unwrap();
//! print!("{trace}");
//! ```

mod agent_replay;
pub mod bench;
pub mod grammar;
pub mod normalize;
#[cfg(feature = "provider-replay")]
pub mod provider_replay;
pub mod provider_replay_compare;
pub mod redactions;
pub mod replay;
pub mod scenario;
pub mod scenario_tool;
pub mod snapshot;
