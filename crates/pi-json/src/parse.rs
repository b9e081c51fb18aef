//! Parsing of complete and partial JSON text the way the reference runtime does it.
//!
//! * [`parse_js`] is `JSON.parse`, with V8's error messages (Node 20 wording: `Unexpected end of
//!   JSON input`, `Unterminated string in JSON at position N`, `Expected ',' or '}' after property
//!   value in JSON at position N`, `Unexpected token 'x', "…" is not valid JSON`, …). Positions
//!   count UTF-16 code units, as in JavaScript.
//! * [`repair_json`] escapes raw control characters and invalid escapes inside string literals.
//! * [`parse_json_with_repair`] parses, and on failure parses the repaired text once.
//! * [`parse_tool_call_arguments`] is the one full parse of a finished tool call's arguments.
//! * [`parse_streaming_json`] parses possibly incomplete text, falling back to the lenient
//!   partial parser of the `partial-json` package that the reference uses.
//!
//! Differences from JavaScript that the JSON data model forces: a lone surrogate escape such as
//! `"\ud83d"` decodes to `U+FFFD` (Rust strings hold no lone surrogates), numbers that overflow to
//! `±Infinity` (and the `NaN`/`Infinity` words the partial parser accepts) become `null`, which is
//! what `JSON.stringify` makes of them, and nesting deeper than [`MAX_PARSE_DEPTH`] is rejected with
//! `Maximum call stack size exceeded` instead of being parsed.

use std::fmt;

use serde_json::{Map, Value};

use super::js::{js_trim, number_value, utf16_len};

/// Containers nested deeper than this are rejected by [`parse_js`] (V8 has no such limit; Rust's
/// recursive drop of [`Value`] needs one).
pub const MAX_PARSE_DEPTH: usize = 512;

/// The error of [`parse_js`]: the message of the `SyntaxError` V8's `JSON.parse` throws.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSyntaxError {
    message: String,
}

impl JsonSyntaxError {
    fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }

    /// The error message, e.g. `Unexpected end of JSON input`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JsonSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonSyntaxError {}

const UNEXPECTED_END: &str = "Unexpected end of JSON input";

/// Parses `text` like JavaScript's `JSON.parse(text)`.
pub fn parse_js(text: &str) -> Result<Value, JsonSyntaxError> {
    let mut parser = StrictParser { source: text, bytes: text.as_bytes(), pos: 0, depth: 0 };
    let value = parser.value()?;
    parser.skip_whitespace();
    if parser.pos < parser.bytes.len() {
        let position = utf16_len(text.get(..parser.pos).unwrap_or(text));
        return Err(JsonSyntaxError::new(format!(
            "Unexpected non-whitespace character after JSON at position {position}"
        )));
    }
    Ok(value)
}

