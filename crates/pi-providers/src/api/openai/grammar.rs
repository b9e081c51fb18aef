//! Grammar-constrained tools of the OpenAI Responses family (pi-ai's `constrained-sampling.js`,
//! `resolveGrammarConstrainedSampling`).
//!
//! A tool with `ConstrainedSampling::Grammar` carries grammar variants by format
//! (`openai_lark`, `openai_regex`). On a model whose compat sets `supportsOpenAIGrammarTools`,
//! it is declared as a custom tool (`{type: "custom", format: {type: "grammar", syntax:
//! "lark" | "regex", definition}}`, the Lark variant first) whose freeform input the grammar
//! constrains. Its parameters must be an object with exactly one required string property: the
//! input is shown to the agent as that property (`{"<property>": "<input>"}`), earlier calls are
//! replayed as `custom_tool_call` items with that property's text and their results as
//! `custom_tool_call_output`. On other models the tool is an ordinary function tool.

use std::collections::HashMap;

use pi_types::{ConstrainedSampling, JsonObject, Message, Tool};
use serde_json::Value;

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

/// The freeform input of a grammar tool call: its input property's text.
pub(crate) fn call_input(name: &str, arguments: &JsonObject, property: &str) -> Result<String, String> {
    match arguments.get(property) {
        Some(Value::String(input)) => Ok(input.clone()),
        _ => Err(format!("Grammar tool call \"{name}\" requires argument \"{property}\" to be a string.")),
    }
}

/// The custom tool declaration of a grammar tool.
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
