//! JavaScript-exact JSON text for [`serde_json::Value`].
//!
//! The reference runtime serialises values with `JSON.stringify`, so wire bytes, hashes and golden
//! fixtures depend on its exact output. This module reproduces it for the JSON data model:
//!
//! * numbers print like `Number.prototype.toString` for doubles (shortest round-trip digits,
//!   `1e+21`, `1e-7`, `-0` as `0`); integers beyond 2^53 are first rounded to the nearest double,
//!   as JavaScript would have stored them;
//! * object members come in JavaScript property order: canonical array-index keys (`"0"` to
//!   `"4294967294"`) first in ascending numeric order, then the other keys in insertion order;
//! * strings are escaped like `JSON.stringify` (`U+2028`/`U+2029` and `U+007F` stay raw).
//!
//! It also has the UTF-16 helpers the ports need, because JavaScript measures and slices strings
//! in UTF-16 code units.

use serde_json::{Map, Number, Value};

/// Largest integer magnitude that JavaScript numbers represent exactly (2^53).
const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// Serialises `value` like `JSON.stringify(value)` (compact).
pub fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_stringify(&mut out, value);
    out
}

/// Appends the compact `JSON.stringify(value)` text of `value` to `out`.
pub fn write_stringify(out: &mut String, value: &Value) {
    write_value(out, value, 0, 0);
}

/// Serialises `value` like `JSON.stringify(value, null, indent)`.
///
/// As in JavaScript, an indent above 10 is treated as 10 and an indent of 0 gives compact text.
pub fn stringify_pretty(value: &Value, indent: usize) -> String {
    let mut out = String::new();
    write_value(&mut out, value, indent.min(10), 0);
    out
}

/// Where JSON text goes: the text itself, or only its UTF-16 length (one writer for both, so
/// a length is always that of the text the writer would produce).
trait JsonText {
    fn push_str(&mut self, text: &str);
    fn push(&mut self, c: char);
    fn push_number(&mut self, number: &Number);
    fn reserve(&mut self, _additional: usize) {}
    /// A string value or key, quoted and escaped.
    fn push_json_string(&mut self, text: &str) {
        write_escaped(self, text);
    }
}

impl JsonText for String {
    fn push_str(&mut self, text: &str) {
        String::push_str(self, text);
    }
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
    fn push_number(&mut self, number: &Number) {
        write_number(self, number);
    }
    fn reserve(&mut self, additional: usize) {
        String::reserve(self, additional);
    }
}

/// Counts UTF-16 code units instead of writing.
struct Utf16Length(usize);

impl JsonText for Utf16Length {
    fn push_str(&mut self, text: &str) {
        self.0 = self.0.saturating_add(utf16_len(text));
    }
    fn push(&mut self, c: char) {
        self.0 = self.0.saturating_add(c.len_utf16());
    }
    fn push_number(&mut self, number: &Number) {
        let mut text = String::new();
        write_number(&mut text, number);
        self.push_str(&text);
    }
    fn push_json_string(&mut self, text: &str) {
        // One pass over the bytes: the units each byte adds to the escaped text (see
        // `escape_of`; a UTF-8 sequence counts once, twice when it is four bytes long).
        let units: usize = text
            .bytes()
            .map(|byte| match byte {
                0x00..=0x1f | b'"' | b'\\' => escape_of(byte).map_or(6, str::len),
                0x80..=0xbf => 0,
                0xf0..=0xff => 2,
                _ => 1,
            })
            .sum();
        self.0 = self.0.saturating_add(units).saturating_add(2);
    }
}

/// The UTF-16 length of `JSON.stringify(object)` (compact), without building the text.
pub fn stringify_object_utf16_len(members: &Map<String, Value>) -> usize {
    let mut length = Utf16Length(0);
    write_object(&mut length, members, 0, 0);
    length.0
}

/// The UTF-16 length of `JSON.stringify(value)` (compact), without building the text.
pub fn stringify_utf16_len(value: &Value) -> usize {
    let mut length = Utf16Length(0);
    write_value(&mut length, value, 0, 0);
    length.0
}

/// The UTF-16 length of `JSON.stringify(text)`: the string quoted and escaped.
pub fn string_utf16_len(text: &str) -> usize {
    let mut length = Utf16Length(0);
    length.push_json_string(text);
    length.0
}

