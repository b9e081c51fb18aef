//! Coercion of loosely typed arguments towards the schema, before the check, in three passes:
//! 1. an optional property set to `null` whose schema rejects null is dropped, as if omitted;
//! 2. conversion keyed on the schema's structure (`$ref`, `const`, `enum`, unions, `allOf`, `type`, members):
//!    numeric strings to numbers (truncated for integers), `"true"` to `true`, scalars to strings, a single value to
//!    a one-item array, and a union takes the first branch whose conversion the union accepts;
//! 3. primitive coercion by `type` (also type lists) for what pass 2 left.
//!
//! Every function returns `None` when the value is unchanged, so only the changed paths are copied. A value that
//! cannot be coerced stays as it is, and the check reports it.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::check::Run;
use super::js;
use super::schema::{NodeId, SchemaNode};

/// A value being converted at a re-entry point: primitives compare by value, objects and arrays by identity (the
/// address of a value that is alive while its entry is on the stack).
enum Entered {
    Primitive(Value),
    Composite(usize),
}

impl Entered {
    fn of(v: &Value) -> Self {
        match v {
            Value::Array(_) | Value::Object(_) => Self::Composite(std::ptr::from_ref(v) as usize),
            other => Self::Primitive(other.clone()),
        }
    }

    fn is(&self, v: &Value) -> bool {
        match (self, Self::of(v)) {
            (Self::Primitive(a), Self::Primitive(b)) => a.is_number() == b.is_number() && js::strict_eq(a, &b),
            (Self::Composite(a), Self::Composite(b)) => *a == b,
            _ => false,
        }
    }
}

/// Coerces values for one run.
pub(crate) struct Coercer<'r, 'a> {
    run: &'r Run<'a>,
    /// The (node, value) pairs pass 2 is converting through a `$ref` or a single-value wrap: the same pair again
    /// would convert without end, so it leaves the value as it is.
    entered: Vec<(NodeId, Entered)>,
    /// How often a re-entry was cut short; results computed across a cut are not memoized.
    cuts: usize,
    /// Results of `$ref` targets by (node, value as JSON), so recursive unions do not convert the same children
    /// once per branch.
    memo: HashMap<(NodeId, String), Option<Value>>,
}

impl<'r, 'a> Coercer<'r, 'a> {
    pub(crate) fn new(run: &'r Run<'a>) -> Self {
        Self { run, entered: Vec::new(), cuts: 0, memo: HashMap::new() }
    }

    /// `value` coerced, or `None` when no pass changes it.
    pub(crate) fn coerce(&mut self, value: &Value) -> Option<Value> {
        let root = self.run.c.root;
        let dropped = self.drop_optional_nulls(root, value);
        let v1 = dropped.as_ref().unwrap_or(value);
        let converted = self.convert(root, v1);
        let v2 = converted.as_ref().unwrap_or(v1);
        let typed = self.coerce_types(root, v2);
        typed.or(converted).or(dropped)
    }

