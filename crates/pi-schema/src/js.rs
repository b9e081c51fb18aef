//! JavaScript value semantics the reference relies on: `===`, deep equality, `Number(string)`, `String(number)`
//! and the type names used in messages.

use serde_json::{Number, Value};

/// The largest integer a double holds exactly (`Number.MAX_SAFE_INTEGER`).
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The number of a JSON number as JavaScript sees it (a double).
pub(crate) fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// `Number.isInteger(v)`.
pub(crate) fn is_integer(v: &Value) -> bool {
    num(v).is_some_and(|x| x.is_finite() && x.fract() == 0.0)
}

/// `a === b`: primitives by value, objects and arrays never (no two distinct values share an identity here).
pub(crate) fn strict_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(_), Value::Number(_)) => num(a) == num(b),
        _ => false,
    }
}

/// JSON equality as `const`, `enum` and `uniqueItems` compare (object key order does not matter).
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| deep_equal(p, q)))
        }
        _ => strict_eq(a, b),
    }
}

/// The type name of a value in "got ..." messages: integers are named apart from other numbers.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
    }
}

/// A double as a JSON value: integral values become integers (so `-0` is `0`), others stay doubles.
pub(crate) fn number_value(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.2e18 {
        // In range: the cast is exact for an integral double of this size.
        #[allow(clippy::cast_possible_truncation)]
        let i = x as i64;
        return Value::Number(Number::from(i));
    }
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// `String(x)`, as JavaScript prints a number (shortest round-trip digits).
pub(crate) fn number_to_string(x: f64) -> String {
    pi_json::js::format_number(x)
}

/// JavaScript's white space and line terminators, which `Number()` and `trim()` strip.
pub(crate) fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// `Number(s)` for a string: NaN when it is no numeric literal.
pub(crate) fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_space);
    if t.is_empty() {
        return 0.0;
    }
    let radix = match t.get(..2) {
        Some("0x" | "0X") => 16,
        Some("0o" | "0O") => 8,
        Some("0b" | "0B") => 2,
        _ => 10,
    };
    if radix != 10 {
        let body = &t[2..];
        if body.is_empty() {
            return f64::NAN;
        }
        let mut x = 0.0_f64;
        for c in body.chars() {
            match c.to_digit(radix) {
                Some(d) => x = x * f64::from(radix) + f64::from(d),
                None => return f64::NAN,
            }
        }
        return x;
    }
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if unsigned == "Infinity" {
        return if t.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY };
    }
    if !is_decimal_literal(unsigned) {
        return f64::NAN;
    }
    t.parse::<f64>().unwrap_or(f64::NAN)
}

/// `digits[.digits][e[+-]digits]` or `.digits[...]`, without a sign.
fn is_decimal_literal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || (int.is_empty() && frac.is_empty()) {
        return false;
    }
    match exponent {
        None => true,
        Some(e) => {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && digits(e)
        }
    }
}

/// JavaScript's `String(x)` of a JSON value inside a `type` list joined for a message (`[].join` conventions).
pub(crate) fn join_string(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(_) => num(v).map(number_to_string).unwrap_or_default(),
        Value::Array(items) => items.iter().map(join_string).collect::<Vec<_>>().join(","),
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// A property name as `String(key)` gives it for a JSON value used as a key (`required` entries).
pub(crate) fn key_string(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("null".to_owned()),
        Value::Bool(_) | Value::String(_) | Value::Number(_) => Some(join_string(v)),
        _ => None,
    }
}

/// A JSON Pointer one level below `path`.
pub(crate) fn pointer(path: &str, key: &str) -> String {
    let mut out = String::with_capacity(path.len() + key.len() + 1);
    out.push_str(path);
    out.push('/');
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_numbers_like_javascript() {
        let cases = [
            (1.5, "1.5"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (0.0000001, "1e-7"),
            (0.000001, "0.000001"),
            (-0.25, "-0.25"),
            (123.456, "123.456"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-0.0, "0"),
            (42.0, "42"),
        ];
        for (x, s) in cases {
            assert_eq!(number_to_string(x), s);
        }
    }

    #[test]
    fn parses_strings_like_number() {
        assert_eq!(string_to_number(" 42 "), 42.0);
        assert_eq!(string_to_number(""), 0.0);
        assert_eq!(string_to_number("0x1F"), 31.0);
        assert_eq!(string_to_number("0b101"), 5.0);
        assert_eq!(string_to_number("1e3"), 1000.0);
        assert_eq!(string_to_number(".5"), 0.5);
        assert_eq!(string_to_number("5."), 5.0);
        assert_eq!(string_to_number("-Infinity"), f64::NEG_INFINITY);
        for bad in ["inf", "NaN", "1.5.2", "12n", "-0x1", "1_000", "e5", "+", "0x"] {
            assert!(string_to_number(bad).is_nan(), "{bad}");
        }
    }

    #[test]
    fn compares_like_javascript() {
        let a = serde_json::json!({"a": [1, 2.0]});
        let b = serde_json::json!({"a": [1.0, 2]});
        assert!(deep_equal(&a, &b));
        assert!(!strict_eq(&a, &b));
        assert_eq!(type_name(&serde_json::json!(2.0)), "integer");
        assert_eq!(number_value(-0.0), serde_json::json!(0));
    }
}
