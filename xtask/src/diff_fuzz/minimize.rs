//! Greedy delta debugging over a scenario's JSON: drop array items (halves first, then single
//! items) and optional object members, keeping every reduction after which the scenario still
//! diverges, until a whole pass removes nothing (or the check budget is spent).
//!
//! Members the contract requires are never dropped (message roles and timestamps, block
//! fields, tool-spec declarations, op/action/rule keys), nor the per-call delays that keep
//! concurrent calls apart (the authors' determinism rule); anything else that makes a scenario
//! invalid is rejected by the predicate, which requires the reference to accept it.

use serde_json::Value;

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn get<'v>(value: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(value, |node, step| match step {
        Step::Key(key) => node.get(key),
        Step::Index(index) => node.get(index),
    })
}

fn get_mut<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |node, step| match step {
        Step::Key(key) => node.get_mut(key),
        Step::Index(index) => node.get_mut(index),
    })
}

/// Paths of every array and object, parents before children.
fn containers(value: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match value {
        Value::Array(items) => {
            out.push(path.clone());
            for (index, item) in items.iter().enumerate() {
                path.push(Step::Index(index));
                containers(item, path, out);
                path.pop();
            }
        }
        Value::Object(members) => {
            out.push(path.clone());
            for (key, member) in members {
                path.push(Step::Key(key.clone()));
                containers(member, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

const TOP_LEVEL_REQUIRED: [&str; 6] = ["name", "level", "responses", "prompts", "continue", "ops"];
const ALWAYS_KEPT: [&str; 10] =
    ["role", "timestamp", "toolCallId", "toolName", "op", "do", "on", "poll", "turn", "stopReason"];
const MESSAGE_OPTIONAL: [&str; 4] = ["sections", "toolsAdded", "toolsRemoved", "errorMessage"];

/// The members of the object at `path` that may be dropped.
fn removable_keys(object: &serde_json::Map<String, Value>, path: &[Step]) -> Vec<String> {
    if path.is_empty() {
        return object.keys().filter(|k| !TOP_LEVEL_REQUIRED.contains(&k.as_str())).cloned().collect();
    }
    let is_block = matches!(object.get("type").and_then(Value::as_str), Some("text" | "thinking" | "toolCall"));
    if is_block || object.contains_key("do") || object.contains_key("op") {
        return Vec::new();
    }
    // `updates` items are `{text, details?}`.
    if let [.., Step::Key(key), Step::Index(_)] = path {
        if key == "updates" {
            return object.keys().filter(|k| k.as_str() == "details").cloned().collect();
        }
    }
    if object.contains_key("role") {
        return object.keys().filter(|k| MESSAGE_OPTIONAL.contains(&k.as_str())).cloned().collect();
    }
    let is_spec = object.contains_key("parameters") && object.contains_key("description");
    let has_per_call = object.get("behavior").is_some_and(|b| b.get("perCall").is_some());
    object
        .keys()
        .filter(|k| !ALWAYS_KEPT.contains(&k.as_str()))
        .filter(|k| !matches!(k.as_str(), "delayMs" | "perCall"))
        .filter(|k| !(has_per_call && k.as_str() == "behavior"))
        .filter(|k| !(is_spec && matches!(k.as_str(), "name" | "description" | "parameters")))
        .filter(|k| !(object.contains_key("turn") && k.as_str() == "throw" && !object.contains_key("action")))
        .cloned()
        .collect()
}

/// Shrinks a diverging scenario while `still_diverges` holds, within `max_checks` checks.
pub struct Minimizer<F> {
    still_diverges: F,
    checks: usize,
    max_checks: usize,
}

impl<F: FnMut(&Value) -> bool> Minimizer<F> {
    /// A minimizer with a budget of `max_checks` predicate calls.
    pub fn new(max_checks: usize, still_diverges: F) -> Self {
        Self { still_diverges, checks: 0, max_checks }
    }

    /// Predicate calls made so far.
    pub fn checks(&self) -> usize {
        self.checks
    }

    fn accept(&mut self, candidate: &Value) -> Option<bool> {
        if self.checks >= self.max_checks {
            return None;
        }
        self.checks += 1;
        Some((self.still_diverges)(candidate))
    }

    /// The smallest diverging scenario found.
    pub fn minimize(&mut self, mut current: Value) -> Value {
        loop {
            let mut progressed = false;
            let mut index = 0;
            loop {
                let mut paths = Vec::new();
                containers(&current, &mut Vec::new(), &mut paths);
                let Some(path) = paths.get(index) else { break };
                match self.reduce_at(&mut current, path) {
                    Some(true) => progressed = true,
                    Some(false) => {}
                    None => return current,
                }
                index += 1;
            }
            if !progressed {
                return current;
            }
        }
    }

    /// Try every reduction of the node at `path`; `None` when the budget ran out.
    fn reduce_at(&mut self, current: &mut Value, path: &[Step]) -> Option<bool> {
        let mut progressed = false;
        let per_call = matches!(path.last(), Some(Step::Key(key)) if key == "perCall");
        match get(current, path) {
            Some(Value::Array(items)) if !per_call => {
                let mut size = items.len();
                while size >= 1 {
                    let mut start = 0;
                    while start < get(current, path).and_then(Value::as_array).map_or(0, Vec::len) {
                        let mut candidate = current.clone();
                        if let Some(Value::Array(items)) = get_mut(&mut candidate, path) {
                            let end = (start + size).min(items.len());
                            items.drain(start..end);
                        }
                        if self.accept(&candidate)? {
                            *current = candidate;
                            progressed = true;
                        } else {
                            start += size;
                        }
                    }
                    size /= 2;
                }
            }
            Some(Value::Object(object)) => {
                for key in removable_keys(object, path) {
                    let mut candidate = current.clone();
                    if let Some(Value::Object(object)) = get_mut(&mut candidate, path) {
                        object.shift_remove(&key);
                    }
                    if self.accept(&candidate)? {
                        *current = candidate;
                        progressed = true;
                    }
                }
            }
            _ => {}
        }
        Some(progressed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn drops_everything_the_divergence_does_not_need() {
        let scenario = json!({
            "name": "n", "level": "loop", "description": "d",
            "responses": [{"content": [{"type": "text", "text": "a"}], "stopReason": "stop"},
                          {"content": [], "stopReason": "error", "errorMessage": "x"}],
            "tools": [{"name": "t", "description": "t", "parameters": {}, "behavior": {"text": "keep", "echoArgs": true}}]
        });
        // "Diverges" while some tool still has the behavior text "keep".
        let mut minimizer = Minimizer::new(1000, |s: &Value| s.to_string().contains("\"keep\""));
        let minimized = minimizer.minimize(scenario);
        assert_eq!(
            minimized,
            json!({"name": "n", "level": "loop", "responses": [],
                   "tools": [{"name": "t", "description": "t", "parameters": {}, "behavior": {"text": "keep"}}]})
        );
    }

    #[test]
    fn stops_at_the_budget() {
        let scenario = json!({"name": "n", "level": "loop", "responses": [1, 2, 3, 4]});
        let mut minimizer = Minimizer::new(2, |_: &Value| false);
        assert_eq!(minimizer.minimize(scenario.clone()), scenario);
        assert_eq!(minimizer.checks(), 2);
    }
}
