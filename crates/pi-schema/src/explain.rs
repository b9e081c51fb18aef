//! Why a value failed: a walk over the schema that reports each failing keyword at the value it failed on, in the
//! reference's order, using the check for subschemas. It runs only for values that failed the check.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::check::{self, Run};
use super::js;
use super::schema::{Dependency, Node, NodeId, Reference, SchemaNode};

/// How many allowed values an enum message lists before it cuts the list.
const LISTED_VALUES: usize = 20;

/// One failure, at a JSON Pointer ("" for the value itself).
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub pointer: String,
    pub message: String,
}

/// Explains the failures of one value.
pub(crate) struct Explainer<'r, 'a> {
    run: &'r Run<'a>,
    /// The errors of `$ref` targets by (target, path, value position): a recursive union explains each branch to
    /// pick the one to blame, and would explain the same children again, exponentially in the depth. The values are
    /// members of the one value being explained, which outlives the explainer, so their addresses identify them.
    memo: HashMap<(NodeId, String, usize), Vec<Failure>>,
}

impl<'r, 'a> Explainer<'r, 'a> {
    pub(crate) fn new(run: &'r Run<'a>) -> Self {
        Self { run, memo: HashMap::new() }
    }

    /// The failures of `value` against the root, at least one.
    pub(crate) fn errors(&mut self, value: &Value) -> Vec<Failure> {
        let mut out = Vec::new();
        self.walk(self.run.c.root, value, "", &mut out);
        if out.is_empty() {
            out.push(fail("", "invalid".to_owned()));
        }
        out
    }

    fn walk(&mut self, id: NodeId, v: &Value, path: &str, out: &mut Vec<Failure>) {
        let run = self.run;
        run.descend(|| (), || self.walk_node(id, v, path, out));
    }

    fn walk_node(&mut self, id: NodeId, v: &Value, path: &str, out: &mut Vec<Failure>) {
        let c = self.run.c;
        let s = match c.node(id) {
            Node::Bool(true) => return,
            Node::Bool(false) => return out.push(fail(path, "no value is allowed here".to_owned())),
            Node::Schema(s) => s,
        };
        if self.run.ok(id, v) {
            return;
        }
        let start = out.len();
        if let Some(types) = &s.types {
            if !types.iter().any(|t| t.matches(v)) {
                let message = format!("expected {}, got {}", s.type_text, js::type_name(v));
                return out.push(fail(path, message));
            }
        }
        if let Some(values) = &s.enum_values {
            if !check::enum_ok(values, v) {
                out.push(fail(path, format!("expected one of {}", list_values(values))));
            }
        }
        if let Some(expected) = &s.const_value {
            if !js::deep_equal(expected, v) {
                out.push(fail(path, format!("expected {}", pi_json::stringify(expected))));
            }
        }
        match v {
            Value::String(text) => string_failures(s, text, path, out),
            Value::Number(_) => {
                if let Some(x) = js::num(v) {
                    number_failures(s, x, path, out);
                }
            }
            Value::Object(map) => self.walk_object(s, map, v, path, out),
            Value::Array(items) => self.walk_array(s, items, path, out),
            _ => {}
        }
        if let Some(all) = &s.all_of {
            for &b in all {
                self.walk(b, v, path, out);
            }
        }
        if let Some(any) = &s.any_of {
            self.walk_union(any, v, path, out, false);
        }
        if let Some(one) = &s.one_of {
            self.walk_union(one, v, path, out, true);
        }
        if s.not.is_some_and(|n| self.run.ok(n, v)) {
            out.push(fail(path, "must not match the schema in not".to_owned()));
        }
        if let Some(cond) = s.condition {
            let branch = if self.run.ok(cond, v) { s.then } else { s.otherwise };
            if let Some(b) = branch {
                self.walk(b, v, path, out);
            }
        }
        if let Some(reference) = &s.reference {
            self.walk_ref(reference, v, path, out);
        }
        if out.len() == start && s.dynamic_reference.is_some() {
            out.push(fail(path, "does not match the dynamically referenced schema".to_owned()));
        }
    }

    fn walk_ref(&mut self, reference: &Reference, v: &Value, path: &str, out: &mut Vec<Failure>) {
        let Some(target) = reference.target else {
            return out.push(fail(path, format!("unresolved reference {}", reference.text)));
        };
        let is_schema = matches!(self.run.c.node(target), Node::Schema(_));
        if !is_schema || !(v.is_object() || v.is_array()) {
            return self.walk(target, v, path, out);
        }
        let key = (target, path.to_owned(), std::ptr::from_ref(v) as usize);
        if let Some(known) = self.memo.get(&key) {
            return out.extend(known.iter().cloned());
        }
        let mut errors = Vec::new();
        self.walk(target, v, path, &mut errors);
        out.extend(errors.iter().cloned());
        self.memo.insert(key, errors);
    }

