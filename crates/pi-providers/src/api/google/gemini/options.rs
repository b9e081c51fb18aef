//! `GoogleOptions`: the options of the Gemini API's own `stream()`, and the thinking and tool
//! types Vertex AI shares with it.
//!
//! Set them in [`pi_types::StreamOptions::api_options`] to apply the fields that are set over
//! what the adapter derives from the neutral options; [`stream`](super::stream) takes them as
//! the reference's `stream()` does, with nothing derived from `reasoning`.

use serde::{Deserialize, Serialize};

/// Gemini's function-calling mode (`toolConfig.functionCallingConfig.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GoogleToolChoice {
    /// `AUTO` (strict tools turn it into `VALIDATED`).
    Auto,
    /// `NONE`: no function call.
    None,
    /// `ANY`: the model must call some function.
    Any,
}

/// A Gemini thinking level (`thinkingConfig.thinkingLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GoogleThinkingLevel {
    /// The model's default.
    ThinkingLevelUnspecified,
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
}

impl GoogleThinkingLevel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ThinkingLevelUnspecified => "THINKING_LEVEL_UNSPECIFIED",
            Self::Minimal => "MINIMAL",
            Self::Low => "LOW",
            Self::Medium => "MEDIUM",
            Self::High => "HIGH",
            Self::Xhigh => "XHIGH",
        }
    }
}

/// Thinking of a Gemini request (`thinkingConfig`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoogleThinking {
    /// On (`includeThoughts: true` with the level or budget) or off (the model's "off"
    /// setting: budget 0, or its lowest level where thinking cannot be turned off).
    pub enabled: bool,
    /// `thinkingBudget` (`-1`: dynamic), when no level is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<i64>,
    /// `thinkingLevel` (wins over the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<GoogleThinkingLevel>,
}

/// The options of the Gemini API (the reference's `GoogleOptions`, less the neutral
/// `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoogleOptions {
    /// Function-calling mode, including forcing a call (`Any`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<GoogleToolChoice>,
    /// Thinking on or off, with a level or budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<GoogleThinking>,
}
