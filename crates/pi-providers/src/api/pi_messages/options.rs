//! `PiMessagesStreamOptions`: the options of pi-messages' own `stream()` (the reference's
//! `PiMessagesOptions`; that name is taken here by the body's `options` member,
//! [`super::PiMessagesOptions`]).
//!
//! pi-messages' `streamSimple` passes the neutral options on unchanged, so these are applied
//! the same way whether set in [`pi_types::StreamOptions::api_options`] or given to
//! [`stream`](super::stream): the fields that are set win over the neutral ones.

use pi_types::ThinkingLevel;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::own_options;

/// pi-messages' `toolChoice`: `"auto" | "none" | "required"` or a function by name
/// (`{"type": "function", "function": {"name"}}`), passed to the backend as is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Value", try_from = "Value")]
pub enum PiMessagesToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call the function of this name.
    Function(String),
}

impl PiMessagesToolChoice {
    /// The `options.toolChoice` sent.
    pub fn to_wire(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::None => json!("none"),
            Self::Required => json!("required"),
            Self::Function(name) => own_options::function_choice(name),
        }
    }
}

impl From<PiMessagesToolChoice> for Value {
    fn from(choice: PiMessagesToolChoice) -> Self {
        choice.to_wire()
    }
}

impl TryFrom<Value> for PiMessagesToolChoice {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, Self::Error> {
        match value.as_str() {
            Some("auto") => return Ok(Self::Auto),
            Some("none") => return Ok(Self::None),
            Some("required") => return Ok(Self::Required),
            _ => {}
        }
        own_options::function_choice_name(&value)
            .map(|name| Self::Function(name.to_owned()))
            .ok_or_else(|| format!("not a pi-messages tool choice: {value}"))
    }
}

/// The options of pi-messages (the reference's `PiMessagesOptions`, less the neutral
/// `StreamOptions`). JSON names are the reference's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiMessagesStreamOptions {
    /// The thinking level sent (wins over `StreamOptions::reasoning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ThinkingLevel>,
    /// Tool selection, including forcing a tool (wins over `StreamOptions::tool_choice`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<PiMessagesToolChoice>,
    /// Ask the backend for debug metadata (`?debug=1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
}
