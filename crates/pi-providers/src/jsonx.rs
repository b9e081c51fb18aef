//! JSON helpers with the reference's semantics: JavaScript-exact text, `JSON.parse` with the
//! reference's repair pass, tool-argument parsing, and a tolerant parser for the partial
//! argument text of a streaming tool call.
//!
//! The streaming parser here is a fallback until `pi_types::json::ToolCallArgumentsStream`
//! lands; it re-reads the whole argument text on every delta (quadratic in the argument
//! length, which stays small in practice) and follows the same visibility rules.

use pi_types::JsonObject;
use serde_json::{Map, Number, Value};

/// `JSON.stringify` of a value, JavaScript-exact.
pub(crate) fn stringify(value: &Value) -> String {
    pi_types::json::stringify(value)
}

/// `JSON.parse`: the value, or the parser's error message.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str::<Value>(text).map_err(|e| {
        let message = e.to_string();
        if message.is_empty() {
            "Unexpected end of JSON input".to_owned()
        } else {
            message
        }
    })
}

/// `JSON.parse`, retried once after [`repair_json`] when the repair changes the text.
pub(crate) fn parse_with_repair(text: &str) -> Result<Value, String> {
    match parse(text) {
        Ok(value) => Ok(value),
        Err(error) => {
            let repaired = repair_json(text);
            if repaired != text {
                parse(&repaired)
            } else {
                Err(error)
            }
        }
    }
}

