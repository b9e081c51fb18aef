//! `GoogleVertexOptions`: the options of the Vertex AI API's own `stream()`: Gemini's plus the
//! project and location of application-default-credential requests.

use serde::{Deserialize, Serialize};

use crate::api::google::gemini::{GoogleThinking, GoogleToolChoice};

/// The options of the Vertex AI API (the reference's `GoogleVertexOptions`, less the neutral
/// `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoogleVertexOptions {
    /// Function-calling mode, including forcing a call (`Any`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<GoogleToolChoice>,
    /// Thinking on or off, with a level or budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<GoogleThinking>,
    /// The Google Cloud project (wins over `GOOGLE_CLOUD_PROJECT` / `GCLOUD_PROJECT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The Vertex AI location (wins over `GOOGLE_CLOUD_LOCATION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}