/// Whether `left` and `right` are equal JSON that also stringifies the same: object keys in the
/// same order, numbers of the same representation. When it holds, [`stringify()`] writes the same
/// text for both, found here without writing either (`1` and `1.0` stringify alike, but are not
/// the same representation).
pub fn same_representation(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            l.len() == r.len() && l.iter().zip(r).all(|((lk, lv), (rk, rv))| lk == rk && same_representation(lv, rv))
        }
        (Value::Array(l), Value::Array(r)) => {
            l.len() == r.len() && l.iter().zip(r).all(|(l, r)| same_representation(l, r))
        }
        (Value::Number(l), Value::Number(r)) => l.to_string() == r.to_string(),
        _ => left == right,
    }
}

fn write_value<O: JsonText>(out: &mut O, value: &Value, indent: usize, level: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => out.push_number(number),
        Value::String(text) => write_string_to(out, text),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                newline(out, indent, level + 1);
                write_value(out, item, indent, level + 1);
            }
            newline(out, indent, level);
            out.push(']');
        }
        Value::Object(members) => write_object(out, members, indent, level),
    }
}

/// Appends `JSON.stringify(object)` (compact) to `out`, for a JSON object held as a map
/// (tool-call arguments) without wrapping it in a `Value` first.
pub fn write_stringify_object(out: &mut String, members: &Map<String, Value>) {
    write_object(out, members, 0, 0);
}

fn write_object<O: JsonText>(out: &mut O, members: &Map<String, Value>, indent: usize, level: usize) {
    if members.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    let mut first = true;
    for_each_member_in_js_order(members, |key, member| {
        if !first {
            out.push(',');
        }
        first = false;
        newline(out, indent, level + 1);
        write_string_to(out, key);
        out.push(':');
        if indent > 0 {
            out.push(' ');
        }
        write_value(out, member, indent, level + 1);
    });
    newline(out, indent, level);
    out.push('}');
}

fn newline<O: JsonText>(out: &mut O, indent: usize, level: usize) {
    if indent == 0 {
        return;
    }
    out.push('\n');
    for _ in 0..indent * level {
        out.push(' ');
    }
}

/// Visits the members of `members` in JavaScript property order.
fn for_each_member_in_js_order<'a>(members: &'a Map<String, Value>, mut visit: impl FnMut(&'a str, &'a Value)) {
    let mut indexed: Vec<(u32, &'a str, &'a Value)> = Vec::new();
    for (key, member) in members {
        if let Some(index) = array_index(key) {
            indexed.push((index, key, member));
        }
    }
    if indexed.is_empty() {
        for (key, member) in members {
            visit(key, member);
        }
        return;
    }
    indexed.sort_unstable_by_key(|(index, _, _)| *index);
    for (_, key, member) in indexed {
        visit(key, member);
    }
    for (key, member) in members {
        if array_index(key).is_none() {
            visit(key, member);
        }
    }
}

/// The numeric value of a canonical array-index key (`"0"` to `"4294967294"`, no leading zeros).
pub fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || (bytes.len() > 1 && bytes[0] == b'0') {
        return None;
    }
    let mut value: u64 = 0;
    for &byte in bytes {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(byte - b'0');
    }
    if value <= 4_294_967_294 {
        u32::try_from(value).ok()
    } else {
        None
    }
}

/// The members of `members` as `(key, value)` pairs in JavaScript property order.
pub fn members_in_js_order(members: &Map<String, Value>) -> Vec<(&str, &Value)> {
    let mut ordered = Vec::with_capacity(members.len());
    for_each_member_in_js_order(members, |key, member| ordered.push((key, member)));
    ordered
}

fn write_number(out: &mut String, number: &Number) {
    const EXACT: u64 = 1 << 53;
    if let Some(unsigned) = number.as_u64() {
        if unsigned <= EXACT {
            out.push_str(&unsigned.to_string());
            return;
        }
    } else if let Some(signed) = number.as_i64() {
        if signed.unsigned_abs() <= EXACT {
            out.push_str(&signed.to_string());
            return;
        }
    }
    write_f64(out, number.as_f64().unwrap_or(f64::NAN));
}

/// Formats `value` like JavaScript's `Number.prototype.toString()` (radix 10).
///
/// `NaN` and the infinities print as `NaN`, `Infinity` and `-Infinity`; use
/// [`write_json_number`] for the `JSON.stringify` spelling (`null`).
pub fn format_number(value: f64) -> String {
    let mut out = String::new();
    write_f64_js(&mut out, value);
    out
}

/// Appends `value` as `JSON.stringify` writes a number: like [`format_number`], but non-finite
/// values become `null`.
pub fn write_json_number(out: &mut String, value: f64) {
    write_f64(out, value);
}

