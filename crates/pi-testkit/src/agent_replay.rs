//! Agent-level scenarios.

use crate::replay::ReplayError;
use crate::scenario::{Scenario, ScenarioError};

pub(crate) async fn replay_agent(_scenario: &Scenario) -> Result<String, ReplayError> {
    Err(ScenarioError("agent-level scenarios need pi-agent (not built yet)".into()).into())
}
