//! JSON helpers with the reference's semantics, delegating to `pi_types::json`: JavaScript-exact
//! text and `JSON.parse` with V8's error messages and the reference's repair pass. (Streamed
//! tool-call arguments are parsed by `pi_types::AssistantMessageBuilder`.) Also JavaScript's
//! base-36 digits of an integer, which the reference's generated ids use.

use serde_json::Value;

/// JavaScript truthiness of a JSON value (`if (value)`): the reference's tests of optional
/// fields.
#[cfg(feature = "http")]
pub(crate) use pi_types::json::js::truthy;

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

/// `value` in base 36, lowercase: JavaScript's `value.toString(36)` of an integer.
pub(crate) fn base36(mut value: u64) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit((value % 36) as u32, 36).unwrap_or('0'));
        value /= 36;
        if value == 0 {
            break;
        }
    }
    digits.iter().rev().collect()
}