struct StrictParser<'a> {
    source: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl StrictParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// `"{what} in JSON at position N"`, N in UTF-16 units.
    fn at(&self, what: &str, byte_pos: usize) -> JsonSyntaxError {
        let position = utf16_len(self.source.get(..byte_pos).unwrap_or(self.source));
        JsonSyntaxError::new(format!("{what} in JSON at position {position}"))
    }

    /// V8's message for an unexpected token at `byte_pos`.
    fn unexpected_at(&self, byte_pos: usize) -> JsonSyntaxError {
        match self.bytes.get(byte_pos) {
            None => JsonSyntaxError::new(UNEXPECTED_END),
            Some(b'"') => self.at("Unexpected string", byte_pos),
            Some(b'-' | b'0'..=b'9') => self.at("Unexpected number", byte_pos),
            Some(_) => {
                if matches!(self.source, "undefined" | "NaN" | "Infinity" | "[object Object]") {
                    return JsonSyntaxError::new(format!("\"{}\" is not valid JSON", self.source));
                }
                JsonSyntaxError::new(unexpected_token_message(self.source, byte_pos))
            }
        }
    }

    fn value(&mut self) -> Result<Value, JsonSyntaxError> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'"') => self.string().map(Value::String),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'n') => self.literal(b"null", Value::Null),
            _ => Err(self.unexpected_at(self.pos)),
        }
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Result<Value, JsonSyntaxError> {
        for (offset, expected) in word.iter().enumerate().skip(1) {
            if self.bytes.get(self.pos + offset) != Some(expected) {
                return Err(self.unexpected_at(self.pos + offset));
            }
        }
        self.pos += word.len();
        Ok(value)
    }

    fn enter(&mut self) -> Result<(), JsonSyntaxError> {
        self.depth += 1;
        if self.depth > MAX_PARSE_DEPTH {
            return Err(JsonSyntaxError::new("Maximum call stack size exceeded"));
        }
        Ok(())
    }

    fn object(&mut self) -> Result<Value, JsonSyntaxError> {
        self.enter()?;
        self.pos += 1;
        self.skip_whitespace();
        let mut members = Map::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Object(members));
        }
        let mut first = true;
        loop {
            if self.peek() != Some(b'"') {
                let what = if first { "Expected property name or '}'" } else { "Expected double-quoted property name" };
                return Err(self.at(what, self.pos));
            }
            let key = self.string()?;
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(if first {
                    self.at("Expected ':' after property name", self.pos)
                } else {
                    self.unexpected_at(self.pos)
                });
            }
            self.pos += 1;
            let value = self.value()?;
            // A repeated key keeps its first position and takes the last value, as in JavaScript.
            members.insert(key, value);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    first = false;
                }
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Object(members));
                }
                _ => {
                    return Err(self.at("Expected ',' or '}' after property value", self.pos));
                }
            }
        }
    }

    fn array(&mut self) -> Result<Value, JsonSyntaxError> {
        self.enter()?;
        self.pos += 1;
        self.skip_whitespace();
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.at("Expected ',' or ']' after array element", self.pos)),
            }
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    fn number(&mut self) -> Result<Value, JsonSyntaxError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.at("No number after minus sign", self.pos));
            }
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
            if matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.at("Unexpected number", self.pos));
            }
        } else {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.at("Unterminated fractional number", self.pos));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.at("Exponent part is missing a number", self.pos));
            }
            self.digits();
        }
        let text = self.source.get(start..self.pos).unwrap_or("0");
        Ok(number_value(text.parse::<f64>().unwrap_or(f64::NAN)))
    }

    /// The four hex digits at `at` as a UTF-16 unit, or the position of the first bad digit.
    fn hex4(&self, at: usize) -> Result<u16, usize> {
        let mut unit: u16 = 0;
        for offset in 0..4 {
            let digit =
                self.bytes.get(at + offset).and_then(|byte| char::from(*byte).to_digit(16)).ok_or(at + offset)?;
            unit = (unit << 4) | digit as u16;
        }
        Ok(unit)
    }

    fn string(&mut self) -> Result<String, JsonSyntaxError> {
        self.pos += 1;
        let mut text = String::new();
        loop {
            let run_start = self.pos;
            self.pos = crate::plain_run_end(self.source.as_bytes(), self.pos);
            text.push_str(self.source.get(run_start..self.pos).unwrap_or(""));
            match self.peek() {
                None => return Err(self.at("Unterminated string", self.pos)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(text);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let decoded = match self.peek() {
                        None => return Err(JsonSyntaxError::new(UNEXPECTED_END)),
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let unit = self.hex4(self.pos + 1).map_err(|bad| self.at("Bad Unicode escape", bad))?;
                            self.pos += 4;
                            self.decode_unit(unit)
                        }
                        Some(_) => return Err(self.at("Bad escaped character", self.pos)),
                    };
                    self.pos += 1;
                    text.push(decoded);
                }
                Some(_) => {
                    return Err(self.at("Bad control character in string literal", self.pos));
                }
            }
        }
    }

    /// Decodes the `\u` escape whose last hex digit is at `self.pos`, pairing a high surrogate
    /// with a directly following low-surrogate escape; lone surrogates become `U+FFFD`.
    fn decode_unit(&mut self, unit: u16) -> char {
        if (0xd800..0xdc00).contains(&unit) && self.bytes.get(self.pos + 1..self.pos + 3) == Some(b"\\u".as_slice()) {
            if let Ok(low) = self.hex4(self.pos + 3) {
                if (0xdc00..0xe000).contains(&low) {
                    self.pos += 6;
                    return combine_surrogates(unit, low);
                }
            }
        }
        char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}')
    }
}

