//! Transcript rules for system messages: the leading prompt, replay, tool-state diffs,
//! collapsing for APIs without mid-conversation system messages, and the split of tool
//! declarations between a request's top-level list and in-place changes.
//!
//! Every function takes any message list whose items expose a role and, for system
//! messages, the message itself ([`TranscriptEntry`]), so agent transcripts with custom
//! messages can be passed unfiltered.
//!
//! The functions are public because every adapter builds its request with them: the
//! adapters of `pi-providers` and a provider crate of your own alike.

use std::borrow::Borrow;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::agent_message::AgentMessage;
use crate::message::{Message, SystemContent, SystemMessage};
use crate::tool::{Tool, ToolReference};

/// The normalized context, as a provider receives it: the prompt and tool declarations are
/// carried by system messages. Only [`normalize_context`] (or [`TranscriptContext::from_messages`]
/// for lists that are already normalized) builds one.
///
/// The list is shared (`Arc`): the agent loop keeps the converted transcript between
/// requests and only appends to it, so handing it to a provider copies nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TranscriptContext {
    messages: Arc<Vec<Message>>,
}

impl TranscriptContext {
    /// A transcript whose prompt and tools already live in system messages.
    pub fn from_messages(messages: Vec<Message>) -> Self {
        Self { messages: Arc::new(messages) }
    }

    /// A transcript sharing an already normalized list.
    pub fn from_shared(messages: Arc<Vec<Message>>) -> Self {
        Self { messages }
    }

    /// The messages.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Take the messages (copied only if the list is still shared).
    pub fn into_messages(self) -> Vec<Message> {
        Arc::try_unwrap(self.messages).unwrap_or_else(|shared| (*shared).clone())
    }
}

/// The raw (not normalized) request context, as a caller writes it: `system_prompt` and `tools`
/// are shorthand for a leading system message; [`normalize_context`] turns it into the
/// [`TranscriptContext`] a provider takes.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// Base system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The messages.
    pub messages: Vec<Message>,
    /// Tool declarations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
}

/// Anything that can stand in a transcript for the replay rules.
pub trait TranscriptEntry {
    /// The system message, if the entry is one.
    fn system(&self) -> Option<&SystemMessage>;
}

impl TranscriptEntry for Message {
    fn system(&self) -> Option<&SystemMessage> {
        match self {
            Message::System(m) => Some(m),
            _ => None,
        }
    }
}

impl TranscriptEntry for AgentMessage {
    fn system(&self) -> Option<&SystemMessage> {
        self.as_system()
    }
}

impl TranscriptEntry for SystemMessage {
    fn system(&self) -> Option<&SystemMessage> {
        Some(self)
    }
}

impl<T: TranscriptEntry> TranscriptEntry for &T {
    fn system(&self) -> Option<&SystemMessage> {
        (*self).system()
    }
}

fn systems<'a, T: TranscriptEntry + 'a>(
    messages: impl IntoIterator<Item = &'a T>,
) -> impl Iterator<Item = &'a SystemMessage> {
    messages.into_iter().filter_map(TranscriptEntry::system)
}

/// The leading system message for a prompt and tool set; `None` when both are empty.
pub fn create_initial_system_message(system_prompt: Option<&str>, tools: Option<&[Tool]>) -> Option<SystemMessage> {
    initial_system_message_of(system_prompt, || tools.map(<[Tool]>::to_vec).unwrap_or_default())
}

/// [`create_initial_system_message`] with the declarations made only when needed and moved in,
/// not copied.
pub fn initial_system_message_of(
    system_prompt: Option<&str>,
    declarations: impl FnOnce() -> Vec<Tool>,
) -> Option<SystemMessage> {
    let prompt = system_prompt.unwrap_or("");
    let tools = Some(declarations()).filter(|t| !t.is_empty());
    if prompt.is_empty() && tools.is_none() {
        return None;
    }
    Some(SystemMessage {
        content: SystemContent::Text(prompt.to_owned()),
        tools_added: tools,
        timestamp: 0,
        ..Default::default()
    })
}