fn write_f64(out: &mut String, value: f64) {
    if value.is_finite() {
        write_f64_js(out, value);
    } else {
        out.push_str("null");
    }
}

fn write_f64_js(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
        return;
    }
    if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if value == 0.0 {
        out.push('0');
        return;
    }
    if value < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` prints the shortest digits that round-trip, as ECMAScript requires.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i64;
    // The value is 0.d1d2...dk × 10^n.
    let n = exponent + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
    } else if 0 < n && n <= 21 {
        let split = usize::try_from(n).unwrap_or(0);
        out.push_str(&digits[..split]);
        out.push('.');
        out.push_str(&digits[split..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
}

/// The JSON value of the JavaScript number `value`.
///
/// Integral values up to 2^53 in magnitude become integer numbers (`-0` becomes `0`), other
/// finite values floats; `NaN` and the infinities become `null`, which is what
/// `JSON.stringify` makes of them.
pub fn number_value(value: f64) -> Value {
    if !value.is_finite() {
        return Value::Null;
    }
    if value.fract() == 0.0 && value.abs() <= MAX_EXACT_INTEGER {
        // Exact: the value is integral and within the range of both integer types.
        return if value >= 0.0 {
            Value::Number(Number::from(value as u64))
        } else {
            Value::Number(Number::from(value as i64))
        };
    }
    Number::from_f64(value).map_or(Value::Null, Value::Number)
}

/// Escapes `text` as a `JSON.stringify` string literal, quotes included, appending to `out`.
pub fn write_string(out: &mut String, text: &str) {
    write_string_to(out, text);
}

fn write_string_to<O: JsonText>(out: &mut O, text: &str) {
    out.push_json_string(text);
}

/// The short escape `JSON.stringify` writes for a byte, if it has one; other control
/// characters are written as `\u00XX`, everything else as is.
fn escape_of(byte: u8) -> Option<&'static str> {
    Some(match byte {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        0x08 => "\\b",
        0x0c => "\\f",
        b'\n' => "\\n",
        b'\r' => "\\r",
        b'\t' => "\\t",
        _ => return None,
    })
}

fn write_escaped<O: JsonText + ?Sized>(out: &mut O, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let bytes = text.as_bytes();
    let mut run_start = 0;
    loop {
        let position = crate::plain_run_end(bytes, run_start);
        let Some(&byte) = bytes.get(position) else { break };
        out.push_str(&text[run_start..position]);
        match escape_of(byte) {
            Some(escape) => out.push_str(escape),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            }
        }
        run_start = position + 1;
    }
    out.push_str(&text[run_start..]);
    out.push('"');
}

/// The length of `text` in UTF-16 code units, JavaScript's `string.length`.
pub fn utf16_len(text: &str) -> usize {
    // Most text is ASCII: one unit per byte, checked a word at a time.
    if text.is_ascii() {
        return text.len();
    }
    // One unit per UTF-8 sequence, two for four-byte sequences (supplementary characters).
    text.bytes()
        .map(|byte| match byte {
            0x80..=0xbf => 0,
            0xf0..=0xff => 2,
            _ => 1,
        })
        .sum()
}

/// Cuts `text` into consecutive pieces of `units` UTF-16 code units, like repeated
/// `text.slice(i, i + units)` in JavaScript, but never inside a surrogate pair.
///
/// The cut points are the multiples of `units`, as in JavaScript; a cut that would fall between the
/// two halves of a surrogate pair moves one unit later, so the pair stays whole in the earlier
/// piece and the next piece is one unit shorter. A piece that this leaves empty (only possible with
/// `units == 1`) is skipped. An empty `text` gives exactly one empty piece; `units == 0` is treated
/// as 1.
pub fn utf16_chunks(text: &str, units: usize) -> Vec<&str> {
    let units = units.max(1);
    if text.is_empty() {
        return vec![""];
    }
    let mut pieces = Vec::with_capacity(text.len() / units + 1);
    let mut piece_start = 0;
    let mut offset16 = 0;
    let mut next_cut = units;
    for (byte_index, character) in text.char_indices() {
        if offset16 >= next_cut {
            // `offset16` may have passed the cut by one unit (a pair straddled it).
            if byte_index > piece_start {
                pieces.push(&text[piece_start..byte_index]);
                piece_start = byte_index;
            }
            while next_cut <= offset16 {
                next_cut += units;
            }
        }
        offset16 += character.len_utf16();
    }
    pieces.push(&text[piece_start..]);
    pieces
}

/// Sorts the members of every object in `value`, recursively, by key in ascending UTF-16 code
/// unit order (JavaScript's default string comparison).
pub fn sort_keys_recursive(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(sort_keys_recursive),
        Value::Object(members) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(members).into_iter().collect();
            entries.sort_by(|(left, _), (right, _)| compare_utf16(left, right));
            for (key, mut member) in entries {
                sort_keys_recursive(&mut member);
                members.insert(key, member);
            }
        }
        _ => {}
    }
}

/// Compares two strings by UTF-16 code units, like JavaScript's `<` on strings.
pub fn compare_utf16(left: &str, right: &str) -> std::cmp::Ordering {
    left.encode_utf16().cmp(right.encode_utf16())
}

/// JavaScript truthiness of a JSON value (`if (value)`): `null`, `false`, `0`, `NaN` and `""`
/// are falsy, every array and object is truthy.
///
/// ```
/// use pi_json::js::truthy;
/// assert!(!truthy(&serde_json::json!("")) && truthy(&serde_json::json!([])));
/// ```
pub fn truthy(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// JavaScript's `Number.parseFloat`: the longest numeric prefix after leading whitespace, or
/// `None` where JavaScript gives `NaN`.
///
/// ```
/// use pi_json::js::parse_float;
/// assert_eq!(parse_float(" 1.5s"), Some(1.5));
/// assert_eq!(parse_float("1e3x"), Some(1000.0));
/// assert_eq!(parse_float(".5"), Some(0.5));
/// assert_eq!(parse_float("1e"), Some(1.0));
/// assert_eq!(parse_float("Wed, 21 Oct 2015 07:28:00 GMT"), None);
/// ```
pub fn parse_float(text: &str) -> Option<f64> {
    let text = js_trim(text);
    if text.starts_with("Infinity") || text.starts_with("+Infinity") {
        return Some(f64::INFINITY);
    }
    if text.starts_with("-Infinity") {
        return Some(f64::NEG_INFINITY);
    }
    let bytes = text.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits_start = end;
    while bytes.get(end).is_some_and(u8::is_ascii_digit) {
        end += 1;
    }
    let mut had_digits = end > digits_start;
    if bytes.get(end) == Some(&b'.') {
        let frac_start = end + 1;
        let mut frac_end = frac_start;
        while bytes.get(frac_end).is_some_and(u8::is_ascii_digit) {
            frac_end += 1;
        }
        if frac_end > frac_start || had_digits {
            had_digits = had_digits || frac_end > frac_start;
            end = frac_end;
        }
    }
    if !had_digits {
        return None;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut exp_end = end + 1;
        if matches!(bytes.get(exp_end), Some(b'+' | b'-')) {
            exp_end += 1;
        }
        let exp_digits = exp_end;
        while bytes.get(exp_end).is_some_and(u8::is_ascii_digit) {
            exp_end += 1;
        }
        if exp_end > exp_digits {
            end = exp_end;
        }
    }
    text[..end].parse::<f64>().ok()
}

/// Trims JavaScript whitespace and line terminators from both ends, like `String.prototype.trim`.
///
/// This differs from [`str::trim`]: `U+FEFF` is trimmed and `U+0085` is not.
pub fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_whitespace)
}