    fn walk_object(
        &mut self,
        s: &SchemaNode,
        map: &Map<String, Value>,
        whole: &Value,
        path: &str,
        out: &mut Vec<Failure>,
    ) {
        for key in &s.required {
            if !map.contains_key(key) {
                out.push(fail(&js::pointer(path, key), "missing".to_owned()));
            }
        }
        for (key, id) in &s.properties {
            if let Some(x) = map.get(key) {
                self.walk(*id, x, &js::pointer(path, key), out);
            }
        }
        for (key, x) in pi_json::js::members_in_js_order(map) {
            let mut matched = s.properties.iter().any(|(k, _)| k == key);
            for (re, id) in &s.pattern_properties {
                if re.is_match(key) {
                    matched = true;
                    self.walk(*id, x, &js::pointer(path, key), out);
                }
            }
            if let (false, Some(extra)) = (matched, s.additional_properties) {
                if matches!(self.run.c.node(extra), Node::Bool(false)) {
                    out.push(fail(&js::pointer(path, key), "unknown field".to_owned()));
                } else {
                    self.walk(extra, x, &js::pointer(path, key), out);
                }
            }
            if s.property_names.is_some_and(|names| !self.run.ok(names, &Value::String(key.to_owned()))) {
                out.push(fail(&js::pointer(path, key), "invalid property name".to_owned()));
            }
        }
        let count = map.len() as f64;
        if let Some(m) = s.min_properties.filter(|&m| count < m) {
            out.push(fail(path, format!("expected at least {} properties", js::number_to_string(m))));
        }
        if let Some(m) = s.max_properties.filter(|&m| count > m) {
            out.push(fail(path, format!("expected at most {} properties", js::number_to_string(m))));
        }
        for (key, dependency) in &s.dependencies_explained {
            if !map.contains_key(key) {
                continue;
            }
            match dependency {
                Dependency::Schema(id) => self.walk(*id, whole, path, out),
                Dependency::Required(needed) => {
                    for r in needed.iter().filter(|r| !map.contains_key(*r)) {
                        out.push(fail(&js::pointer(path, r), format!("required when {key} is present")));
                    }
                }
            }
        }
        for (key, id) in &s.dependent_schemas {
            if map.contains_key(key) {
                self.walk(*id, whole, path, out);
            }
        }
    }

    fn walk_array(&mut self, s: &SchemaNode, items: &[Value], path: &str, out: &mut Vec<Failure>) {
        let (prefix, rest) = s.tuple();
        for (i, item) in items.iter().enumerate() {
            let schema = if i < prefix.len() { prefix.get(i).copied() } else { rest };
            if let Some(id) = schema {
                self.walk(id, item, &format!("{path}/{i}"), out);
            }
        }
        let len = items.len() as f64;
        if let Some(m) = s.min_items.filter(|&m| len < m) {
            out.push(fail(path, format!("expected at least {} items", js::number_to_string(m))));
        }
        if let Some(m) = s.max_items.filter(|&m| len > m) {
            out.push(fail(path, format!("expected at most {} items", js::number_to_string(m))));
        }
        if s.unique_items && !check::unique(items) {
            out.push(fail(path, "expected unique items".to_owned()));
        }
        if let Some(contains) = s.contains {
            let (min, max) = (s.min_contains, s.max_contains);
            if !check::contains_ok(self.run, contains, items, min, max) {
                out.push(fail(path, contains_message(min, max)));
            }
        }
    }

    fn walk_union(&mut self, branches: &[NodeId], v: &Value, path: &str, out: &mut Vec<Failure>, exactly_one: bool) {
        let matches = self.run.matches(branches, v, 2);
        if matches == 1 || (!exactly_one && matches > 0) {
            return;
        }
        if matches > 1 {
            return out.push(fail(path, "matches more than one alternative".to_owned()));
        }
        // A tagged union blames the branch its tag selects.
        if let (Some((key, tags)), Value::Object(map)) = (self.tag_of(branches), v) {
            let selected = map.get(&key).and_then(|x| tags.iter().position(|t| js::strict_eq(t, x)));
            match selected.and_then(|i| branches.get(i)) {
                Some(&b) => self.walk(b, v, path, out),
                None => out.push(fail(&js::pointer(path, &key), format!("expected one of {}", list_values(&tags)))),
            }
            return;
        }
        // Otherwise the branch that declares most of the object's keys, then the one whose first error is deepest.
        let mut best: Option<(Vec<Failure>, usize)> = None;
        for &b in branches {
            let mut errors = Vec::new();
            self.walk(b, v, path, &mut errors);
            let Some(first) = errors.first() else { continue };
            let declared = match v {
                Value::Object(map) => self.declared_keys(b, map),
                _ => 0,
            };
            let better = match &best {
                None => true,
                Some((best_errors, best_declared)) => {
                    declared > *best_declared
                        || (declared == *best_declared
                            && best_errors.first().is_some_and(|e| utf16_len(&first.pointer) > utf16_len(&e.pointer)))
                }
            };
            if better {
                best = Some((errors, declared));
            }
        }
        match best {
            Some((errors, _)) => out.extend(errors),
            None => out.push(fail(path, "matches no alternative".to_owned())),
        }
    }