    fn schema(&self, id: NodeId) -> Option<&'a SchemaNode> {
        self.run.c.schema(id)
    }

    // Pass 1: optional nulls.

    fn drop_optional_nulls(&mut self, id: NodeId, value: &Value) -> Option<Value> {
        let run = self.run;
        run.descend(|| None, || self.drop_nulls_in(id, value))
    }

    fn drop_nulls_in(&mut self, id: NodeId, value: &Value) -> Option<Value> {
        let s = self.schema(id)?;
        let map = match value {
            Value::Array(items) => {
                return map_items(items, |i, item| {
                    s.coerced_item(i).and_then(|item_id| self.drop_optional_nulls(item_id, item))
                });
            }
            Value::Object(map) => map,
            _ => return None,
        };
        let additional = s.additional_properties.filter(|&a| self.schema(a).is_some());
        if s.pattern_properties.is_empty() && additional.is_none() && !s.has_properties {
            return None;
        }
        let mut out: Option<Map<String, Value>> = None;
        for (key, pid) in &s.properties {
            let Some(x) = map.get(key) else { continue };
            let is_ref = self.schema(*pid).is_some_and(|p| p.reference.is_some());
            if x.is_null() && !s.required.contains(key) && !is_ref && !self.run.ok(*pid, &Value::Null) {
                out.get_or_insert_with(|| map.clone()).shift_remove(key);
                continue;
            }
            if let Some(next) = self.drop_optional_nulls(*pid, x) {
                out.get_or_insert_with(|| map.clone()).insert(key.clone(), next);
            }
        }
        if !s.pattern_properties.is_empty() || additional.is_some() {
            for (key, original) in map {
                let mut matched = s.properties.iter().any(|(k, _)| k == key);
                for (re, pid) in &s.pattern_properties {
                    if !re.is_match(key) {
                        continue;
                    }
                    matched = true;
                    let current = match &out {
                        Some(o) => match o.get(key) {
                            Some(x) => x.clone(),
                            None => continue, // dropped above
                        },
                        None => original.clone(),
                    };
                    if let Some(next) = self.drop_optional_nulls(*pid, &current) {
                        out.get_or_insert_with(|| map.clone()).insert(key.clone(), next);
                    }
                }
                if let (false, Some(a)) = (matched, additional) {
                    if let Some(next) = self.drop_optional_nulls(a, original) {
                        out.get_or_insert_with(|| map.clone()).insert(key.clone(), next);
                    }
                }
            }
        }
        out.map(Value::Object)
    }

    // Pass 2: conversion.

    fn convert(&mut self, id: NodeId, value: &Value) -> Option<Value> {
        let run = self.run;
        run.descend(|| None, || self.convert_in(id, value))
    }

    fn convert_in(&mut self, id: NodeId, value: &Value) -> Option<Value> {
        let s = self.schema(id)?;
        if let Some(reference) = &s.reference {
            let target = reference.target.filter(|&t| self.schema(t).is_some())?;
            return self.reenter(target, value, true);
        }
        if let Some(literal) = &s.const_value {
            return convert_literal(literal, value);
        }
        if let Some(values) = &s.enum_values {
            if values.iter().any(|m| js::strict_eq(m, value)) {
                return None;
            }
            return values
                .iter()
                .filter_map(|m| convert_literal(m, value))
                .find(|candidate| self.run.ok(id, candidate));
        }
        if let Some(branches) = s.any_of.as_ref().or(s.one_of.as_ref()) {
            return self.convert_union(s, id, branches, value);
        }
        if let Some(all) = &s.all_of {
            let mut next: Option<Value> = None;
            for &member in all {
                let current = next.as_ref().unwrap_or(value);
                if let Some(changed) = self.convert(member, current) {
                    next = Some(changed);
                }
            }
            let current = next.as_ref().unwrap_or(value);
            return self.convert_members(s, current).or(next);
        }
        if s.types.is_none() {
            if s.object_like {
                return self.convert_object(s, value);
            }
            if s.array_like {
                return self.convert_array(s, value);
            }
            return None;
        }
        let converted = match s.type_single.as_deref()? {
            "string" => try_string(value),
            "number" => try_number(value).map(js::number_value),
            "integer" => try_number(value).map(|x| js::number_value(x.trunc())),
            "boolean" => try_boolean(value).map(Value::Bool),
            "null" => try_null(value),
            "array" => return self.convert_array(s, value),
            "object" => return self.convert_object(s, value),
            _ => None,
        };
        converted.filter(|c| !js::strict_eq(c, value))
    }

    /// `node` converted for `value` at a re-entry point: unchanged when that pair is already being converted.
    fn reenter(&mut self, id: NodeId, value: &Value, memoize: bool) -> Option<Value> {
        if self.entered.iter().any(|(n, e)| *n == id && e.is(value)) {
            self.cuts += 1;
            return None;
        }
        let key = memoize.then(|| (id, pi_json::stringify(value)));
        if let Some(known) = key.as_ref().and_then(|k| self.memo.get(k)) {
            return known.clone();
        }
        let cuts = self.cuts;
        self.entered.push((id, Entered::of(value)));
        let result = self.convert(id, value);
        self.entered.pop();
        if let (Some(k), true) = (key, self.cuts == cuts) {
            self.memo.insert(k, result.clone());
        }
        result
    }

    /// A value a branch accepts stays; else the first branch's conversion that the whole union accepts.
    fn convert_union(&mut self, s: &SchemaNode, id: NodeId, branches: &[NodeId], value: &Value) -> Option<Value> {
        if branches.iter().any(|&b| self.run.ok(b, value)) {
            return self.convert_members(s, value);
        }
        for &b in branches {
            let converted = self.convert(b, value);
            let current = converted.as_ref().unwrap_or(value);
            let candidate = self.convert_members(s, current).or(converted);
            if self.run.ok(id, candidate.as_ref().unwrap_or(value)) {
                return candidate;
            }
        }
        self.convert_members(s, value)
    }

    /// The object members of a union or intersection node, when it declares any.
    fn convert_members(&mut self, s: &SchemaNode, value: &Value) -> Option<Value> {
        if s.declares_members {
            self.convert_object(s, value)
        } else {
            None
        }
    }

    fn convert_array(&mut self, s: &SchemaNode, value: &Value) -> Option<Value> {
        let prefix = s.items_list.as_ref().or(s.prefix_items.as_ref());
        if let Some(prefix) = prefix {
            // A tuple converts its items and never wraps a single value.
            let Value::Array(items) = value else { return None };
            let rest = if s.items_list.is_some() { None } else { s.items };
            return map_items(items, |i, item| {
                let schema = if i < prefix.len() { prefix.get(i).copied() } else { rest };
                schema.and_then(|id| self.convert(id, item))
            });
        }
        if let Value::Array(items) = value {
            let item_schema = s.items?;
            return map_items(items, |_, item| self.convert(item_schema, item));
        }
        let wrapped = match s.items.filter(|&i| self.schema(i).is_some()) {
            Some(item) => self.reenter(item, value, false).unwrap_or_else(|| value.clone()),
            None => value.clone(),
        };
        Some(Value::Array(vec![wrapped]))
    }

    fn convert_object(&mut self, s: &SchemaNode, value: &Value) -> Option<Value> {
        let Value::Object(map) = value else { return None };
        let additional = s.additional_properties.filter(|&a| self.schema(a).is_some());
        let mut out: Option<Map<String, Value>> = None;
        for (key, original) in map {
            let mut next: Option<Value> = None;
            let declared = s.properties.iter().find(|(k, _)| k == key).map(|(_, id)| *id);
            let mut matched = declared.is_some();
            if let Some(pid) = declared {
                next = self.convert(pid, original);
            }
            for (re, pid) in &s.pattern_properties {
                if !re.is_match(key) {
                    continue;
                }
                matched = true;
                let current = next.take();
                let converted = self.convert(*pid, current.as_ref().unwrap_or(original));
                next = converted.or(current);
            }
            if let (false, Some(a)) = (matched, additional) {
                next = self.convert(a, original);
            }
            if let Some(n) = next.filter(|n| !js::strict_eq(n, original)) {
                out.get_or_insert_with(|| map.clone()).insert(key.clone(), n);
            }
        }
        out.map(Value::Object)
    }

    // Pass 3: primitive coercion by type.

    fn coerce_types(&mut self, id: NodeId, value: &Value) -> Option<Value> {
        let run = self.run;
        run.descend(|| None, || self.coerce_types_in(id, value))
    }

    fn coerce_types_in(&mut self, id: NodeId, value: &Value) -> Option<Value> {
        let s = self.schema(id)?;
        let mut next: Option<Value> = None;
        for &member in s.all_of.iter().flatten() {
            if let Some(changed) = self.coerce_types(member, next.as_ref().unwrap_or(value)) {
                next = Some(changed);
            }
        }
        for branches in [&s.any_of, &s.one_of].into_iter().flatten() {
            if let Some(changed) = self.coerce_union(branches, next.as_ref().unwrap_or(value)) {
                next = Some(changed);
            }
        }
        let types = &s.type_names;
        let current = next.as_ref().unwrap_or(value);
        let matches_member = types.len() > 1 && types.iter().any(|t| matches_type(current, t));
        if !types.is_empty() && !matches_member {
            if let Some(changed) = types.iter().find_map(|t| coerce_primitive(current, t)) {
                next = Some(changed);
            }
        }
        let current = next.as_ref().unwrap_or(value);
        if types.iter().any(|t| t == "object") {
            if let Value::Object(map) = current {
                if let Some(changed) = self.coerce_properties(s, map) {
                    next = Some(changed);
                }
            }
        }
        let current = next.as_ref().unwrap_or(value);
        if types.iter().any(|t| t == "array") {
            if let Value::Array(items) = current {
                if let Some(changed) =
                    map_items(items, |i, item| s.coerced_item(i).and_then(|id| self.coerce_types(id, item)))
                {
                    next = Some(changed);
                }
            }
        }
        next
    }

    fn coerce_union(&mut self, branches: &[NodeId], value: &Value) -> Option<Value> {
        if branches.iter().any(|&b| self.run.ok(b, value)) {
            return None;
        }
        for &b in branches {
            let coerced = self.coerce_types(b, value);
            if self.run.ok(b, coerced.as_ref().unwrap_or(value)) {
                return coerced;
            }
        }
        None
    }

    fn coerce_properties(&mut self, s: &SchemaNode, map: &Map<String, Value>) -> Option<Value> {
        let mut out: Option<Map<String, Value>> = None;
        for (key, pid) in &s.properties {
            if let Some(x) = map.get(key) {
                if let Some(next) = self.coerce_types(*pid, x) {
                    out.get_or_insert_with(|| map.clone()).insert(key.clone(), next);
                }
            }
        }
        let additional = s.additional_properties.filter(|&a| self.schema(a).is_some());
        for (key, original) in map {
            let mut matched = s.properties.iter().any(|(k, _)| k == key);
            for (re, pid) in &s.pattern_properties {
                if !re.is_match(key) {
                    continue;
                }
                matched = true;
                let current = out.as_ref().and_then(|o| o.get(key)).unwrap_or(original).clone();
                if let Some(next) = self.coerce_types(*pid, &current) {
                    out.get_or_insert_with(|| map.clone()).insert(key.clone(), next);
                }
            }
            if let (false, Some(a)) = (matched, additional) {
                if let Some(next) = self.coerce_types(a, original) {
                    out.get_or_insert_with(|| map.clone()).insert(key.clone(), next);
                }
            }
        }
        out.map(Value::Object)
    }
}

