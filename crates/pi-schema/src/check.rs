//! The boolean check: whether a value is valid, keyword by keyword as the reference's compiled checks decide.
//! Also the recursion budget shared by the check, the coercion and the explanations of one `parse()`.

use std::cell::Cell;

use serde_json::{Map, Value};

use super::js;
use super::schema::{Compiled, Node, NodeId, SchemaNode};

/// How many nested steps (into members, through `$ref`, `allOf`, ...) one pass may take before it gives up. The
/// reference runs out of stack instead ("Maximum call stack size exceeded"), for schemas that recurse in place.
pub(crate) const MAX_DEPTH: usize = 200;

/// One run over a compiled schema: the check, with the recursion budget that every pass of the run shares.
pub(crate) struct Run<'a> {
    pub c: &'a Compiled,
    depth: Cell<usize>,
    overflow: Cell<bool>,
}

impl<'a> Run<'a> {
    pub(crate) fn new(c: &'a Compiled) -> Self {
        Self { c, depth: Cell::new(0), overflow: Cell::new(false) }
    }

    /// Whether some pass ran out of its recursion budget.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflow.get()
    }

    /// `f` one level deeper, or `fallback` when the budget is spent.
    pub(crate) fn descend<T>(&self, fallback: impl FnOnce() -> T, f: impl FnOnce() -> T) -> T {
        let depth = self.depth.get();
        if depth >= MAX_DEPTH {
            self.overflow.set(true);
            return fallback();
        }
        self.depth.set(depth + 1);
        let result = f();
        self.depth.set(depth);
        result
    }

    /// Whether `v` is valid against the node `id`.
    pub(crate) fn ok(&self, id: NodeId, v: &Value) -> bool {
        self.descend(|| false, || self.check(id, v))
    }

    fn check(&self, id: NodeId, v: &Value) -> bool {
        let s = match self.c.node(id) {
            Node::Bool(b) => return *b,
            Node::Schema(s) => s,
        };
        if let Some(types) = &s.types {
            if !types.iter().any(|t| t.matches(v)) {
                return false;
            }
        }
        let own = match v {
            Value::String(text) => string_ok(s, text),
            Value::Number(_) => js::num(v).is_some_and(|x| number_ok(s, x)),
            Value::Object(map) => self.object_ok(s, map, v),
            Value::Array(items) => self.array_ok(s, items),
            _ => true,
        };
        own && self.in_place_ok(s, v)
    }

    /// The keywords that apply to the value whatever its type.
    fn in_place_ok(&self, s: &SchemaNode, v: &Value) -> bool {
        if let Some(values) = &s.enum_values {
            if !enum_ok(values, v) {
                return false;
            }
        }
        if s.const_value.as_ref().is_some_and(|c| !js::deep_equal(c, v)) {
            return false;
        }
        if let Some(all) = &s.all_of {
            if !all.iter().all(|&b| self.ok(b, v)) {
                return false;
            }
        }
        if let Some(any) = &s.any_of {
            if !any.iter().any(|&b| self.ok(b, v)) {
                return false;
            }
        }
        if let Some(one) = &s.one_of {
            if self.matches(one, v, 2) != 1 {
                return false;
            }
        }
        if s.not.is_some_and(|n| self.ok(n, v)) {
            return false;
        }
        if let Some(cond) = s.condition {
            if s.then.is_some() || s.otherwise.is_some() {
                let branch = if self.ok(cond, v) { s.then } else { s.otherwise };
                if branch.is_some_and(|b| !self.ok(b, v)) {
                    return false;
                }
            }
        }
        for reference in [&s.reference, &s.dynamic_reference].into_iter().flatten() {
            if !reference.target.is_some_and(|t| self.ok(t, v)) {
                return false;
            }
        }
        true
    }

    /// How many of `branches` accept `v`, counting up to `limit`.
    pub(crate) fn matches(&self, branches: &[NodeId], v: &Value, limit: usize) -> usize {
        let mut n = 0;
        for &b in branches {
            if self.ok(b, v) {
                n += 1;
                if n >= limit {
                    break;
                }
            }
        }
        n
    }

    fn object_ok(&self, s: &SchemaNode, map: &Map<String, Value>, whole: &Value) -> bool {
        for (key, id) in &s.properties {
            if let Some(x) = map.get(key) {
                if !self.ok(*id, x) {
                    return false;
                }
            }
        }
        if s.required.iter().any(|k| !map.contains_key(k)) {
            return false;
        }
        if !s.pattern_properties.is_empty() || s.additional_properties.is_some() {
            for (key, x) in map {
                let mut matched = s.properties.iter().any(|(k, _)| k == key);
                for (re, id) in &s.pattern_properties {
                    if re.is_match(key) {
                        matched = true;
                        if !self.ok(*id, x) {
                            return false;
                        }
                    }
                }
                if !matched && s.additional_properties.is_some_and(|a| !self.ok(a, x)) {
                    return false;
                }
            }
        }
        if let Some(names) = s.property_names {
            if !map.keys().all(|k| self.ok(names, &Value::String(k.clone()))) {
                return false;
            }
        }
        let count = map.len() as f64;
        if s.min_properties.is_some_and(|m| count < m) || s.max_properties.is_some_and(|m| count > m) {
            return false;
        }
        for (key, needed) in &s.dependent_required {
            if map.contains_key(key) && needed.iter().any(|r| !map.contains_key(r)) {
                return false;
            }
        }
        s.dependent_schemas_checked.iter().all(|(key, id)| !map.contains_key(key) || self.ok(*id, whole))
    }

    fn array_ok(&self, s: &SchemaNode, items: &[Value]) -> bool {
        let len = items.len() as f64;
        if s.min_items.is_some_and(|m| len < m) || s.max_items.is_some_and(|m| len > m) {
            return false;
        }
        let (prefix, rest) = s.tuple();
        for (i, item) in items.iter().enumerate() {
            let schema = prefix.get(i).copied().or(if i >= prefix.len() { rest } else { None });
            if schema.is_some_and(|id| !self.ok(id, item)) {
                return false;
            }
        }
        if let Some(contains) = s.contains {
            if !contains_ok(self, contains, items, s.min_contains, s.max_contains) {
                return false;
            }
        }
        !s.unique_items || unique(items)
    }
}

