//! Test support for pi: the conformance scenario runner, trace normalization and the
//! provider replay runner.
//!
//! ```no_run
//! let trace = pi_testkit::replay::replay_file(std::path::Path::new("loop-single-tool.json")).unwrap();
//! print!("{trace}");
//! ```

mod agent_replay;
pub mod bench;
pub mod normalize;
pub mod provider_replay;
pub mod provider_replay_compare;
pub mod replay;
pub mod scenario;
pub mod scenario_tool;
