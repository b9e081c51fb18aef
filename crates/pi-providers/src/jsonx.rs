//! JSON helpers with the reference's semantics, delegating to `pi_types::json`: JavaScript-exact
//! text, `JSON.parse` with V8's error messages and the reference's repair pass, tool-argument
//! parsing, and the incremental parser of streamed tool-call arguments.

use pi_types::json::ToolCallArgumentsStream;
use pi_types::JsonObject;
use serde_json::Value;

/// `JSON.stringify` of a value, JavaScript-exact.
pub(crate) fn stringify(value: &Value) -> String {
    pi_types::json::stringify(value)
}

/// `JSON.parse`: the value, or the parser's (V8-worded) error message.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    pi_types::json::parse_js(text).map_err(|e| e.message().to_owned())
}

/// `JSON.parse`, retried once after the reference's repair when the repair changes the text.
pub(crate) fn parse_with_repair(text: &str) -> Result<Value, String> {
    pi_types::json::parse_json_with_repair(text).map_err(|e| e.message().to_owned())
}

/// The final arguments of a tool call: one full parse of its complete text.
pub(crate) fn parse_tool_call_arguments(text: &str) -> (JsonObject, Option<String>) {
    let parsed = pi_types::json::parse_tool_call_arguments(Some(text));
    (parsed.arguments, parsed.arguments_error)
}

/// The arguments of one streaming tool call (raw text + partial view).
#[derive(Debug, Default)]
pub(crate) struct ArgsStream {
    inner: ToolCallArgumentsStream,
}

impl ArgsStream {
    /// Append a piece of argument text; the partial arguments when the parser published a
    /// new snapshot (`None`: unchanged, keep the block's current arguments).
    pub(crate) fn append(&mut self, delta: &str) -> Option<JsonObject> {
        let revision = self.inner.revision();
        self.inner.append(delta);
        (self.inner.revision() != revision).then(|| self.inner.arguments().clone())
    }

    /// Take the complete text: the missing piece as a delta when it continues the text so far.
    pub(crate) fn replace(&mut self, text: &str) -> (Option<String>, JsonObject) {
        let replaced = self.inner.replace(text);
        (replaced.delta, replaced.arguments.clone())
    }

    /// The final arguments and the argument error, if any.
    pub(crate) fn finish(&self) -> (JsonObject, Option<String>) {
        parse_tool_call_arguments(self.inner.text())
    }
}

/// JavaScript's `String.prototype.trim`.
pub(crate) fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_whitespace)
}

fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}
