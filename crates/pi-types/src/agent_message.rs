//! Transcript entries: the standard messages plus application-defined ones.
//!
//! The reference lets applications add message kinds by TypeScript declaration merging.
//! Here an application message is a value behind the object-safe [`CustomMessage`] trait:
//! one `AgentMessage` type serves every application (no generic parameter spreading through
//! the loop, the agent and every event), each kind serializes with its own `role`, and a
//! kind read back from JSON that no code registered stays available as a
//! [`RawCustomMessage`]. [`AgentMessage::custom_as`] recovers the typed value either way.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::content::UserContent;
use crate::message::{AssistantMessage, Message, SystemMessage, ToolResultMessage, UserMessage, UserMessageContent};

/// An application-defined transcript entry. Implemented for every [`CustomMessageKind`];
/// implement it by hand only for kinds that are not serde types.
pub trait CustomMessage: Send + Sync + fmt::Debug + 'static {
    /// The `role` tag, distinct from the standard roles.
    fn role(&self) -> &str;
    /// The whole JSON object, `role` included.
    fn to_json(&self) -> Value;
    /// For downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// A serde type that is an application message kind with a fixed role.
///
/// ```
/// use pi_types::{AgentMessage, CustomMessageKind};
/// #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
/// struct Notification { text: String, timestamp: u64 }
/// impl CustomMessageKind for Notification { const ROLE: &'static str = "notification"; }
///
/// let msg = AgentMessage::custom(Notification { text: "saved".into(), timestamp: 0 });
/// assert_eq!(msg.role(), "notification");
/// assert_eq!(msg.custom_as::<Notification>().unwrap().text, "saved");
/// ```
pub trait CustomMessageKind: Serialize + DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static {
    /// The `role` tag written into the JSON object.
    const ROLE: &'static str;
}

impl<T: CustomMessageKind> CustomMessage for T {
    fn role(&self) -> &str {
        T::ROLE
    }

    fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("role".into(), Value::String(T::ROLE.into()));
        if let Ok(Value::Object(fields)) = serde_json::to_value(self) {
            object.extend(fields.into_iter().filter(|(k, _)| k != "role"));
        }
        Value::Object(object)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A custom message read from JSON whose kind no code registered: its fields as they came.
#[derive(Clone, Debug, PartialEq)]
pub struct RawCustomMessage {
    /// The `role` tag.
    pub role: String,
    /// The whole object, `role` included, in its original key order.
    pub fields: Map<String, Value>,
}

impl CustomMessage for RawCustomMessage {
    fn role(&self) -> &str {
        &self.role
    }

