//! `AzureOpenAIResponsesOptions`: the options of the Azure OpenAI Responses API's own
//! `stream()`: the OpenAI Responses reasoning and tool options plus the Azure endpoint.
//!
//! Set per request in [`pi_types::StreamOptions::api_options`], the endpoint fields win over the
//! adapter's own (`AzureOpenAIResponses::with_*`) and over the `AZURE_OPENAI_*` variables.

use serde::{Deserialize, Serialize};

use crate::api::openai::responses::{ReasoningEffort, ReasoningSummary, ResponsesToolChoice};

/// The options of the Azure OpenAI Responses API (the reference's
/// `AzureOpenAIResponsesOptions`, less the neutral `StreamOptions`). JSON names are the
/// reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AzureOpenAIResponsesOptions {
    /// Reasoning effort (mapped through the model's `thinkingLevelMap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Tool selection, including forcing a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ResponsesToolChoice>,
    /// Reasoning summary (default `auto`); set alone, it turns reasoning on at `medium`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_summary: Option<ReasoningSummary>,
    /// The `api-version` query parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_api_version: Option<String>,
    /// The resource whose `https://<name>.openai.azure.com/openai/v1` is the base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_resource_name: Option<String>,
    /// The base URL (wins over the resource name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_base_url: Option<String>,
    /// The deployment sent as the request's `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_deployment_name: Option<String>,
}