/// Fold `system_prompt` and `tools` into a leading system message.
pub fn normalize_context(context: Context) -> TranscriptContext {
    let lead = create_initial_system_message(context.system_prompt.as_deref(), context.tools.as_deref());
    let mut messages = context.messages;
    if let Some(lead) = lead {
        messages.insert(0, Message::from(lead));
    }
    TranscriptContext::from_messages(messages)
}

/// The leading system message, if the transcript starts with one.
pub fn initial_system_message<T: TranscriptEntry>(messages: &[T]) -> Option<&SystemMessage> {
    messages.first().and_then(TranscriptEntry::system)
}

/// The messages after the leading system message (for APIs with a separate prompt field).
pub fn without_initial_system_message(messages: &[Message]) -> &[Message] {
    match messages.first() {
        Some(Message::System(_)) => &messages[1..],
        _ => messages,
    }
}

/// One message's tool changes, applied by name to the tools declared so far (a changed
/// definition keeps its place).
fn apply_tool_changes<'a>(tools: &mut IndexMap<&'a str, &'a Tool>, message: &'a SystemMessage) {
    for removed in message.tools_removed.iter().flatten() {
        tools.shift_remove(removed.name.as_str());
    }
    for added in message.tools_added.iter().flatten() {
        tools.insert(added.name.as_str(), added);
    }
}

/// The tools available after replaying every tool change in order.
///
/// The replay functions take any sequence of entries: a slice, or a
/// `pi_loop::MessageList`'s `systems()`, which skips the rest of the history.
pub fn current_tools<'a, T: TranscriptEntry + 'a>(messages: impl IntoIterator<Item = &'a T>) -> Vec<Tool> {
    current_tool_declarations(messages).into_iter().cloned().collect()
}

/// [`current_tools`] without copying them: the transcript's own declarations.
pub fn current_tool_declarations<'a, T: TranscriptEntry + 'a>(
    messages: impl IntoIterator<Item = &'a T>,
) -> Vec<&'a Tool> {
    let mut tools = IndexMap::new();
    for message in systems(messages) {
        apply_tool_changes(&mut tools, message);
    }
    tools.into_values().collect()
}

/// Replay every system message into one: contents joined by a blank line, sections patched
/// by name, the current tools; `None` when there is no system message and no tool.
pub fn current_system_message<'a, T: TranscriptEntry + 'a>(
    messages: impl IntoIterator<Item = &'a T>,
) -> Option<SystemMessage> {
    let mut content = Vec::new();
    let mut sections: IndexMap<String, String> = IndexMap::new();
    let mut timestamp = None;
    let mut tools = IndexMap::new();
    for message in systems(messages) {
        timestamp.get_or_insert(message.timestamp);
        let text = message.content.to_text();
        if !text.is_empty() {
            content.push(text);
        }
        for (name, value) in message.sections.as_deref().into_iter().flatten() {
            match value {
                None => {
                    sections.shift_remove(name);
                }
                Some(text) => {
                    sections.insert(name.clone(), text.clone());
                }
            }
        }
        apply_tool_changes(&mut tools, message);
    }
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    Some(SystemMessage {
        content: SystemContent::Text(content.join("\n\n")),
        sections: (!sections.is_empty()).then(|| Box::new(sections.into_iter().map(|(k, v)| (k, Some(v))).collect())),
        tools_added: (!tools.is_empty()).then(|| tools.into_values().cloned().collect()),
        tools_removed: None,
        timestamp: timestamp.unwrap_or(0),
    })
}

/// A system message rendered as a prompt: content, then section texts, blank-line separated.
pub fn system_message_text(message: &SystemMessage) -> String {
    let mut parts = vec![message.content.to_text()];
    parts.extend(message.sections.as_deref().into_iter().flatten().filter_map(|(_, v)| v.clone()));
    parts.retain(|p| !p.is_empty());
    parts.join("\n\n")
}