/// The character of a surrogate pair.
pub(crate) fn combine_surrogates(high: u16, low: u16) -> char {
    let code = 0x10000 + ((u32::from(high) - 0xd800) << 10) + (u32::from(low) - 0xdc00);
    char::from_u32(code).unwrap_or('\u{fffd}')
}

/// `Unexpected token 'c', "…" is not valid JSON` with V8's context rules: the whole source when
/// it is shorter than 21 units, else 10 units of context on each side of the token.
fn unexpected_token_message(source: &str, byte_pos: usize) -> String {
    const CONTEXT: usize = 10;
    let token = source.get(byte_pos..).and_then(|rest| rest.chars().next()).map_or('\u{fffd}', |c| {
        if c.len_utf16() == 1 {
            c
        } else {
            '\u{fffd}'
        }
    });
    let units: Vec<u16> = source.encode_utf16().collect();
    let length = units.len();
    let position = utf16_len(source.get(..byte_pos).unwrap_or(source));
    if length < CONTEXT * 2 + 1 {
        return format!("Unexpected token '{token}', \"{source}\" is not valid JSON");
    }
    let slice = |start: usize, end: usize| String::from_utf16_lossy(units.get(start..end.min(length)).unwrap_or(&[]));
    if position < CONTEXT {
        format!("Unexpected token '{token}', \"{}\"... is not valid JSON", slice(0, position + CONTEXT))
    } else if position < length - CONTEXT {
        format!(
            "Unexpected token '{token}', ...\"{}\"... is not valid JSON",
            slice(position - CONTEXT, position + CONTEXT)
        )
    } else {
        format!("Unexpected token '{token}', ...\"{}\" is not valid JSON", slice(position - CONTEXT, length))
    }
}

/// Repairs malformed string literals: escapes raw control characters inside strings and doubles
/// backslashes that do not start a valid escape. Text outside strings is unchanged.
pub fn repair_json(json: &str) -> String {
    let mut repaired = String::with_capacity(json.len() + 8);
    let mut in_string = false;
    let mut chars = json.char_indices().peekable();
    while let Some((index, c)) = chars.next() {
        if !in_string {
            repaired.push(c);
            in_string = c == '"';
            continue;
        }
        match c {
            '"' => {
                repaired.push(c);
                in_string = false;
            }
            '\\' => match chars.peek().map(|(_, next)| *next) {
                None => repaired.push_str("\\\\"),
                Some(next) => {
                    if next == 'u' {
                        let digits = json
                            .get(index + 2..index + 6)
                            .filter(|digits| digits.len() == 4 && digits.bytes().all(|b| b.is_ascii_hexdigit()));
                        if let Some(digits) = digits {
                            repaired.push_str("\\u");
                            repaired.push_str(digits);
                            for _ in 0..5 {
                                chars.next();
                            }
                            continue;
                        }
                    }
                    if matches!(next, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') {
                        repaired.push('\\');
                        repaired.push(next);
                        chars.next();
                    } else {
                        repaired.push_str("\\\\");
                    }
                }
            },
            '\u{8}' => repaired.push_str("\\b"),
            '\u{c}' => repaired.push_str("\\f"),
            '\n' => repaired.push_str("\\n"),
            '\r' => repaired.push_str("\\r"),
            '\t' => repaired.push_str("\\t"),
            '\u{0}'..='\u{1f}' => {
                repaired.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            _ => repaired.push(c),
        }
    }
    repaired
}

/// Parses `json` with [`parse_js`]; when that fails and [`repair_json`] changes the text, parses
/// the repaired text instead (whose error, if any, is returned).
pub fn parse_json_with_repair(json: &str) -> Result<Value, JsonSyntaxError> {
    match parse_js(json) {
        Ok(value) => Ok(value),
        Err(error) => {
            let repaired = repair_json(json);
            if repaired != json {
                parse_js(&repaired)
            } else {
                Err(error)
            }
        }
    }
}

/// The arguments of a finished tool call, as [`parse_tool_call_arguments`] reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedArguments {
    /// The argument object; empty when the text was blank or malformed.
    pub arguments: Map<String, Value>,
    /// Why the text is not a JSON object, followed by the text itself; `None` when it parsed.
    pub arguments_error: Option<String>,
}