/// `items` mapped by `f` (`None`: unchanged); `None` when every item maps to itself.
fn map_items(items: &[Value], mut f: impl FnMut(usize, &Value) -> Option<Value>) -> Option<Value> {
    let mut out: Option<Vec<Value>> = None;
    for (i, item) in items.iter().enumerate() {
        if let Some(next) = f(i, item) {
            out.get_or_insert_with(|| items.to_vec())[i] = next;
        }
    }
    out.map(Value::Array)
}

/// A literal (`const`, an enum value) taken from a value of another type that converts to exactly it.
fn convert_literal(literal: &Value, value: &Value) -> Option<Value> {
    if js::strict_eq(literal, value) {
        return None;
    }
    let converted = match literal {
        Value::String(_) => try_string(value),
        Value::Number(_) => try_number(value).map(js::number_value),
        Value::Bool(_) => try_boolean(value).map(Value::Bool),
        _ => None,
    };
    converted.filter(|c| js::strict_eq(c, literal))
}

fn try_string(value: &Value) -> Option<Value> {
    Some(Value::String(match value {
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => js::number_to_string(js::num(value)?),
        Value::Null => "null".to_owned(),
        Value::String(s) => s.clone(),
        _ => return None,
    }))
}

fn try_number(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(_) => js::num(value),
        Value::Null => Some(0.0),
        Value::String(s) => {
            let x = js::string_to_number(s);
            if x.is_finite() {
                return Some(x);
            }
            match s.to_lowercase().as_str() {
                "false" => Some(0.0),
                "true" => Some(1.0),
                _ => bigint_literal(s).filter(|x| x.abs() <= js::MAX_SAFE_INTEGER),
            }
        }
        _ => None,
    }
}