/// The current system prompt text after replaying every system message.
pub fn current_system_prompt<'a, T: TranscriptEntry + 'a>(messages: impl IntoIterator<Item = &'a T>) -> String {
    current_system_message(messages).map(|m| system_message_text(&m)).unwrap_or_default()
}

/// A later system message rendered for APIs that accept system messages mid-conversation.
pub fn render_system_message_update(message: &SystemMessage) -> String {
    let mut parts = Vec::new();
    let text = message.content.to_text();
    if !text.is_empty() {
        parts.push(text);
    }
    for (name, value) in message.sections.as_deref().into_iter().flatten() {
        parts.push(match value {
            None => format!("Removed system prompt section \"{name}\"."),
            Some(value) => format!("Updated system prompt section \"{name}\":\n\n{value}"),
        });
    }
    parts.join("\n\n")
}

/// For APIs without mid-conversation system messages: the replayed system message leads,
/// every other system message is dropped.
pub fn collapse_system_messages(context: TranscriptContext) -> TranscriptContext {
    let head = current_system_message(context.messages());
    let mut messages: Vec<Message> = Vec::with_capacity(context.messages.len() + 1);
    messages.extend(head.map(Message::from));
    messages.extend(context.into_messages().into_iter().filter(|m| !matches!(m, Message::System(_))));
    TranscriptContext::from_messages(messages)
}

/// Keep later system messages when the model accepts them, else collapse them.
pub fn resolve_transcript(context: TranscriptContext, supports_mid_conversation_system: bool) -> TranscriptContext {
    if supports_mid_conversation_system {
        context
    } else {
        collapse_system_messages(context)
    }
}

/// The declaration of a tool: name, description, parameters, constrained sampling.
pub fn to_tool_declaration(tool: &Tool) -> Tool {
    Tool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: tool.parameters.clone(),
        constrained_sampling: tool.constrained_sampling.clone(),
    }
}

fn declaration_text(tool: &Tool) -> String {
    // `Tool` holds exactly the declaration fields, so it serializes as its declaration.
    let value = serde_json::to_value(tool).unwrap_or_default();
    crate::json::stringify(&value)
}

/// Whether two tools declare the same interface: their declarations serialize to the same
/// JSON text (so key order matters, as in the reference).
pub fn declarations_equal(left: &Tool, right: &Tool) -> bool {
    declaration_text(left) == declaration_text(right)
}

/// Tool changes between two complete tool states.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolStateChanges {
    /// New or changed tools, in current order.
    pub tools_added: Vec<Tool>,
    /// Gone or changed tools, in previous order.
    pub tools_removed: Vec<ToolReference>,
}

impl ToolStateChanges {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.tools_added.is_empty() && self.tools_removed.is_empty()
    }
}

/// Compare two tool states; a changed definition is a removal plus an addition.
///
/// Either side may hold tools or references to them (`&[Tool]`, `&[&Tool]`), so callers
/// need not copy declarations to compare them.
pub fn tool_state_changes<P: Borrow<Tool>, C: Borrow<Tool>>(previous: &[P], current: &[C]) -> ToolStateChanges {
    // The common case, an unchanged tool set, without serializing every declaration.
    if identical_tool_lists(previous, current) {
        return ToolStateChanges::default();
    }
    // Each entry is compared on its own declaration with the other side's last definition of
    // its name: a list that names a tool twice can both keep and change it.
    let previous: Vec<(&Tool, String)> = previous.iter().map(|t| (t.borrow(), declaration_text(t.borrow()))).collect();
    let current: Vec<(&Tool, String)> = current.iter().map(|t| (t.borrow(), declaration_text(t.borrow()))).collect();
    let last_previous: IndexMap<&str, &str> =
        previous.iter().map(|(t, text)| (t.name.as_str(), text.as_str())).collect();
    let last_current: IndexMap<&str, &str> = current.iter().map(|(t, text)| (t.name.as_str(), text.as_str())).collect();
    let tools_added = current
        .iter()
        .filter(|(tool, text)| last_previous.get(tool.name.as_str()) != Some(&text.as_str()))
        .map(|(tool, _)| to_tool_declaration(tool))
        .collect();
    let tools_removed = previous
        .iter()
        .filter(|(tool, text)| last_current.get(tool.name.as_str()) != Some(&text.as_str()))
        .map(|(tool, _)| ToolReference { name: tool.name.clone() })
        .collect();
    ToolStateChanges { tools_added, tools_removed }
}