/// Parses the complete argument text of a finished tool call.
///
/// Blank or missing text gives no arguments and no error. Text that is not a JSON object (after
/// [`parse_json_with_repair`]) gives empty arguments and the error
/// `"{message}\n\nReceived arguments:\n{json}"`, where the message is the `JSON.parse` error or
/// `Tool arguments must be a JSON object`.
pub fn parse_tool_call_arguments(json: Option<&str>) -> ParsedArguments {
    let Some(json) = json.filter(|json| !js_trim(json).is_empty()) else {
        return ParsedArguments::default();
    };
    let message = match parse_json_with_repair(json) {
        Ok(Value::Object(mut arguments)) => {
            shrink_object(&mut arguments);
            return ParsedArguments { arguments, arguments_error: None };
        }
        Ok(_) => "Tool arguments must be a JSON object".to_owned(),
        Err(error) => error.message,
    };
    ParsedArguments {
        arguments: Map::new(),
        arguments_error: Some(format!("{message}\n\nReceived arguments:\n{json}")),
    }
}

/// Rebuilds `map` and the objects and arrays inside it with no spare capacity, moving every
/// key and value. A map that grew by insertion keeps room for as many entries as its hash
/// table could hold (a one-member object reserves three); a finished tool call's arguments
/// stay in the transcript for the whole conversation, so they are stored at their size.
pub fn shrink_object(map: &mut Map<String, Value>) {
    let grown = std::mem::take(map);
    let mut exact = Map::with_capacity(grown.len());
    for (key, mut value) in grown {
        shrink_value(&mut value);
        exact.insert(key, value);
    }
    *map = exact;
}

fn shrink_value(value: &mut Value) {
    match value {
        Value::Object(map) => shrink_object(map),
        Value::Array(items) => {
            items.shrink_to_fit();
            items.iter_mut().for_each(shrink_value);
        }
        _ => {}
    }
}

/// Parses possibly incomplete JSON text during streaming; never fails.
///
/// Blank or missing text gives `{}`. Complete text is parsed with [`parse_json_with_repair`];
/// otherwise the lenient partial parser reads the text, then the repaired text; `{}` when both
/// fail or give `null`. The result is whatever value the text holds, not necessarily an object.
pub fn parse_streaming_json(partial_json: Option<&str>) -> Value {
    let Some(json) = partial_json.filter(|json| !js_trim(json).is_empty()) else {
        return Value::Object(Map::new());
    };
    if let Ok(value) = parse_json_with_repair(json) {
        return value;
    }
    let partial = partial_parse(json).or_else(|()| partial_parse(&repair_json(json)));
    match partial {
        // `null` is replaced, but a root `NaN` or `Infinity` (shown as `null`) is kept.
        Ok((Value::Null, false)) | Err(()) => Value::Object(Map::new()),
        Ok((value, _)) => value,
    }
}

