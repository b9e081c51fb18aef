//! The conformance scenario format (see `tests/fixtures/conformance/README.md`).

use serde::Deserialize;
use serde_json::{Map, Value};

/// A scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Equals the file stem.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// `loop` or `agent`.
    pub level: Level,
    /// Faux chunk size in tokens.
    #[serde(default = "one")]
    pub token_size: usize,
    /// Requested thinking level.
    #[serde(default)]
    pub thinking_level: Option<pi_types::ThinkingLevel>,
    /// Agent system prompt.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Initial transcript.
    #[serde(default)]
    pub messages: Vec<Value>,
    /// Initial tools.
    #[serde(default)]
    pub tools: Vec<ToolSpecJson>,
    /// Tools referenced by name only.
    #[serde(default)]
    pub tool_library: Vec<ToolSpecJson>,
    /// The faux script.
    pub responses: Vec<ResponseJson>,
    /// Options and data-driven hooks.
    #[serde(default)]
    pub config: ConfigJson,
    /// Loop level: the prompts.
    #[serde(default)]
    pub prompts: Option<Vec<Value>>,
    /// Loop level: continue instead of prompting.
    #[serde(default, rename = "continue")]
    pub continue_run: Option<bool>,
    /// Loop level: steering polls.
    #[serde(default)]
    pub steering: Vec<PollJson>,
    /// Loop level: follow-up polls.
    #[serde(default)]
    pub follow_ups: Vec<PollJson>,
    /// Event-triggered actions.
    #[serde(default)]
    pub actions: Vec<ActionJson>,
    /// Agent level: operations.
    #[serde(default)]
    pub ops: Option<Vec<OpJson>>,
}

fn one() -> usize {
    1
}

/// Which API the scenario drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// `run_agent_loop` / `run_agent_loop_continue`.
    Loop,
    /// An `Agent`.
    Agent,
}

/// A tool spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpecJson {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON Schema.
    pub parameters: Value,
    /// Per-tool execution mode.
    #[serde(default)]
    pub execution_mode: Option<pi_types::ToolExecutionMode>,
    /// Scripted behaviour (with `perCall` overrides).
    #[serde(default)]
    pub behavior: Map<String, Value>,
}

/// A scripted response.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseJson {
    /// Content blocks.
    pub content: Vec<Value>,
    /// Stop reason.
    pub stop_reason: pi_types::StopReason,
    /// Error message.
    #[serde(default)]
    pub error_message: Option<String>,
}

/// `config`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigJson {
    /// Tool execution mode.
    #[serde(default)]
    pub tool_execution: Option<pi_types::ToolExecutionMode>,
    /// Agent steering queue mode.
    #[serde(default)]
    pub steering_mode: Option<String>,
    /// Agent follow-up queue mode.
    #[serde(default)]
    pub follow_up_mode: Option<String>,
    /// `beforeToolCall` rules.
    #[serde(default)]
    pub before_tool_call: Option<Vec<Map<String, Value>>>,
    /// `afterToolCall` rules.
    #[serde(default)]
    pub after_tool_call: Option<Vec<Map<String, Value>>>,
    /// `finishTurn` rules.
    #[serde(default)]
    pub finish_turn: Option<Vec<Map<String, Value>>>,
    /// `prepareNextTurn` rules.
    #[serde(default)]
    pub prepare_next_turn: Option<Vec<Map<String, Value>>>,
    /// `transformContext`.
    #[serde(default)]
    pub transform_context: Option<TransformJson>,
}

/// `transformContext`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformJson {
    /// Keep the last K messages.
    pub keep_last: usize,
}

/// A scripted poll answer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PollJson {
    /// 1-based poll number.
    pub poll: usize,
    /// Messages returned.
    pub messages: Vec<Value>,
}

/// An event-triggered action.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionJson {
    /// Trigger.
    pub on: TriggerJson,
    /// What to do.
    #[serde(rename = "do")]
    pub action: String,
    /// Message for steer/followUp.
    #[serde(default)]
    pub message: Option<Value>,
    /// Text for prompt.
    #[serde(default)]
    pub text: Option<String>,
    /// Messages for prompt.
    #[serde(default)]
    pub messages: Option<Vec<Value>>,
}

/// When an action fires.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerJson {
    /// Event type.
    pub event: String,
    /// 1-based occurrence.
    pub nth: usize,
}

/// An agent-level operation.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpJson {
    /// Operation name.
    pub op: String,
    /// Prompt text.
    #[serde(default)]
    pub text: Option<String>,
    /// Prompt messages.
    #[serde(default)]
    pub messages: Option<Vec<Value>>,
    /// Steer/followUp message.
    #[serde(default)]
    pub message: Option<Value>,
    /// setTools list.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
}

/// A scenario that cannot be run.
#[derive(Debug, thiserror::Error)]
#[error("invalid scenario: {0}")]
pub struct ScenarioError(pub String);

impl Scenario {
    /// Parse a scenario (keys sorted first, as the reference runner reads it) and check it.
    pub fn parse(text: &str, file_stem: Option<&str>) -> Result<Self, ScenarioError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ScenarioError(e.to_string()))?;
        let scenario: Scenario =
            serde_json::from_value(crate::normalize::sort_keys(value)).map_err(|e| ScenarioError(e.to_string()))?;
        if let Some(stem) = file_stem {
            if stem != scenario.name {
                return Err(ScenarioError(format!("scenario.name \"{}\" does not match the file name", scenario.name)));
            }
        }
        match scenario.level {
            Level::Loop => {
                if scenario.prompts.is_some() == (scenario.continue_run == Some(true)) {
                    return Err(ScenarioError("loop level: exactly one of prompts / continue:true".into()));
                }
                if scenario.ops.is_some() || scenario.system_prompt.is_some() {
                    return Err(ScenarioError("ops/systemPrompt: agent level only".into()));
                }
                if scenario.actions.iter().any(|a| a.action != "abort") {
                    return Err(ScenarioError("loop level allows only abort actions".into()));
                }
            }
            Level::Agent => {
                if scenario.ops.is_none() {
                    return Err(ScenarioError("agent level: ops required".into()));
                }
            }
        }
        Ok(scenario)
    }
}
