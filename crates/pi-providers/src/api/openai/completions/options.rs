//! `OpenAICompletionsOptions`: the options of the OpenAI Chat Completions API's own `stream()`.
//!
//! Set them in [`pi_types::StreamOptions::api_options`] to apply the fields that are set over
//! what the adapter derives from the neutral options; [`stream`](super::stream) takes them as
//! the reference's `stream()` does, with nothing derived from `reasoning`.

use std::sync::Arc;

use pi_types::{ThinkingBudgets, ThinkingLevel};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::own_options;

/// A Chat Completions reasoning effort (mapped through the model's `thinkingLevelMap` and sent
/// in the model's thinking format).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompletionsReasoningEffort {
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

impl CompletionsReasoningEffort {
    /// The thinking level of the same name.
    pub fn level(self) -> ThinkingLevel {
        match self {
            Self::Minimal => ThinkingLevel::Minimal,
            Self::Low => ThinkingLevel::Low,
            Self::Medium => ThinkingLevel::Medium,
            Self::High => ThinkingLevel::High,
            Self::Xhigh => ThinkingLevel::Xhigh,
            Self::Max => ThinkingLevel::Max,
        }
    }
}

/// The Chat Completions `tool_choice`: `"none" | "auto" | "required"`, a function by name
/// (`{"type": "function", "function": {"name"}}`), or any other form (allowed tools, custom
/// tools) as raw JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Value", from = "Value")]
pub enum CompletionsToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call the function of this name.
    Function(String),
    /// Any other `tool_choice` value, sent as is.
    Other(Value),
}

impl CompletionsToolChoice {
    /// The request body's `tool_choice`.
    pub fn to_wire(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::None => json!("none"),
            Self::Required => json!("required"),
            Self::Function(name) => own_options::function_choice(name),
            Self::Other(value) => value.clone(),
        }
    }
}

impl From<CompletionsToolChoice> for Value {
    fn from(choice: CompletionsToolChoice) -> Self {
        choice.to_wire()
    }
}

impl From<Value> for CompletionsToolChoice {
    fn from(value: Value) -> Self {
        match value.as_str() {
            Some("auto") => return Self::Auto,
            Some("none") => return Self::None,
            Some("required") => return Self::Required,
            _ => {}
        }
        let name = own_options::function_choice_name(&value);
        match (value.get("type").and_then(Value::as_str), name) {
            (Some("function"), Some(name))
                if value.as_object().is_some_and(|o| o.len() == 2)
                    && value.get("function").and_then(Value::as_object).is_some_and(|f| f.len() == 1) =>
            {
                Self::Function(name.to_owned())
            }
            _ => Self::Other(value),
        }
    }
}

/// The options of the OpenAI Chat Completions API (the reference's `OpenAICompletionsOptions`,
/// less the neutral `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAICompletionsOptions {
    /// Tool selection, including forcing a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<CompletionsToolChoice>,
    /// Reasoning effort, in the model's thinking format (`reasoning_effort`, `thinking`,
    /// `enable_thinking`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<CompletionsReasoningEffort>,
    /// Token budgets per level, for models that take a budget field (wins over
    /// `StreamOptions::thinking_budgets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budgets: Option<Arc<ThinkingBudgets>>,
}