/// The `parse()` of the `partial-json` package with all partial types allowed; the flag tells
/// whether the root value is one of the words `NaN`, `Infinity` or `-Infinity`.
fn partial_parse(text: &str) -> Result<(Value, bool), ()> {
    let trimmed = js_trim(text);
    if trimmed.is_empty() {
        return Err(());
    }
    let mut parser =
        PartialParser { text: trimmed, bytes: trimmed.as_bytes(), index: 0, depth: 0, non_finite_root: false };
    let value = parser.any()?;
    Ok((value, parser.non_finite_root))
}

/// A port of `partial-json`'s parser, quirks included. Positions are byte offsets; they agree
/// with the JavaScript UTF-16 offsets wherever the algorithm cuts text (always next to an ASCII
/// character or at an end), and [`PartialParser::substring`] reproduces JavaScript's `substring`
/// clamping and argument swapping.
struct PartialParser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    index: usize,
    depth: usize,
    non_finite_root: bool,
}

impl PartialParser<'_> {
    fn remaining(&self) -> &str {
        self.text.get(self.index..).unwrap_or("")
    }

    /// JavaScript `text.substring(start, end)`; `None` stands for -1 (`lastIndexOf` found nothing).
    fn substring(&self, start: usize, end: Option<usize>) -> &str {
        let end = end.unwrap_or(0).min(self.text.len());
        let start = start.min(self.text.len());
        let (low, high) = if start <= end { (start, end) } else { (end, start) };
        self.text.get(low..high).unwrap_or("")
    }

    fn last_index_of(&self, byte: u8) -> Option<usize> {
        self.bytes.iter().rposition(|b| *b == byte)
    }

    fn skip_blank(&mut self) {
        while matches!(self.bytes.get(self.index), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.index += 1;
        }
    }

    /// Whether the text at the cursor starts with `word`, or is a proper prefix of it longer
    /// than `min_rest` that runs to the end of the text.
    fn word(&self, word: &str, min_rest: usize) -> bool {
        let rest = self.remaining();
        rest.starts_with(word) || (rest.len() < word.len() && rest.len() > min_rest && word.starts_with(rest))
    }

    fn any(&mut self) -> Result<Value, ()> {
        self.skip_blank();
        let Some(&byte) = self.bytes.get(self.index) else {
            return Err(());
        };
        match byte {
            b'"' => return self.string().map(Value::String),
            b'{' => return self.object(),
            b'[' => return self.array(),
            _ => {}
        }
        // Order as in `partial-json`; the partial `-Infinity` needs more than the sign.
        let words: [(&str, Value, usize); 6] = [
            ("null", Value::Null, 0),
            ("true", Value::Bool(true), 0),
            ("false", Value::Bool(false), 0),
            ("Infinity", Value::Null, 0),
            ("-Infinity", Value::Null, 1),
            ("NaN", Value::Null, 0),
        ];
        for (position, (word, value, min_rest)) in words.into_iter().enumerate() {
            if self.word(word, min_rest) {
                self.index += word.len();
                self.non_finite_root |= self.depth == 0 && position >= 3;
                return Ok(value);
            }
        }
        self.number()
    }

    fn string(&mut self) -> Result<String, ()> {
        let start = self.index;
        let mut escape = false;
        self.index += 1;
        while let Some(&byte) = self.bytes.get(self.index) {
            if byte == b'"' && !(escape && self.bytes.get(self.index - 1) == Some(&b'\\')) {
                break;
            }
            escape = if byte == b'\\' { !escape } else { false };
            self.index += 1;
        }
        let parsed = if self.bytes.get(self.index) == Some(&b'"') {
            self.index += 1;
            parse_js(self.substring(start, Some(self.index)))
        } else {
            let end = self.index - usize::from(escape);
            let mut closed = self.substring(start, Some(end)).to_owned();
            closed.push('"');
            parse_js(&closed).or_else(|_| {
                let mut retry = self.substring(start, self.last_index_of(b'\\')).to_owned();
                retry.push('"');
                parse_js(&retry)
            })
        };
        match parsed {
            Ok(Value::String(text)) => Ok(text),
            _ => Err(()),
        }
    }

    fn enter(&mut self) -> Result<(), ()> {
        self.depth += 1;
        if self.depth > MAX_PARSE_DEPTH {
            Err(())
        } else {
            Ok(())
        }
    }

    fn object(&mut self) -> Result<Value, ()> {
        self.enter()?;
        let members = self.object_members();
        self.depth -= 1;
        Ok(Value::Object(members))
    }

    /// The members of the object at the cursor. Any failure inside yields the members read so
    /// far, with the cursor left where the failure happened; a closing brace is consumed.
    fn object_members(&mut self) -> Map<String, Value> {
        self.index += 1;
        self.skip_blank();
        let mut members = Map::new();
        while self.bytes.get(self.index) != Some(&b'}') {
            self.skip_blank();
            if self.index >= self.bytes.len() {
                return members;
            }
            let Ok(key) = self.string() else {
                return members;
            };
            self.skip_blank();
            // Skip the colon, or whatever stands in its place.
            self.index += self.remaining().chars().next().map_or(1, char::len_utf8);
            let Ok(value) = self.any() else {
                return members;
            };
            // `obj["__proto__"] = value` sets the prototype (or nothing), never an own member.
            if key != "__proto__" {
                members.insert(key, value);
            }
            self.skip_blank();
            if self.bytes.get(self.index) == Some(&b',') {
                self.index += 1;
            }
        }
        self.index += 1;
        members
    }

    fn array(&mut self) -> Result<Value, ()> {
        self.enter()?;
        let items = self.array_items();
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    /// The items of the array at the cursor; like [`PartialParser::object_members`].
    fn array_items(&mut self) -> Vec<Value> {
        self.index += 1;
        let mut items = Vec::new();
        while self.bytes.get(self.index) != Some(&b']') {
            let Ok(item) = self.any() else {
                return items;
            };
            items.push(item);
            self.skip_blank();
            if self.bytes.get(self.index) == Some(&b',') {
                self.index += 1;
            }
        }
        self.index += 1;
        items
    }

    fn number(&mut self) -> Result<Value, ()> {
        if self.index == 0 {
            if self.text == "-" {
                return Err(());
            }
            return parse_js(self.text)
                .or_else(|_| parse_js(self.substring(0, self.last_index_of(b'e'))))
                .map_err(|_| ());
        }
        let start = self.index;
        if self.bytes.get(self.index) == Some(&b'-') {
            self.index += 1;
        }
        while let Some(byte) = self.bytes.get(self.index) {
            if matches!(byte, b',' | b']' | b'}') {
                break;
            }
            self.index += 1;
        }
        let token = self.substring(start, Some(self.index));
        match parse_js(token) {
            Ok(value) => Ok(value),
            Err(_) if token == "-" => Err(()),
            Err(_) => parse_js(self.substring(start, self.last_index_of(b'e'))).map_err(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(text: &str) -> String {
        match parse_js(text) {
            Ok(value) => format!("OK {value}"),
            Err(error) => error.message,
        }
    }

    #[test]
    fn v8_messages() {
        let cases = [
            ("", "Unexpected end of JSON input"),
            ("{", "Expected property name or '}' in JSON at position 1"),
            ("{\"a\"", "Expected ':' after property name in JSON at position 4"),
            ("{\"a\":1", "Expected ',' or '}' after property value in JSON at position 6"),
            ("{\"a\":1,", "Expected double-quoted property name in JSON at position 7"),
            ("[1", "Expected ',' or ']' after array element in JSON at position 2"),
            ("\"abc", "Unterminated string in JSON at position 4"),
            ("x", "Unexpected token 'x', \"x\" is not valid JSON"),
            ("abcdefghijklmnopqrstuvwxyz", "Unexpected token 'a', \"abcdefghij\"... is not valid JSON"),
            ("{\"aaaaaaaaaaaaaaaa\": xyz}", "Unexpected token 'x', ...\"aaaaaaa\": xyz}\" is not valid JSON"),
            ("[1,2,3,4,5,6,7,8,9,x]", "Unexpected token 'x', ...\"5,6,7,8,9,x]\" is not valid JSON"),
            ("-", "No number after minus sign in JSON at position 1"),
            ("1.", "Unterminated fractional number in JSON at position 2"),
            ("1e+", "Exponent part is missing a number in JSON at position 3"),
            ("-01", "Unexpected number in JSON at position 2"),
            ("{} x", "Unexpected non-whitespace character after JSON at position 3"),
            ("\"a\\q\"", "Bad escaped character in JSON at position 3"),
            ("\"\\u12x4\"", "Bad Unicode escape in JSON at position 5"),
            ("\"a\u{1}\"", "Bad control character in string literal in JSON at position 2"),
            ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),
            ("NaN", "\"NaN\" is not valid JSON"),
            ("\"\\", "Unexpected end of JSON input"),
            ("{\"a\":1,\"b\" 1}", "Unexpected number in JSON at position 11"),
            ("{\"a\":1,\"b\"\"c\"}", "Unexpected string in JSON at position 10"),
            ("{\"x\":falsy}", "Unexpected token 'y', \"{\"x\":falsy}\" is not valid JSON"),
            ("[1,2,3,4,5,6,7,8,9,10,11,😀]", "Unexpected token '\u{fffd}', ...\"8,9,10,11,😀]\" is not valid JSON"),
            ("{\"é\":1 é}", "Expected ',' or '}' after property value in JSON at position 7"),
        ];
        for (text, expected) in cases {
            assert_eq!(message(text), expected, "{text:?}");
        }
    }

    #[test]
    fn parses_values() {
        let value = parse_js(" {\"a\":[1,-0.5,1e2],\"a\":true,\"b\":null} ").expect("valid");
        assert_eq!(value, json!({"a": true, "b": null}));
        let value = parse_js("[1e2, -0, 0.1, 1e400, \"\\ud83d\\ude00\\u00e9\\ud83d\"]").expect("valid");
        assert_eq!(super::super::js::stringify(&value), "[100,0,0.1,null,\"😀é\u{fffd}\"]");
    }

    #[test]
    fn tool_call_arguments() {
        assert_eq!(parse_tool_call_arguments(None), ParsedArguments::default());
        assert_eq!(parse_tool_call_arguments(Some(" \u{feff} ")), ParsedArguments::default());
        let parsed = parse_tool_call_arguments(Some("[1]"));
        assert_eq!(
            parsed.arguments_error.as_deref(),
            Some("Tool arguments must be a JSON object\n\nReceived arguments:\n[1]")
        );
        let parsed = parse_tool_call_arguments(Some("{\"a\":\"x\ny\\d\"}"));
        assert_eq!(Value::Object(parsed.arguments), json!({"a": "x\ny\\d"}));
        let parsed = parse_tool_call_arguments(Some("{\"a\":1"));
        assert_eq!(
            parsed.arguments_error.as_deref(),
            Some("Expected ',' or '}' after property value in JSON at position 6\n\nReceived arguments:\n{\"a\":1")
        );
    }

    #[test]
    fn streaming_json() {
        assert_eq!(parse_streaming_json(Some("{\"a\":[1,2")), json!({"a":[1,2]}));
        assert_eq!(parse_streaming_json(Some("{\"a\":\"he")), json!({"a":"he"}));
        assert_eq!(parse_streaming_json(Some("")), json!({}));
        assert_eq!(parse_streaming_json(Some("nul")), json!({}));
        assert_eq!(parse_streaming_json(Some("[tr")), json!([true]));
    }
}
