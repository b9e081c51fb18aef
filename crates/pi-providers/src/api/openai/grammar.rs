//! Grammar-constrained tools of the OpenAI APIs (pi-ai's `constrained-sampling.js`,
//! `resolveGrammarConstrainedSampling`): the Responses family and Chat Completions.
//!
//! A tool with `ConstrainedSampling::Grammar` carries grammar variants by format
//! (`openai_lark`, `openai_regex`). On a model whose compat sets `supportsOpenAIGrammarTools`,
//! it is declared as a custom tool with a grammar format (`syntax` `lark` or `regex` and its
//! `definition`, the Lark variant first; [`declaration`] for Responses,
//! [`completions_declaration`] for Chat Completions) whose freeform input the grammar
//! constrains. Its parameters must be an object with exactly one required string property: the
//! input is shown to the agent as that property (`{"<property>": "<input>"}`, streamed as that
//! JSON text by [`CustomInput`]), and earlier calls are replayed as custom tool calls with that
//! property's text (Responses: `custom_tool_call` items, their results
//! `custom_tool_call_output`; Chat Completions: `tool_calls` entries of type `custom`). On
//! other models the tool is an ordinary function tool.

use std::collections::HashMap;

use pi_types::{AssistantContent, ConstrainedSampling, JsonObject, Message, Tool, TranscriptContext};
use serde_json::{json, Value};

use crate::api::support::Stop;
use crate::js_json;

/// A tool's grammar, as sent.
pub(crate) struct Grammar<'a> {
    /// `lark` or `regex`.
    pub syntax: &'static str,
    pub definition: &'a str,
    /// The parameter the freeform input is shown as.
    pub input_property: String,
}

/// The grammar a tool is declared with; `Ok(None)` for a tool without one or a model without
/// grammar tools; an error for a grammar tool that cannot be declared.
pub(crate) fn resolve(tool: &Tool, supported: bool) -> Result<Option<Grammar<'_>>, String> {
    let Some(ConstrainedSampling::Grammar { variants }) = &tool.constrained_sampling else { return Ok(None) };
    if !supported {
        return Ok(None);
    }
    let usable = |key: &str| variants.get(key).map(String::as_str).filter(|d| !d.trim().is_empty());
    let (syntax, definition) = match (usable("openai_lark"), usable("openai_regex")) {
        (Some(lark), _) => ("lark", lark),
        (None, Some(regex)) => ("regex", regex),
        (None, None) => {
            return Err(format!(
                "Tool \"{}\" cannot use grammar constrained sampling: no supported grammar variant was provided.",
                tool.name
            ))
        }
    };
    let input_property = input_property(&tool.parameters)
        .map_err(|reason| format!("Tool \"{}\" cannot use grammar constrained sampling: {reason}.", tool.name))?;
    Ok(Some(Grammar { syntax, definition, input_property }))
}

fn input_property(schema: &Value) -> Result<String, String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("grammar constrained sampling requires an object parameter schema".into());
    }
    let property = match schema.get("required").and_then(Value::as_array).map(Vec::as_slice) {
        Some([Value::String(name)]) => name.clone(),
        _ => return Err("grammar constrained sampling requires exactly one required string property".into()),
    };
    let Some(declared) = schema.get("properties").and_then(|p| p.get(&property)).filter(|p| is_truthy(p)) else {
        return Err(format!("grammar constrained sampling requires a properties entry for {property}"));
    };
    if declared.get("type").and_then(Value::as_str) != Some("string") {
        return Err(format!("grammar constrained sampling property {property} must have type string"));
    }
    Ok(property)
}

/// JavaScript truthiness of a schema value (a property entry may be `false` or `null`).
fn is_truthy(value: &Value) -> bool {
    !matches!(value, Value::Null | Value::Bool(false))
}

/// The input property of every grammar tool the transcript ever declared (the latest
/// definition of a name wins), by tool name.
pub(crate) fn input_properties(messages: &[Message], supported: bool) -> Result<HashMap<String, String>, String> {
    let mut declared: Vec<&Tool> = Vec::new();
    for message in messages {
        let Message::System(system) = message else { continue };
        for tool in system.tools_added.iter().flatten() {
            match declared.iter_mut().find(|t| t.name == tool.name) {
                Some(slot) => *slot = tool,
                None => declared.push(tool),
            }
        }
    }
    let mut properties = HashMap::new();
    for tool in declared {
        if let Some(grammar) = resolve(tool, supported)? {
            properties.insert(tool.name.clone(), grammar.input_property);
        }
    }
    Ok(properties)
}