    /// How many keys of the object the branch (through a `$ref`) declares in `properties`.
    fn declared_keys(&self, branch: NodeId, map: &Map<String, Value>) -> usize {
        let Some(node) = self.run.c.through_ref(branch) else { return 0 };
        map.keys().filter(|k| node.properties.iter().any(|(p, _)| p == *k)).count()
    }

    /// The tag of a union: the first property of the first branch on which every branch has a distinct primitive
    /// `const`.
    fn tag_of(&self, branches: &[NodeId]) -> Option<(String, Vec<Value>)> {
        let c = self.run.c;
        let resolved: Vec<Option<&SchemaNode>> = branches.iter().map(|&b| c.through_ref(b)).collect();
        let first = (*resolved.first()?)?;
        if !first.has_properties {
            return None;
        }
        'keys: for (key, _) in &first.properties {
            let mut tags: Vec<Value> = Vec::with_capacity(resolved.len());
            for node in &resolved {
                let tag = node
                    .and_then(|n| n.properties.iter().find(|(k, _)| k == key))
                    .and_then(|(_, id)| c.schema(*id))
                    .and_then(|t| t.const_value.as_ref());
                match tag {
                    Some(t) if !t.is_object() && !t.is_array() => {
                        if tags.iter().any(|seen| js::strict_eq(seen, t)) {
                            continue 'keys;
                        }
                        tags.push(t.clone());
                    }
                    _ => continue 'keys,
                }
            }
            return Some((key.clone(), tags));
        }
        None
    }
}

fn fail(pointer: &str, message: String) -> Failure {
    Failure { pointer: pointer.to_owned(), message }
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

fn string_failures(s: &SchemaNode, text: &str, path: &str, out: &mut Vec<Failure>) {
    let n = check::length(text);
    if let Some(m) = s.min_length.filter(|&m| n < m) {
        out.push(fail(path, format!("expected at least {} characters", js::number_to_string(m))));
    }
    if let Some(m) = s.max_length.filter(|&m| n > m) {
        out.push(fail(path, format!("expected at most {} characters", js::number_to_string(m))));
    }
    if let Some(re) = s.pattern.as_ref().filter(|re| !re.is_match(text)) {
        out.push(fail(path, format!("expected to match {}", re.source())));
    }
    if let Some((name, _)) = s.format.as_ref().filter(|(_, check)| !check(text)) {
        out.push(fail(path, format!("expected format {name}")));
    }
}

fn number_failures(s: &SchemaNode, x: f64, path: &str, out: &mut Vec<Failure>) {
    type Bound = (Option<f64>, fn(f64, f64) -> bool, &'static str);
    let bounds: [Bound; 4] = [
        (s.minimum, |x, m| x < m, ">="),
        (s.maximum, |x, m| x > m, "<="),
        (s.exclusive_minimum, |x, m| x <= m, ">"),
        (s.exclusive_maximum, |x, m| x >= m, "<"),
    ];
    for (bound, fails, op) in bounds {
        if let Some(m) = bound.filter(|&m| fails(x, m)) {
            out.push(fail(path, format!("expected {op} {}", js::number_to_string(m))));
        }
    }
    if let Some(d) = s.multiple_of.filter(|&d| !check::is_multiple(x, d)) {
        out.push(fail(path, format!("expected a multiple of {}", js::number_to_string(d))));
    }
}

/// Allowed values as JSON, at most [`LISTED_VALUES`] of them, then how many more there are.
fn list_values(values: &[Value]) -> String {
    if values.len() <= LISTED_VALUES {
        return pi_json::stringify(&Value::Array(values.to_vec()));
    }
    let listed = pi_json::stringify(&Value::Array(values[..LISTED_VALUES].to_vec()));
    let open = listed.strip_suffix(']').unwrap_or(&listed);
    format!("{open}, ... and {} more]", values.len() - LISTED_VALUES)
}

fn contains_message(min: f64, max: f64) -> String {
    let plural = |n: f64| if n == 1.0 { "item" } else { "items" };
    if max == f64::INFINITY {
        format!("expected at least {} matching {}", js::number_to_string(min), plural(min))
    } else if min == 0.0 {
        format!("expected at most {} matching {}", js::number_to_string(max), plural(max))
    } else {
        format!("expected between {} and {} matching items", js::number_to_string(min), js::number_to_string(max))
    }
}