/// Escape raw control characters inside strings and double backslashes before invalid escapes.
pub(crate) fn repair_json(json: &str) -> String {
    let chars: Vec<char> = json.chars().collect();
    let mut out = String::with_capacity(json.len() + 8);
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            out.push(c);
            if c == '"' {
                in_string = true;
            }
            i += 1;
            continue;
        }
        if c == '"' {
            out.push(c);
            in_string = false;
            i += 1;
            continue;
        }
        if c == '\\' {
            match chars.get(i + 1) {
                None => {
                    out.push_str("\\\\");
                    i += 1;
                    continue;
                }
                Some('u') => {
                    let digits: String = chars.iter().skip(i + 2).take(4).collect();
                    if digits.len() == 4 && digits.chars().all(|d| d.is_ascii_hexdigit()) {
                        out.push_str("\\u");
                        out.push_str(&digits);
                        i += 6;
                        continue;
                    }
                }
                Some(&next) if matches!(next, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => {
                    out.push('\\');
                    out.push(next);
                    i += 2;
                    continue;
                }
                _ => {}
            }
            out.push_str("\\\\");
            i += 1;
            continue;
        }
        if (c as u32) < 0x20 {
            match c {
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                other => out.push_str(&format!("\\u{:04x}", other as u32)),
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// The final arguments of a tool call: one full parse of its complete text.
pub(crate) fn parse_tool_call_arguments(text: &str) -> (JsonObject, Option<String>) {
    if js_trim(text).is_empty() {
        return (Map::new(), None);
    }
    let error = match parse_with_repair(text) {
        Ok(Value::Object(map)) => return (map, None),
        Ok(_) => "Tool arguments must be a JSON object".to_owned(),
        Err(message) => message,
    };
    (Map::new(), Some(format!("{error}\n\nReceived arguments:\n{text}")))
}

/// The arguments of one streaming tool call (raw text + partial view).
#[derive(Debug, Default)]
pub(crate) struct ArgsStream {
    text: String,
}

impl ArgsStream {
    /// Append a piece of argument text; the partial arguments.
    pub(crate) fn append(&mut self, delta: &str) -> JsonObject {
        self.text.push_str(delta);
        self.partial()
    }

    /// Take the complete text: the missing piece as a delta when it continues the text so far.
    pub(crate) fn replace(&mut self, text: &str) -> (Option<String>, JsonObject) {
        if let Some(rest) = text.strip_prefix(self.text.as_str()) {
            let delta = rest.to_owned();
            let args = if delta.is_empty() { self.partial() } else { self.append(&delta) };
            (Some(delta), args)
        } else {
            self.text.clear();
            (None, self.append(text))
        }
    }

    /// The final arguments and the argument error, if any.
    pub(crate) fn finish(&self) -> (JsonObject, Option<String>) {
        parse_tool_call_arguments(&self.text)
    }

    fn partial(&self) -> JsonObject {
        match partial_parse(&self.text) {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        }
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

/// A JSON number as JavaScript holds it (integers print without a fraction).
pub(crate) fn js_number(value: f64) -> Option<Value> {
    if !value.is_finite() {
        return None;
    }
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        // Exact: the value is an integer within the safe range.
        #[allow(clippy::cast_possible_truncation)]
        return Some(Value::from(value as i64));
    }
    Number::from_f64(value).map(Value::Number)
}

// ---------------------------------------------------------------------------------------------
// Tolerant partial parser
// ---------------------------------------------------------------------------------------------

const MAX_PENDING_SCALAR: usize = 64;

struct Partial<'a> {
    text: &'a str,
    pos: usize,
}

/// The value of possibly incomplete JSON text, read leniently.
pub(crate) fn partial_parse(text: &str) -> Option<Value> {
    let mut parser = Partial { text, pos: 0 };
    parser.skip_ws_and_junk_until_value()?;
    parser.value()
}

fn is_delimiter(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | ',' | ':' | '{' | '}' | '[' | ']' | '"')
}

impl Partial<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if matches!(c, ' ' | '\t' | '\n' | '\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// Skip to the first character that can start the root value.
    fn skip_ws_and_junk_until_value(&mut self) -> Option<()> {
        loop {
            self.skip_ws();
            match self.peek()? {
                ',' | ':' | '}' | ']' => {
                    self.pos += 1;
                }
                _ => return Some(()),
            }
        }
    }

    /// A value starting at the current position; `None` when it is dropped (invalid scalar).
    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            '"' => {
                self.pos += 1;
                Some(Value::String(self.string().0))
            }
            '{' => {
                self.pos += 1;
                Some(self.object())
            }
            '[' => {
                self.pos += 1;
                Some(self.array())
            }
            _ => self.scalar(),
        }
    }

    /// String body after the opening quote: (text, terminated).
    fn string(&mut self) -> (String, bool) {
        let mut out = String::new();
        let mut pending_high: Option<u16> = None;
        loop {
            let Some(c) = self.bump() else {
                flush_high(&mut out, &mut pending_high);
                return (out, false);
            };
            match c {
                '"' => {
                    flush_high(&mut out, &mut pending_high);
                    return (out, true);
                }
                '\\' => {
                    let Some(next) = self.peek() else {
                        // Unterminated escape: held back.
                        flush_high(&mut out, &mut pending_high);
                        return (out, false);
                    };
                    let simple = match next {
                        '"' => Some('"'),
                        '\\' => Some('\\'),
                        '/' => Some('/'),
                        'b' => Some('\u{8}'),
                        'f' => Some('\u{c}'),
                        'n' => Some('\n'),
                        'r' => Some('\r'),
                        't' => Some('\t'),
                        _ => None,
                    };
                    if let Some(decoded) = simple {
                        self.pos += 1;
                        flush_high(&mut out, &mut pending_high);
                        out.push(decoded);
                        continue;
                    }
                    if next == 'u' {
                        let rest = &self.text[self.pos + 1..];
                        let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).take(4).collect();
                        if hex.len() == 4 {
                            self.pos += 5;
                            let unit = u16::from_str_radix(&hex, 16).unwrap_or(0xfffd);
                            push_unit(&mut out, &mut pending_high, unit);
                            continue;
                        }
                        if rest.len() == hex.len() {
                            // `\u` with fewer than four digits at the end: held back.
                            flush_high(&mut out, &mut pending_high);
                            return (out, false);
                        }
                        // Not an escape: keep it as text and read on normally.
                        flush_high(&mut out, &mut pending_high);
                        out.push_str("\\u");
                        out.push_str(&hex);
                        self.pos += 1 + hex.len();
                        continue;
                    }
                    // Invalid escape: the backslash stays as text.
                    flush_high(&mut out, &mut pending_high);
                    out.push('\\');
                }
                other => {
                    flush_high(&mut out, &mut pending_high);
                    out.push(other);
                }
            }
        }
    }

    fn scalar(&mut self) -> Option<Value> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if is_delimiter(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        let token = &self.text[start..self.pos];
        if self.pos >= self.text.len() {
            if token.len() > MAX_PENDING_SCALAR {
                return None;
            }
            return pending_scalar_value(token);
        }
        scalar_value(token)
    }

    fn object(&mut self) -> Value {
        let mut map = Map::new();
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else { return Value::Object(map) };
            match c {
                '}' => {
                    self.pos += 1;
                    return Value::Object(map);
                }
                ',' | ':' | ']' => {
                    self.pos += 1;
                }
                '"' => {
                    self.pos += 1;
                    let (key, terminated) = self.string();
                    if !terminated {
                        return Value::Object(map);
                    }
                    self.skip_ws();
                    if self.peek() == Some(':') {
                        self.pos += 1;
                    }
                    self.skip_ws();
                    match self.peek() {
                        None => return Value::Object(map),
                        Some('}' | ',' | ']' | ':') => continue,
                        Some(_) => {
                            let at_end_before = self.pos;
                            if let Some(value) = self.value() {
                                map.insert(key, value);
                            }
                            if self.pos == at_end_before {
                                self.pos += self.peek().map_or(1, char::len_utf8);
                            }
                        }
                    }
                }
                '{' | '[' => {
                    // A value where a key belongs: read and drop it.
                    let _ = self.value();
                }
                _ => {
                    let _ = self.scalar();
                }
            }
        }
    }

    fn array(&mut self) -> Value {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else { return Value::Array(items) };
            match c {
                ']' => {
                    self.pos += 1;
                    return Value::Array(items);
                }
                ',' | ':' | '}' => {
                    self.pos += 1;
                }
                _ => {
                    let before = self.pos;
                    if let Some(value) = self.value() {
                        items.push(value);
                    }
                    if self.pos == before {
                        self.pos += c.len_utf8();
                    }
                }
            }
        }
    }
}