/// The input property of each grammar tool the transcript declares, by name; an error for a
/// grammar tool that cannot be declared, or an earlier call of one without its text input.
pub(crate) fn request_inputs(context: &TranscriptContext, supported: bool) -> Result<HashMap<String, String>, String> {
    let inputs = input_properties(context.messages(), supported)?;
    for message in context.messages() {
        let Message::Assistant(assistant) = message else { continue };
        for block in &assistant.content {
            if let AssistantContent::ToolCall(call) = block {
                if let Some(property) = inputs.get(call.name.as_str()) {
                    call_input(&call.name, &call.arguments, property)?;
                }
            }
        }
    }
    Ok(inputs)
}

/// The freeform input of a grammar tool call: its input property's text.
pub(crate) fn call_input(name: &str, arguments: &JsonObject, property: &str) -> Result<String, String> {
    match arguments.get(property) {
        Some(Value::String(input)) => Ok(input.clone()),
        _ => Err(format!("Grammar tool call \"{name}\" requires argument \"{property}\" to be a string.")),
    }
}

/// The custom tool declaration of a grammar tool on Chat Completions.
pub(crate) fn completions_declaration(tool: &Tool, grammar: &Grammar<'_>) -> Value {
    json!({
        "type": "custom",
        "custom": {
            "name": tool.name,
            "description": tool.description,
            "format": {"type": "grammar", "grammar": {"syntax": grammar.syntax, "definition": grammar.definition}},
        },
    })
}

/// The custom tool declaration of a grammar tool on the Responses family.
pub(crate) fn declaration(tool: &Tool, grammar: &Grammar<'_>, search_result: bool) -> Value {
    let mut custom = serde_json::Map::new();
    custom.insert("type".into(), Value::String("custom".into()));
    custom.insert("name".into(), Value::String(tool.name.clone()));
    custom.insert("description".into(), Value::String(tool.description.clone()));
    custom.insert(
        "format".into(),
        serde_json::json!({"type": "grammar", "syntax": grammar.syntax, "definition": grammar.definition}),
    );
    if search_result {
        custom.insert("defer_loading".into(), Value::Bool(true));
    }
    Value::Object(custom)
}

/// The argument property a custom tool call's input is shown under, unless it is a grammar
/// tool's (whose single required string property it is).
pub(crate) const CUSTOM_INPUT_PROPERTY: &str = "input";

/// A custom tool call's freeform input, streamed as the JSON text of `{"<property>": <text>}`:
/// the opening `{"<property>":"` goes with the first non-empty piece, each piece follows as
/// escaped JSON string text, and closing adds the rest of the final input and `"}`.
#[derive(Default)]
pub(crate) struct CustomInput {
    pub(crate) property: String,
    pub(crate) input: String,
    started: bool,
    closed: bool,
    /// JSON text made from the item's initial input, sent with the next delta event.
    pub(crate) unsent: String,
}

impl CustomInput {
    /// An empty input shown as `property`.
    pub(crate) fn new(property: &str) -> Self {
        Self { property: property.to_owned(), ..Self::default() }
    }

    fn opening(&mut self) -> String {
        if std::mem::replace(&mut self.started, true) {
            String::new()
        } else {
            format!("{{{}:\"", js_json::stringify(&json!(self.property)))
        }
    }

    fn escaped(text: &str) -> String {
        let quoted = js_json::stringify(&json!(text));
        quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or("").to_owned()
    }

    /// Appends a piece; the JSON text for it (`None` for an empty piece).
    pub(crate) fn append(&mut self, piece: &str) -> Result<Option<String>, Stop> {
        if self.closed {
            return Err(Stop::error(format!(
                "grammar tool input for property \"{}\" changed after it was closed",
                self.property
            )));
        }
        if piece.is_empty() {
            return Ok(None);
        }
        self.input.push_str(piece);
        Ok(Some(self.opening() + &Self::escaped(piece)))
    }

    /// Closes the input with the provider's complete input, if it sent one; the rest of the JSON
    /// text (`None` when already closed with the same input).
    pub(crate) fn close(&mut self, last: Option<&str>) -> Result<Option<String>, Stop> {
        if self.closed {
            if last.is_none_or(|l| l == self.input) {
                return Ok(None);
            }
            return Err(Stop::error(format!(
                "grammar tool input for property \"{}\" changed after it was closed",
                self.property
            )));
        }
        let rest = match last {
            Some(last) => match last.strip_prefix(self.input.as_str()) {
                Some(rest) => rest.to_owned(),
                None => {
                    return Err(Stop::error(format!(
                        "grammar tool input for property \"{}\" changed non-monotonically",
                        self.property
                    )))
                }
            },
            None => String::new(),
        };
        if let Some(last) = last {
            self.input = last.to_owned();
        }
        self.closed = true;
        Ok(Some(format!("{}{}\"}}", self.opening(), Self::escaped(&rest))))
    }

    /// What to send for a piece of JSON text: the initial input's text goes first.
    pub(crate) fn send(&mut self, text: Option<String>) -> Option<String> {
        if self.unsent.is_empty() {
            return text;
        }
        Some(std::mem::take(&mut self.unsent) + text.as_deref().unwrap_or(""))
    }
}