/// Whether `c` is JavaScript `WhiteSpace` or `LineTerminator`.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_representation_needs_the_same_key_order_and_number_spelling() {
        let value = json!({"a": [1, 2.5, {"b": null}], "c": "x"});
        assert!(same_representation(&value, &value.clone()));
        assert!(!same_representation(&json!({"a": 1, "c": 2}), &json!({"c": 2, "a": 1})));
        assert!(!same_representation(&json!([1.0]), &json!([1])));
        assert_eq!(stringify(&json!([1.0])), stringify(&json!([1])));
        assert!(!same_representation(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn the_stringified_length_is_the_length_of_the_stringified_text() {
        let cases = [
            json!({}),
            json!({"n": "00000007"}),
            json!({"quote\"d": "back\\slash", "ctl": "\u{1}\u{8}\u{c}\n\r\t\u{1f}", "del": "\u{7f}"}),
            json!({"wide": "é漢字😀\u{2028}", "😀": ["😀", 1.5, -0.0, 1e21, null, true, {"2": 1, "1": 2}]}),
            json!({"nested": {"deep": [[], {}, [{"a": "b"}]], "big": 12345678901234567890u64}}),
        ];
        for case in cases {
            let Value::Object(members) = &case else { unreachable!() };
            let mut text = String::new();
            write_stringify_object(&mut text, members);
            assert_eq!(stringify_object_utf16_len(members), utf16_len(&text), "{text}");
        }
    }

    fn float(value: f64) -> Value {
        Value::Number(Number::from_f64(value).expect("finite"))
    }

    #[test]
    fn numbers_print_like_javascript() {
        let cases: &[(Value, &str)] = &[
            (json!(1), "1"),
            (float(1.0), "1"),
            (float(1.5), "1.5"),
            (float(1e21), "1e+21"),
            (float(1e-7), "1e-7"),
            (float(123456789012345680000.0), "123456789012345680000"),
            (float(0.1 + 0.2), "0.30000000000000004"),
            (float(-0.0), "0"),
            (float(5e-324), "5e-324"),
            (json!(u64::MAX), "18446744073709552000"),
            (json!(9007199254740993_u64), "9007199254740992"),
            (json!(i64::MIN), "-9223372036854776000"),
            (float(1e-6), "0.000001"),
            (float(1.5e300), "1.5e+300"),
            (float(-1.5e-300), "-1.5e-300"),
            (float(123e-20), "1.23e-18"),
            (float(1e20), "100000000000000000000"),
            (float(0.000001234), "0.000001234"),
            (float(1.7976931348623157e308), "1.7976931348623157e+308"),
        ];
        for (value, expected) in cases {
            assert_eq!(stringify(value), *expected, "{value:?}");
        }
        assert_eq!(format_number(f64::NAN), "NaN");
        assert_eq!(format_number(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(number_value(f64::INFINITY), Value::Null);
        assert_eq!(number_value(-0.0), json!(0));
        assert_eq!(number_value(2.5), float(2.5));
    }

    #[test]
    fn objects_list_index_keys_first() {
        let value = json!({"10":1,"2":2,"a":3,"01":4,"-1":5,"4294967294":6,"4294967295":7,"b":8,"0":9});
        assert_eq!(
            stringify(&value),
            r#"{"0":9,"2":2,"10":1,"4294967294":6,"a":3,"01":4,"-1":5,"4294967295":7,"b":8}"#
        );
    }

    #[test]
    fn strings_escape_like_javascript() {
        let value = json!("q\"b\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}\u{2028}\u{2029}é😀\u{0}");
        assert_eq!(stringify(&value), "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}\u{2028}\u{2029}é😀\\u0000\"");
    }

    #[test]
    fn pretty_matches_javascript() {
        let value = json!({"a":[1,{"b":2,"1":[]},{}],"c":"x"});
        assert_eq!(
            stringify_pretty(&value, 2),
            "{\n  \"a\": [\n    1,\n    {\n      \"1\": [],\n      \"b\": 2\n    },\n    {}\n  ],\n  \"c\": \"x\"\n}"
        );
        assert_eq!(stringify_pretty(&json!([[]]), 3), "[\n   []\n]");
        assert_eq!(stringify_pretty(&json!({}), 2), "{}");
    }

    #[test]
    fn utf16_helpers() {
        assert_eq!(utf16_len("aé😀"), 4);
        assert_eq!(utf16_chunks("", 3), vec![""]);
        assert_eq!(utf16_chunks("abcdefg", 3), vec!["abc", "def", "g"]);
        // The pair at units 1..3 straddles the cut at 2: it stays in the first piece.
        assert_eq!(utf16_chunks("a😀bcd", 2), vec!["a😀", "b", "cd"]);
        assert_eq!(utf16_chunks("a😀b", 1), vec!["a", "😀", "b"]);
        assert_eq!(utf16_chunks("😀😀", 2), vec!["😀", "😀"]);
    }

    #[test]
    fn sorts_keys_by_utf16() {
        let mut value = json!({"b":1,"a":{"z":1,"\u{ff61}":2,"😀":3},"A":[{"y":1,"x":2}]});
        sort_keys_recursive(&mut value);
        assert_eq!(
            serde_json::to_string(&value).expect("serialises"),
            r#"{"A":[{"x":2,"y":1}],"a":{"z":1,"😀":3,"｡":2},"b":1}"#
        );
    }

    #[test]
    fn trims_javascript_whitespace() {
        assert_eq!(js_trim("\u{feff} x \u{2028}"), "x");
        assert_eq!(js_trim("\u{85}x"), "\u{85}x");
    }
}
