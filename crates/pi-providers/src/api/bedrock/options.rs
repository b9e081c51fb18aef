//! `BedrockOptions`: the options of the Bedrock Converse API's own `stream()`.
//!
//! Set them in [`pi_types::StreamOptions::api_options`] to apply the fields that are set over
//! what the adapter derives from the neutral options; [`stream`](super::stream) takes them as
//! the reference's `stream()` does: thinking comes from their `reasoning` and
//! `thinking_budgets` as given, with no output-cap adjustment.

use std::sync::Arc;

use indexmap::IndexMap;
use pi_types::{ThinkingBudgets, ThinkingLevel};
use serde::{Deserialize, Serialize};

/// Bedrock's tool choice: the shape of Anthropic's (`auto`, `any`, `none`, a tool by name),
/// sent as Converse's `toolChoice` (`{"auto": {}}`, `{"any": {}}`, `{"tool": {"name"}}`;
/// `none` sends no tools).
pub use crate::api::anthropic::AnthropicToolChoice as BedrockToolChoice;
/// How Claude's thinking comes back on Bedrock (Anthropic's choices).
pub use crate::api::anthropic::ThinkingDisplay as BedrockThinkingDisplay;

/// The options of the Bedrock Converse API (the reference's `BedrockOptions`, less the neutral
/// `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BedrockOptions {
    /// The region to sign for and send to (wins over `AWS_REGION` / `AWS_DEFAULT_REGION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The AWS profile of the credentials (wins over `AWS_PROFILE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Tool selection, including forcing any tool or a named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<BedrockToolChoice>,
    /// The thinking level (wins over `StreamOptions::reasoning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ThinkingLevel>,
    /// Token budgets per level for budget-based Claude thinking (win over
    /// `StreamOptions::thinking_budgets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budgets: Option<Arc<ThinkingBudgets>>,
    /// Send the interleaved-thinking beta with budget-based Claude thinking (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaved_thinking: Option<bool>,
    /// How Claude's thinking comes back (default summarized; never sent on GovCloud).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_display: Option<BedrockThinkingDisplay>,
    /// Cost-allocation tags of the request (`requestMetadata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_metadata: Option<IndexMap<String, String>>,
    /// Bedrock API key: `Authorization: Bearer` instead of SigV4 (wins over
    /// `AWS_BEARER_TOKEN_BEDROCK`); never printed by `Debug`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<String>,
}

impl std::fmt::Debug for BedrockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BedrockOptions")
            .field("region", &self.region)
            .field("profile", &self.profile)
            .field("tool_choice", &self.tool_choice)
            .field("reasoning", &self.reasoning)
            .field("thinking_budgets", &self.thinking_budgets)
            .field("interleaved_thinking", &self.interleaved_thinking)
            .field("thinking_display", &self.thinking_display)
            .field("request_metadata", &self.request_metadata)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}
