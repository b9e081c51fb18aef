//! `OpenAIResponsesOptions`: the options of the OpenAI Responses API's own `stream()`, and the
//! option types the Azure and Codex Responses adapters share with it.
//!
//! Set them in [`pi_types::StreamOptions::api_options`] to apply the fields that are set over
//! what the adapter derives from the neutral options; [`stream`](super::stream) takes them as
//! the reference's `stream()` does, with nothing derived from `reasoning`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A Responses reasoning effort (`reasoning.effort`). `None` is Codex's only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// No reasoning (Codex).
    None,
    /// Minimal.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high.
    Xhigh,
    /// Maximum.
    Max,
}

impl ReasoningEffort {
    /// The thinking level of the same name (`None` has none).
    pub fn level(self) -> Option<pi_types::ThinkingLevel> {
        use pi_types::ThinkingLevel as L;
        match self {
            Self::None => None,
            Self::Minimal => Some(L::Minimal),
            Self::Low => Some(L::Low),
            Self::Medium => Some(L::Medium),
            Self::High => Some(L::High),
            Self::Xhigh => Some(L::Xhigh),
            Self::Max => Some(L::Max),
        }
    }

    /// The wire name (also the thinking level of that name for `thinkingLevelMap` look-ups).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Max => "max",
        }
    }
}

/// How reasoning is summarized (`reasoning.summary`). `Off` and `On` are Codex's only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningSummary {
    /// The model's choice (the default).
    Auto,
    /// Detailed.
    Detailed,
    /// Concise.
    Concise,
    /// No summary (Codex).
    Off,
    /// A summary (Codex).
    On,
}

impl ReasoningSummary {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Detailed => "detailed",
            Self::Concise => "concise",
            Self::Off => "off",
            Self::On => "on",
        }
    }
}

/// The processing tier of a request (`service_tier`); the answer's tier prices the usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceTier {
    /// The project's setting.
    Auto,
    /// Standard processing.
    Default,
    /// Flex processing (half price).
    Flex,
    /// Scale tier.
    Scale,
    /// Priority processing.
    Priority,
    /// Fast processing.
    Fast,
    /// Ultrafast processing.
    Ultrafast,
}

impl ServiceTier {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Default => "default",
            Self::Flex => "flex",
            Self::Scale => "scale",
            Self::Priority => "priority",
            Self::Fast => "fast",
            Self::Ultrafast => "ultrafast",
        }
    }
}

/// The Responses `tool_choice`: `"auto" | "none" | "required"`, a function or custom tool by
/// name, or any other form the API takes (allowed tools, hosted tools, MCP...) as raw JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Value", from = "Value")]
pub enum ResponsesToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call the function tool of this name (`{"type": "function", "name"}`).
    Function(String),
    /// The model must call the custom tool of this name (`{"type": "custom", "name"}`).
    Custom(String),
    /// Any other `tool_choice` value, sent as is.
    Other(Value),
}

impl ResponsesToolChoice {
    /// The request body's `tool_choice`.
    pub fn to_wire(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::None => json!("none"),
            Self::Required => json!("required"),
            Self::Function(name) => json!({"type": "function", "name": name}),
            Self::Custom(name) => json!({"type": "custom", "name": name}),
            Self::Other(value) => value.clone(),
        }
    }
}

impl From<ResponsesToolChoice> for Value {
    fn from(choice: ResponsesToolChoice) -> Self {
        choice.to_wire()
    }
}

impl From<Value> for ResponsesToolChoice {
    fn from(value: Value) -> Self {
        let name = value.get("name").and_then(Value::as_str).map(str::to_owned);
        match (value.as_str(), value.get("type").and_then(Value::as_str), name) {
            (Some("auto"), _, _) => Self::Auto,
            (Some("none"), _, _) => Self::None,
            (Some("required"), _, _) => Self::Required,
            (None, Some("function"), Some(name)) if value.as_object().is_some_and(|o| o.len() == 2) => {
                Self::Function(name)
            }
            (None, Some("custom"), Some(name)) if value.as_object().is_some_and(|o| o.len() == 2) => Self::Custom(name),
            _ => Self::Other(value),
        }
    }
}

/// The options of the OpenAI Responses API (the reference's `OpenAIResponsesOptions`, less the
/// neutral `StreamOptions` it extends). Every field is optional; JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAIResponsesOptions {
    /// Reasoning effort (mapped through the model's `thinkingLevelMap`); `None` sends the
    /// model's "off" effort on reasoning models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Reasoning summary (default `auto`); set alone, it turns reasoning on at `medium`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_summary: Option<ReasoningSummary>,
    /// Processing tier; also prices the usage when the answer names no tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<ServiceTier>,
    /// Tool selection, including forcing a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ResponsesToolChoice>,
}
