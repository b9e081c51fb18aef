//! `OpenAICodexResponsesOptions`: the options of the Codex Responses API's own `stream()`.
//!
//! Set per request in [`pi_types::StreamOptions::api_options`], they win over the adapter's own
//! settings (`OpenAICodexResponses::with_service_tier`, ...).

use serde::{Deserialize, Serialize};

use crate::api::openai::responses::{ReasoningEffort, ReasoningSummary, ServiceTier};

/// How long the answer's text is (`text.verbosity`, default `low`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextVerbosity {
    /// Short (the default).
    Low,
    /// Medium.
    Medium,
    /// Long.
    High,
}

impl TextVerbosity {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// The Codex `tool_choice` (default `auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodexToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// The model must call some tool.
    Required,
}

impl CodexToolChoice {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::None => "none",
            Self::Required => "required",
        }
    }
}

/// The options of the Codex Responses API (the reference's `OpenAICodexResponsesOptions`, less
/// the neutral `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAICodexResponsesOptions {
    /// Reasoning effort (`None` sends the model's "off" effort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Reasoning summary (default `auto`), sent with an effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_summary: Option<ReasoningSummary>,
    /// Processing tier; also prices a `default` answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<ServiceTier>,
    /// Text verbosity (default `low`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_verbosity: Option<TextVerbosity>,
    /// Tool selection (default `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<CodexToolChoice>,
}