fn push_unit(out: &mut String, pending_high: &mut Option<u16>, unit: u16) {
    if (0xd800..0xdc00).contains(&unit) {
        flush_high(out, pending_high);
        *pending_high = Some(unit);
        return;
    }
    if (0xdc00..0xe000).contains(&unit) {
        if let Some(high) = pending_high.take() {
            let code = 0x10000 + ((u32::from(high) - 0xd800) << 10) + (u32::from(unit) - 0xdc00);
            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
        } else {
            out.push('\u{fffd}');
        }
        return;
    }
    flush_high(out, pending_high);
    out.push(char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}'));
}

fn flush_high(out: &mut String, pending_high: &mut Option<u16>) {
    if pending_high.take().is_some() {
        out.push('\u{fffd}');
    }
}

fn is_json_number(token: &str) -> bool {
    let bytes = token.as_bytes();
    let mut i = 0;
    if bytes.first() == Some(&b'-') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        _ => return false,
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    i == bytes.len()
}

fn number_value(token: &str) -> Option<Value> {
    token.parse::<f64>().ok().and_then(js_number)
}

fn scalar_value(token: &str) -> Option<Value> {
    match token {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        "null" => Some(Value::Null),
        _ if is_json_number(token) => number_value(token),
        _ => None,
    }
}

fn pending_scalar_value(token: &str) -> Option<Value> {
    if token.is_empty() {
        return None;
    }
    for (literal, value) in [("true", Value::Bool(true)), ("false", Value::Bool(false)), ("null", Value::Null)] {
        if literal.starts_with(token) {
            return Some(value);
        }
    }
    if is_json_number(token) {
        return number_value(token);
    }
    let trimmed = token.trim_end_matches(['+', '-']);
    let mantissa = trimmed.strip_suffix(['e', 'E'])?;
    if is_json_number(mantissa) && !mantissa.contains(['e', 'E']) {
        return number_value(mantissa);
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn partial_values() {
        assert_eq!(partial_parse(r#"{"a": "hel"#), Some(json!({"a": "hel"})));
        assert_eq!(partial_parse(r#"{"a": "x\"#), Some(json!({"a": "x"})));
        assert_eq!(partial_parse(r#"{"a": "#), Some(json!({})));
        assert_eq!(partial_parse(r#"{"a": tr"#), Some(json!({"a": true})));
        assert_eq!(partial_parse(r#"{"a": 1e"#), Some(json!({"a": 1})));
        assert_eq!(partial_parse(r#"{"a": [1, {"b": nu"#), Some(json!({"a": [1, {"b": null}]})));
        assert_eq!(partial_parse(r#"{"a": "\u00e"#), Some(json!({"a": ""})));
        assert_eq!(partial_parse(r#"{"a": "\u00e9"}"#), Some(json!({"a": "é"})));
        assert_eq!(partial_parse(r#"{"k"#), Some(json!({})));
    }

    #[test]
    fn final_arguments() {
        let (args, error) = parse_tool_call_arguments("{\"a\": \"x\ny\"}");
        assert_eq!(Value::Object(args), json!({"a": "x\ny"}));
        assert!(error.is_none());
        let (args, error) = parse_tool_call_arguments("[1]");
        assert!(args.is_empty());
        assert!(error.unwrap().starts_with("Tool arguments must be a JSON object"));
    }
}
