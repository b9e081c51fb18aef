//! Trace comparison as `compare.py` does it: line by line, each line a JSON value; objects by
//! key set and values, arrays element-wise, numbers numerically (`1 == 1.0`), other scalars only
//! with their own type. Both runners already print normalized lines (timestamps `0`, `usage` and
//! `durationMs` dropped, keys sorted), so no further normalization is needed here.

use serde_json::Value;

/// Where two traces first differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// 1-based line number.
    pub line: usize,
    /// Path of the first differing field (`$` for the whole line).
    pub path: String,
    /// What the reference line is (`event message_end`, `request`, `<no line>`).
    pub expected: String,
    /// What our line is.
    pub actual: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {} (expected {}, got {})", self.line, self.path, self.expected, self.actual)
    }
}

fn parse(text: &str) -> Vec<Option<Value>> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).ok()).collect()
}

fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => x == y,
        _ => a.as_f64() == b.as_f64(),
    }
}

fn first_difference_in(expected: &Value, actual: &Value, path: String) -> Option<String> {
    match (expected, actual) {
        (Value::Number(a), Value::Number(b)) => (!same_number(a, b)).then_some(path),
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let child = format!("{path}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => first_difference_in(x, y, child),
                    _ => Some(child),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference_in(x, y, format!("{path}[{i}]")))
            .or_else(|| (a.len() != b.len()).then(|| format!("{path} (length {} vs {})", a.len(), b.len()))),
        (a, b) => (a != b).then_some(path),
    }
}

fn summary(row: Option<&Option<Value>>) -> String {
    match row {
        None => "<no line>".into(),
        Some(None) => "<invalid JSON>".into(),
        Some(Some(value)) => {
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or("?");
            match value.get("event").and_then(|e| e.get("type")).and_then(Value::as_str) {
                Some(event) => format!("{kind} {event}"),
                None => kind.to_owned(),
            }
        }
    }
}

/// The first difference between the reference trace and ours, if any.
pub fn first_difference(expected: &str, actual: &str) -> Option<Difference> {
    let (left, right) = (parse(expected), parse(actual));
    (0..left.len().max(right.len())).find_map(|index| {
        let path = match (left.get(index), right.get(index)) {
            (Some(Some(a)), Some(Some(b))) => first_difference_in(a, b, "$".into())?,
            _ => "$".into(),
        };
        Some(Difference {
            line: index + 1,
            path,
            expected: summary(left.get(index)),
            actual: summary(right.get(index)),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_by_value_and_keys_by_set() {
        assert_eq!(first_difference("{\"a\":1,\"b\":[2]}\n", "{\"b\":[2.0],\"a\":1.0}\n"), None);
    }

    #[test]
    fn reports_the_first_differing_field_and_missing_lines() {
        let diff = first_difference(
            "{\"kind\":\"event\",\"event\":{\"type\":\"turn_end\",\"n\":true}}\n{\"kind\":\"result\"}\n",
            "{\"kind\":\"event\",\"event\":{\"type\":\"turn_end\",\"n\":1}}\n",
        );
        assert_eq!(
            diff.map(|d| d.to_string()).as_deref(),
            Some("line 1: $.event.n (expected event turn_end, got event turn_end)")
        );
        let missing = first_difference("{\"kind\":\"state\"}\n{\"kind\":\"state\"}\n", "{\"kind\":\"state\"}\n");
        assert_eq!(missing.map(|d| d.to_string()).as_deref(), Some("line 2: $ (expected state, got <no line>)"));
    }
}