    fn to_json(&self) -> Value {
        Value::Object(self.fields.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A transcript entry: a standard message or an application-defined one.
///
/// Every message is shared (`Arc`): cloning one copies a pointer. The agent's transcript,
/// a run's context and the events of the run hold the same messages, so a prompt or a turn
/// costs time in its new messages, not in the history. Build one from a message with
/// `.into()` (`UserMessage::text("Hi").into()`); change a message in place with
/// [`Arc::make_mut`] (copied only if shared).
#[derive(Clone, Debug)]
pub enum AgentMessage {
    /// System instructions / tool declarations.
    System(Arc<SystemMessage>),
    /// User input.
    User(Arc<UserMessage>),
    /// Model output.
    Assistant(Arc<AssistantMessage>),
    /// Tool output.
    ToolResult(Arc<ToolResultMessage>),
    /// Application-defined; dropped by the default `convert_to_llm`.
    ///
    /// Boxed behind its `Arc` so that the pointer is thin: a fat `Arc<dyn _>` here would make
    /// every `AgentMessage` (the entries of every transcript, event and run) 24 bytes instead
    /// of 16.
    Custom(Arc<Box<dyn CustomMessage>>),
}

impl AgentMessage {
    /// Wrap an application message kind.
    pub fn custom(kind: impl CustomMessage) -> Self {
        Self::Custom(Arc::new(Box::new(kind)))
    }

    /// The `role` tag.
    pub fn role(&self) -> &str {
        match self {
            Self::System(_) => "system",
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "toolResult",
            Self::Custom(custom) => custom.role(),
        }
    }

    /// The standard message, if this is one (a copy).
    pub fn to_llm(&self) -> Option<Message> {
        Some(match self {
            Self::System(m) => Message::System(Arc::clone(m)),
            Self::User(m) => Message::User(Arc::clone(m)),
            Self::Assistant(m) => Message::Assistant(Arc::clone(m)),
            Self::ToolResult(m) => Message::ToolResult(Arc::clone(m)),
            Self::Custom(_) => return None,
        })
    }

    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Self::Assistant(m) => Some(m),
            _ => None,
        }
    }

    /// The system message, if this is one.
    pub fn as_system(&self) -> Option<&SystemMessage> {
        match self {
            Self::System(m) => Some(m),
            _ => None,
        }
    }

    /// The user message, if this is one.
    pub fn as_user(&self) -> Option<&UserMessage> {
        match self {
            Self::User(m) => Some(m),
            _ => None,
        }
    }

    /// The tool result, if this is one.
    pub fn as_tool_result(&self) -> Option<&ToolResultMessage> {
        match self {
            Self::ToolResult(m) => Some(m),
            _ => None,
        }
    }

    /// Whether both are the same shared message (a pointer comparison; see `==` for values).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::System(a), Self::System(b)) => Arc::ptr_eq(a, b),
            (Self::User(a), Self::User(b)) => Arc::ptr_eq(a, b),
            (Self::Assistant(a), Self::Assistant(b)) => Arc::ptr_eq(a, b),
            (Self::ToolResult(a), Self::ToolResult(b)) => Arc::ptr_eq(a, b),
            (Self::Custom(a), Self::Custom(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The custom message as kind `T`: the value itself when it was built from a `T`, else
    /// parsed from its JSON when its role is `T::ROLE`.
    pub fn custom_as<T: CustomMessageKind>(&self) -> Option<T> {
        let Self::Custom(custom) = self else { return None };
        if let Some(value) = custom.as_any().downcast_ref::<T>() {
            return Some(value.clone());
        }
        if custom.role() != T::ROLE {
            return None;
        }
        serde_json::from_value(custom.to_json()).ok()
    }

    /// Parse any message object; unknown roles become [`RawCustomMessage`]s.
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        let role = crate::serde_util::role_of(&value).map_err(serde_json::Error::custom)?.to_owned();
        match role.as_str() {
            "system" | "user" | "assistant" | "toolResult" => Ok(Message::from_json_object(&role, value)?.into()),
            _ => match value {
                Value::Object(fields) => Ok(Self::Custom(Arc::new(Box::new(RawCustomMessage { role, fields })))),
                _ => Err(serde_json::Error::custom("message must be an object")),
            },
        }
    }
}

impl PartialEq for AgentMessage {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::System(a), Self::System(b)) => a == b,
            (Self::User(a), Self::User(b)) => a == b,
            (Self::Assistant(a), Self::Assistant(b)) => a == b,
            (Self::ToolResult(a), Self::ToolResult(b)) => a == b,
            (Self::Custom(a), Self::Custom(b)) => a.to_json() == b.to_json(),
            _ => false,
        }
    }
}

impl From<Message> for AgentMessage {
    fn from(message: Message) -> Self {
        match message {
            Message::System(m) => m.into(),
            Message::User(m) => m.into(),
            Message::Assistant(m) => m.into(),
            Message::ToolResult(m) => m.into(),
        }
    }
}

/// Text typed by the user: a user message with one text block, stamped now — the message the
/// reference's `agent.prompt(text)` builds, so `agent.steer("…")` and `agent.follow_up("…")`
/// queue what `agent.prompt("…")` would send.
///
/// ```
/// use pi_types::{AgentMessage, UserContent, UserMessageContent};
/// let AgentMessage::User(message) = AgentMessage::from("Use metric units.") else { unreachable!() };
/// assert_eq!(message.content, UserMessageContent::Blocks(vec![UserContent::text("Use metric units.")]));
/// assert!(message.timestamp > 0);
/// ```
impl From<&str> for AgentMessage {
    fn from(text: &str) -> Self {
        Self::from(text.to_owned())
    }
}

/// Like `From<&str>`.
impl From<String> for AgentMessage {
    fn from(text: String) -> Self {
        UserMessage { content: UserMessageContent::Blocks(vec![UserContent::text(text)]), timestamp: crate::now_ms() }
            .into()
    }
}

macro_rules! from_message {
    ($variant:ident, $message:ty) => {
        impl From<$message> for AgentMessage {
            fn from(m: $message) -> Self {
                Self::$variant(Arc::new(m))
            }
        }
        impl From<Arc<$message>> for AgentMessage {
            fn from(m: Arc<$message>) -> Self {
                Self::$variant(m)
            }
        }
    };
}

from_message!(System, SystemMessage);
from_message!(User, UserMessage);
from_message!(Assistant, AssistantMessage);
from_message!(ToolResult, ToolResultMessage);

impl Serialize for AgentMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::System(m) => m.serialize(serializer),
            Self::User(m) => m.serialize(serializer),
            Self::Assistant(m) => m.serialize(serializer),
            Self::ToolResult(m) => m.serialize(serializer),
            Self::Custom(c) => c.to_json().serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for AgentMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        AgentMessage::from_json(Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

/// The default `convert_to_llm`: keep the standard messages, drop custom ones.
pub fn default_convert_to_llm(messages: &[AgentMessage]) -> Vec<Message> {
    messages.iter().filter_map(AgentMessage::to_llm).collect()
}