/// A bigint-like string (`12n`, `-3`, `12.5` truncated) as a number, for strings `Number()` rejects.
fn bigint_literal(s: &str) -> Option<f64> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let int = body
        .strip_suffix('n')
        .or_else(|| {
            body.split_once('.').filter(|(_, f)| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit())).map(|(i, _)| i)
        })
        .unwrap_or(body);
    let canonical = int == "0" || (!int.starts_with('0') && !int.is_empty() && int.bytes().all(|b| b.is_ascii_digit()));
    if !canonical || int.len() > 17 {
        return None;
    }
    let x: f64 = int.parse().ok()?;
    Some(if negative { -x } else { x })
}

fn try_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(_) => {
            let x = js::num(value)?;
            if x == 0.0 {
                Some(false)
            } else if x == 1.0 {
                Some(true)
            } else {
                None
            }
        }
        Value::Null => Some(false),
        Value::String(s) => match s.to_lowercase().as_str() {
            "false" | "0" => Some(false),
            "true" | "1" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

fn try_null(value: &Value) -> Option<Value> {
    let null = match value {
        Value::Bool(b) => !*b,
        Value::Number(_) => js::num(value) == Some(0.0),
        Value::Null => true,
        Value::String(s) => matches!(s.to_lowercase().as_str(), "undefined" | "null" | "" | "0"),
        _ => false,
    };
    null.then_some(Value::Null)
}

fn matches_type(v: &Value, name: &str) -> bool {
    match name {
        "number" => v.is_number(),
        "integer" => js::is_integer(v),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// A primitive coerced to the type `name` (Ajv's `coerceTypes`); `None` when it does not convert.
fn coerce_primitive(v: &Value, name: &str) -> Option<Value> {
    match (name, v) {
        ("number" | "integer", Value::Null) => Some(js::number_value(0.0)),
        ("number" | "integer", Value::String(s)) => {
            if s.trim_matches(js::is_js_space).is_empty() {
                return None;
            }
            let x = js::string_to_number(s);
            let fits = if name == "number" { x.is_finite() } else { x.is_finite() && x.fract() == 0.0 };
            fits.then(|| js::number_value(x))
        }
        ("number" | "integer", Value::Bool(b)) => Some(js::number_value(if *b { 1.0 } else { 0.0 })),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("boolean", Value::String(s)) if s == "true" => Some(Value::Bool(true)),
        ("boolean", Value::String(s)) if s == "false" => Some(Value::Bool(false)),
        ("boolean", Value::Number(_)) => try_boolean(v).map(Value::Bool),
        ("string", Value::Null) => Some(Value::String(String::new())),
        ("string", Value::Number(_) | Value::Bool(_)) => try_string(v),
        ("null", Value::String(s)) if s.is_empty() => Some(Value::Null),
        ("null", Value::Bool(false)) => Some(Value::Null),
        ("null", Value::Number(_)) if js::num(v) == Some(0.0) => Some(Value::Null),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_scalars_like_the_reference() {
        assert_eq!(try_number(&json!("3.7")), Some(3.7));
        assert_eq!(try_number(&json!("12n")), Some(12.0));
        assert_eq!(try_number(&json!("-12n")), Some(-12.0));
        assert_eq!(try_number(&json!("TRUE")), Some(1.0));
        assert_eq!(try_number(&json!("Infinity")), None);
        assert_eq!(try_number(&json!([1])), None);
        assert_eq!(try_string(&json!(1e21)), Some(json!("1e+21")));
        assert_eq!(try_string(&json!(null)), Some(json!("null")));
        assert_eq!(try_boolean(&json!("FALSE")), Some(false));
        assert_eq!(try_boolean(&json!(2)), None);
        assert_eq!(try_null(&json!("NULL")), Some(Value::Null));
        assert_eq!(coerce_primitive(&json!("2.5"), "integer"), None);
        assert_eq!(coerce_primitive(&json!("  "), "number"), None);
        assert_eq!(coerce_primitive(&json!(true), "number"), Some(json!(1)));
        assert_eq!(convert_literal(&json!(5), &json!("5")), Some(json!(5)));
        assert_eq!(convert_literal(&json!(5), &json!("6")), None);
    }
}