/// Both lists declare the same tools in the same order, field for field and key for key, and
/// no name repeats (a repeated name can differ from its own last definition).
fn identical_tool_lists<P: Borrow<Tool>, C: Borrow<Tool>>(previous: &[P], current: &[C]) -> bool {
    previous.len() == current.len()
        && previous.iter().zip(current).all(|(p, c)| {
            let (p, c) = (p.borrow(), c.borrow());
            p.name == c.name
                && p.description == c.description
                && p.constrained_sampling == c.constrained_sampling
                && crate::json::js::same_representation(&p.parameters, &c.parameters)
        })
        && {
            let mut names = std::collections::HashSet::with_capacity(previous.len());
            previous.iter().all(|t| names.insert(t.borrow().name.as_str()))
        }
}

/// Index (among system messages) of the last removal or same-name redeclaration.
fn last_non_additive_change(system_messages: &[&SystemMessage]) -> Option<usize> {
    // A name declared before counts as redeclared even after its removal.
    let mut declared = std::collections::HashSet::new();
    let mut last = None;
    for (index, message) in system_messages.iter().enumerate() {
        if message.tools_removed.as_ref().is_some_and(|r| !r.is_empty()) {
            last = Some(index);
        }
        for tool in message.tools_added.iter().flatten() {
            if !declared.insert(tool.name.as_str()) {
                last = Some(index);
            }
        }
    }
    last
}

/// Whether the tool history has a change an addition-only transport cannot replay.
pub fn has_non_additive_tool_changes<T: TranscriptEntry>(messages: &[T]) -> bool {
    let system_messages: Vec<&SystemMessage> = systems(messages).collect();
    last_non_additive_change(&system_messages).is_some()
}

/// How a transport can express tool changes after the first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TranscriptToolSupport {
    /// Only the top-level tool list exists; it holds the current tools.
    None,
    /// Tools can be added in place, not removed or redefined.
    Additions,
    /// Every declaration is in place; a later one replaces an earlier one of the same name.
    Changes,
}

/// Where a request's tool declarations go.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TranscriptTools {
    /// The top-level tool list.
    pub request_tools: Vec<Tool>,
    /// How many leading system messages the top-level list already covers; later system
    /// messages carry their tool changes in place.
    pub folded_system_messages: usize,
}

/// Split tool declarations between the top-level list and in-place changes.
pub fn resolve_transcript_tools<T: TranscriptEntry>(messages: &[T], support: TranscriptToolSupport) -> TranscriptTools {
    let system_messages: Vec<&SystemMessage> = systems(messages).collect();
    match support {
        TranscriptToolSupport::None => TranscriptTools {
            request_tools: current_tools(&system_messages),
            folded_system_messages: system_messages.len(),
        },
        TranscriptToolSupport::Changes => TranscriptTools::default(),
        TranscriptToolSupport::Additions => {
            let lead = usize::from(initial_system_message(messages).is_some());
            let folded = lead.max(last_non_additive_change(&system_messages).map_or(0, |i| i + 1));
            TranscriptTools { request_tools: current_tools(&system_messages[..folded]), folded_system_messages: folded }
        }
    }
}
