//! Content blocks: the pieces a message is made of.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object, as tool-call arguments are.
pub type JsonObject = Map<String, Value>;

/// Plain text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Provider signature of the text (e.g. an OpenAI Responses item id), opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
}

/// Model reasoning.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text (a summary for some providers).
    pub thinking: String,
    /// Opaque signature that lets the reasoning be replayed to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// The reasoning was redacted; the encrypted payload is in `thinking_signature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
}

/// An inline image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64 image data.
    pub data: String,
    /// MIME type, e.g. `image/png`.
    pub mime_type: String,
}

/// A call of a tool requested by the model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Provider-assigned call id; tool results refer to it. A `CompactString`, as is the name:
    /// up to 24 bytes they need no allocation, and a transcript keeps every call.
    pub id: CompactString,
    /// Name of the tool.
    pub name: CompactString,
    /// The arguments, a JSON object (partial while streaming).
    pub arguments: JsonObject,
    /// Opaque provider signature (Gemini) to send back with the call. This and the two fields
    /// after it are rarely set: boxed strings, 16 bytes each in every block of a transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<Box<str>>,
    /// OpenAI Responses namespace of dynamically loaded tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Box<str>>,
    /// Set when the complete argument text was not a JSON object; `arguments` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_error: Option<Box<str>>,
}

/// A block of an assistant message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AssistantContent {
    /// Text.
    #[serde(rename = "text")]
    Text(TextContent),
    /// Reasoning.
    #[serde(rename = "thinking")]
    Thinking(ThinkingContent),
    /// A tool call.
    #[serde(rename = "toolCall")]
    ToolCall(ToolCall),
}

/// A block of a user message or a tool result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum UserContent {
    /// Text.
    #[serde(rename = "text")]
    Text(TextContent),
    /// An image.
    #[serde(rename = "image")]
    Image(ImageContent),
}

impl AssistantContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent { text: text.into(), text_signature: None })
    }

    /// A thinking block.
    pub fn thinking(thinking: impl Into<String>) -> Self {
        Self::Thinking(ThinkingContent { thinking: thinking.into(), ..Default::default() })
    }

    /// A tool-call block.
    pub fn tool_call(id: impl Into<CompactString>, name: impl Into<CompactString>, arguments: JsonObject) -> Self {
        Self::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments, ..Default::default() })
    }

    /// The tool call, if this block is one.
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            Self::ToolCall(call) => Some(call),
            _ => None,
        }
    }
}

/// The text blocks of `content` joined with `separator`; images are skipped (the
/// reference's `contentText`).
pub fn content_text(content: &[UserContent], separator: &str) -> String {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|block| match block {
            UserContent::Text(t) => Some(t.text.as_str()),
            UserContent::Image(_) => None,
        })
        .collect();
    texts.join(separator)
}

impl UserContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent { text: text.into(), text_signature: None })
    }

    /// An image block.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image(ImageContent { data: data.into(), mime_type: mime_type.into() })
    }
}
