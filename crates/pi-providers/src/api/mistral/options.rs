//! `MistralOptions`: the options of the Mistral API's own `stream()`.
//!
//! Set them in [`pi_types::StreamOptions::api_options`] to apply the fields that are set over
//! what the adapter derives from the neutral options; [`stream`](super::stream) takes them as
//! the reference's `stream()` does, with nothing derived from `reasoning`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::own_options;

/// Mistral's `tool_choice`: `"auto" | "none" | "any" | "required"` or a function by name
/// (`{"type": "function", "function": {"name"}}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Value", try_from = "Value")]
pub enum MistralToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// The model must call some tool.
    Any,
    /// The model must call some tool.
    Required,
    /// The model must call the function of this name.
    Function(String),
}

impl MistralToolChoice {
    /// The request body's `tool_choice`.
    pub fn to_wire(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::None => json!("none"),
            Self::Any => json!("any"),
            Self::Required => json!("required"),
            Self::Function(name) => own_options::function_choice(name),
        }
    }
}

impl From<MistralToolChoice> for Value {
    fn from(choice: MistralToolChoice) -> Self {
        choice.to_wire()
    }
}

impl TryFrom<Value> for MistralToolChoice {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, Self::Error> {
        match value.as_str() {
            Some("auto") => return Ok(Self::Auto),
            Some("none") => return Ok(Self::None),
            Some("any") => return Ok(Self::Any),
            Some("required") => return Ok(Self::Required),
            _ => {}
        }
        own_options::function_choice_name(&value)
            .map(|name| Self::Function(name.to_owned()))
            .ok_or_else(|| format!("not a Mistral tool choice: {value}"))
    }
}

/// Mistral's `prompt_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptMode {
    /// The reasoning system prompt of reasoning models.
    Reasoning,
}

/// Mistral's `reasoning_effort` (sent as is, not mapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MistralReasoningEffort {
    /// No reasoning.
    None,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Maximum.
    Max,
}

impl MistralReasoningEffort {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Max => "max",
        }
    }
}

/// The options of the Mistral API (the reference's `MistralOptions`, less the neutral
/// `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MistralOptions {
    /// Tool selection, including forcing any tool or a named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<MistralToolChoice>,
    /// `prompt_mode` (reasoning models without an effort map).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_mode: Option<PromptMode>,
    /// `reasoning_effort` (models with an effort map).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<MistralReasoningEffort>,
}
