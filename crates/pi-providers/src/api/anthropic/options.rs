//! `AnthropicOptions`: the options of the Anthropic Messages API's own `stream()`.
//!
//! Set them for an agent or a request in [`pi_types::StreamOptions::api_options`]: the adapter
//! then applies every field that is set over what it derives from the neutral options
//! (`reasoning`, `thinking_budgets`, `max_tokens`). [`stream`](super::stream) takes them as the
//! reference's `stream()` does: as the whole of the request's thinking settings, with nothing
//! derived from `reasoning`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Effort level of adaptive thinking (`output_config.effort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnthropicEffort {
    /// Minimal thinking, skipped for simple tasks.
    Low,
    /// Moderate thinking.
    Medium,
    /// Deep reasoning, always thinks.
    High,
    /// The highest reasoning level of the newest models.
    Xhigh,
    /// No constraint at all (the models that have it).
    Max,
}

impl AnthropicEffort {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Max => "max",
        }
    }
}

/// How thinking content comes back (`thinking.display`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingDisplay {
    /// Thinking blocks carry summarized thinking text (the default here).
    Summarized,
    /// Thinking blocks carry an empty text; the signature still travels back.
    Omitted,
}

impl ThinkingDisplay {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Summarized => "summarized",
            Self::Omitted => "omitted",
        }
    }
}

/// Anthropic's `tool_choice`: `{"type": "auto" | "any" | "none"}` or `{"type": "tool", "name"}`.
///
/// In options JSON (the reference's form) the first three are plain strings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Value", try_from = "Value")]
pub enum AnthropicToolChoice {
    /// The model decides.
    Auto,
    /// The model must call some tool.
    Any,
    /// No tool call.
    None,
    /// The model must call the tool of this name.
    Tool(String),
}

impl AnthropicToolChoice {
    /// The request body's `tool_choice`.
    pub fn to_wire(&self) -> Value {
        match self {
            Self::Auto => json!({"type": "auto"}),
            Self::Any => json!({"type": "any"}),
            Self::None => json!({"type": "none"}),
            Self::Tool(name) => json!({"type": "tool", "name": name}),
        }
    }
}

impl From<AnthropicToolChoice> for Value {
    fn from(choice: AnthropicToolChoice) -> Self {
        match choice {
            AnthropicToolChoice::Tool(_) => choice.to_wire(),
            AnthropicToolChoice::Auto => json!("auto"),
            AnthropicToolChoice::Any => json!("any"),
            AnthropicToolChoice::None => json!("none"),
        }
    }
}

impl TryFrom<Value> for AnthropicToolChoice {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, Self::Error> {
        match crate::api::own_options::choice_mode(&value) {
            Some("auto") => Ok(Self::Auto),
            Some("any") => Ok(Self::Any),
            Some("none") => Ok(Self::None),
            Some("tool") => value
                .get("name")
                .and_then(Value::as_str)
                .map(|name| Self::Tool(name.to_owned()))
                .ok_or_else(|| "an Anthropic tool choice of type \"tool\" needs a name".to_owned()),
            _ => Err(format!("not an Anthropic tool choice: {value}")),
        }
    }
}

/// The options of the Anthropic Messages API (the reference's `AnthropicOptions`, less the
/// neutral `StreamOptions` it extends and the SDK `client`, which [`pi_types::StreamOptions`]
/// covers with `http_client`). Every field is optional; JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnthropicOptions {
    /// Extended thinking on or off. `Some(false)` sends `thinking: {type: "disabled"}` on
    /// reasoning models; `None` leaves it to `reasoning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_enabled: Option<bool>,
    /// Thinking budget of budget-based (older) models; 1024 when thinking is on without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget_tokens: Option<u64>,
    /// Effort of adaptive-thinking models (ignored by the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<AnthropicEffort>,
    /// How thinking comes back (default [`ThinkingDisplay::Summarized`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_display: Option<ThinkingDisplay>,
    /// Send the interleaved-thinking beta on budget-based thinking models (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaved_thinking: Option<bool>,
    /// Tool selection, including forcing any tool or a named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<AnthropicToolChoice>,
}