/// `contains` with its bounds.
pub(crate) fn contains_ok(run: &Run<'_>, id: NodeId, items: &[Value], min: f64, max: f64) -> bool {
    let mut n = 0.0;
    for item in items {
        if run.ok(id, item) {
            n += 1.0;
            if n > max {
                return false;
            }
        }
    }
    n >= min
}

/// `enum`: primitives by `===`, objects and arrays by deep equality.
pub(crate) fn enum_ok(values: &[Value], v: &Value) -> bool {
    values.iter().any(|e| js::deep_equal(e, v))
}

/// `uniqueItems`.
pub(crate) fn unique(items: &[Value]) -> bool {
    items.iter().enumerate().all(|(i, a)| items[..i].iter().all(|b| !js::deep_equal(a, b)))
}

/// The number of code points of `text` (JSON Schema lengths count code points).
pub(crate) fn length(text: &str) -> f64 {
    text.chars().count() as f64
}

fn string_ok(s: &SchemaNode, text: &str) -> bool {
    if s.min_length.is_some() || s.max_length.is_some() {
        let n = length(text);
        if s.min_length.is_some_and(|m| n < m) || s.max_length.is_some_and(|m| n > m) {
            return false;
        }
    }
    if s.pattern.as_ref().is_some_and(|re| !re.is_match(text)) {
        return false;
    }
    s.format.as_ref().is_none_or(|(_, check)| check(text))
}

fn number_ok(s: &SchemaNode, x: f64) -> bool {
    !(s.minimum.is_some_and(|m| x < m)
        || s.maximum.is_some_and(|m| x > m)
        || s.exclusive_minimum.is_some_and(|m| x <= m)
        || s.exclusive_maximum.is_some_and(|m| x >= m)
        || s.multiple_of.is_some_and(|d| !is_multiple(x, d)))
}

/// Whether `v` is a multiple of `d`, exactly for decimals (0.0075 is a multiple of 0.0001).
pub(crate) fn is_multiple(v: f64, d: f64) -> bool {
    let q = v / d;
    if q.is_finite() && q.fract() == 0.0 {
        return true;
    }
    if !q.is_finite() {
        return v % d == 0.0;
    }
    let ((vc, ve), (dc, de)) = (decimal(v), decimal(d));
    if dc == 0 {
        return false;
    }
    if ve >= de {
        // (vc * 10^k) % dc, computed modulo dc (dc has at most 17 digits, so products fit in u128).
        let mut factor = 1u128;
        for _ in 0..(ve - de) {
            factor = factor * 10 % dc;
        }
        ((vc % dc) * factor).checked_rem(dc) == Some(0)
    } else {
        let mut m = Some(dc);
        for _ in 0..(de - ve) {
            m = m.and_then(|x| x.checked_mul(10));
        }
        m.is_some_and(|m| vc % m == 0)
    }
}

/// `|x|` as a decimal coefficient and exponent: `x = c * 10^e`, with the shortest round-trip digits.
fn decimal(x: f64) -> (u128, i64) {
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let fraction = mantissa.split_once('.').map_or(0, |(_, f)| f.len()) as i64;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits.parse().unwrap_or(0), exponent.parse::<i64>().unwrap_or(0) - fraction)
}

#[cfg(test)]
mod tests {
    use super::is_multiple;

    #[test]
    fn multiples_are_exact_for_decimals() {
        assert!(is_multiple(0.0075, 0.0001));
        assert!(is_multiple(0.3, 0.1));
        assert!(is_multiple(9.0, 3.0));
        assert!(!is_multiple(10.0, 3.0));
        assert!(!is_multiple(1.234, 0.01));
        assert!(is_multiple(1e300, 0.1));
        assert!(!is_multiple(1.0, 0.0));
        assert!(is_multiple(-4.5, 1.5));
    }
}
