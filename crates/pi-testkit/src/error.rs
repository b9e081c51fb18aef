//! The crate's error: why a scenario or a provider case could not be replayed.

use crate::scenario::ScenarioError;

/// Why a conformance scenario or a provider replay case could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Serving a provider case failed.
    #[error("replay I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The provider case is not valid JSON or does not match the case format.
    #[error("invalid case: {0}")]
    Case(String),
    /// The provider case names an API without an adapter.
    #[error("unknown api: {0}")]
    UnknownApi(String),
}
