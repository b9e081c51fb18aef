//! Random valid conformance scenarios (the contract of `tests/fixtures/conformance/README.md`).
//!
//! One [`fastrand::Rng`] drives every choice, so a seed and an index reproduce a scenario.
//! Everything stays inside the authors' determinism rules: ASCII text, integer numbers, no
//! integer-like keys, explicit unique tool-call ids, small arguments, and tool calls of one
//! response that may run concurrently get pairwise distinct delays [`DELAY_STEP_MS`] apart
//! (through `perCall` entries on every spec of the called name).

use fastrand::Rng;
use serde_json::{json, Map, Value};

/// Spacing of the delays of calls that may execute concurrently.
const DELAY_STEP_MS: u64 = 40;

const TOOL_NAMES: [&str; 4] = ["read", "write", "calc", "find"];
const WORDS: [&str; 12] =
    ["alpha", "beta", "gamma", "delta", "ok", "done", "file", "note", "plan", "step", "more", "why"];
/// ASCII that JSON escapes (quotes, backslashes, control characters), for streamed arguments.
const ODD_WORDS: [&str; 5] = ["say \"hi\"", "C:\\dir", "line\nbreak", "tab\there", "{\"k\":1}"];
const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];
const EVENT_TYPES: [&str; 10] = [
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
];

/// The JSON Schemas tools declare: every property type of the validator, optional and
/// required members, arrays and a nested object.
fn schema(rng: &mut Rng) -> Value {
    match rng.usize(0..7) {
        0 => json!({"type": "object", "properties": {}}),
        1 => json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        2 => json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "flag": {"type": "boolean"}}, "required": ["n"]}),
        3 => json!({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}}, "opt": {"type": "string"}}}),
        4 => json!({"type": "object", "properties": {
            "cfg": {"type": "object", "properties": {"depth": {"type": "integer"}, "on": {"type": "boolean"}},
                    "required": ["depth"]}}, "required": ["cfg"]}),
        5 => json!({"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer"}, "ids": {"type": "array", "items": {"type": "integer"}}},
            "required": ["query", "limit"]}),
        _ => json!({"type": "object", "properties": {"v": {"type": "null"}, "note": {"type": "string"}}}),
    }
}

/// A scenario generator for one scenario.
pub struct Gen<'r> {
    rng: &'r mut Rng,
    level_agent: bool,
    next_call: usize,
    /// Inline specs of `setTools` / `prepareNextTurn` lists (tool calls may target them).
    specs: Vec<Value>,
    /// Calls per response: (call id, tool name).
    batches: Vec<Vec<(String, String)>>,
    /// Leave out the triggers of the divergences of issue 9 (see [`scenario`]).
    avoid_known: bool,
}

impl<'r> Gen<'r> {
    fn chance(&mut self, percent: u32) -> bool {
        self.rng.u32(0..100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.rng.usize(0..items.len())]
    }

    fn word(&mut self) -> String {
        if self.chance(6) {
            (*self.pick(&ODD_WORDS)).to_owned()
        } else {
            (*self.pick(&WORDS)).to_owned()
        }
    }

    /// Short ASCII text, sometimes empty.
    fn text(&mut self) -> String {
        if self.chance(8) {
            return String::new();
        }
        let count = self.rng.usize(1..4);
        (0..count).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }

    fn details(&mut self) -> Value {
        if self.chance(20) {
            Value::Null
        } else {
            json!({"k": self.rng.u32(0..10), "tag": self.word()})
        }
    }

    fn flag(&mut self) -> Value {
        match self.rng.u32(0..10) {
            0..=5 => Value::Bool(true),
            6..=8 => Value::Bool(false),
            _ => Value::Null,
        }
    }

    fn text_blocks(&mut self) -> Value {
        let count = self.rng.usize(1..3);
        Value::Array((0..count).map(|_| json!({"type": "text", "text": self.text()})).collect())
    }

    // ----------------------------------------------------------------- tools

    fn behavior(&mut self) -> Map<String, Value> {
        let mut b = Map::new();
        if self.chance(70) {
            b.insert("text".into(), json!(self.text()));
        }
        if self.chance(30) {
            b.insert("echoArgs".into(), json!(true));
        }
        if self.chance(25) {
            let details = self.details();
            b.insert("details".into(), details);
        }
        if self.chance(12) {
            let flag = self.flag();
            b.insert("isError".into(), flag);
        }
        if self.chance(15) {
            let flag = self.flag();
            b.insert("terminate".into(), flag);
        }
        if self.chance(20) {
            b.insert("abortable".into(), json!(true));
        }
        if self.chance(10) {
            b.insert("throw".into(), json!(format!("boom {}", self.word())));
        }
        if self.chance(25) {
            let count = self.rng.usize(1..3);
            let updates = (0..count)
                .map(|_| {
                    let mut u = Map::new();
                    u.insert("text".into(), json!(self.text()));
                    if self.chance(40) {
                        u.insert("details".into(), self.details());
                    }
                    Value::Object(u)
                })
                .collect();
            b.insert("updates".into(), Value::Array(updates));
        }
        if self.avoid_known {
            b.shift_remove("updates");
            b.retain(|key, value| !(value.is_null() && matches!(key.as_str(), "details" | "isError" | "terminate")));
        }
        b
    }

    fn tool_spec(&mut self, name: &str) -> Value {
        let mut spec = Map::new();
        spec.insert("name".into(), json!(name));
        spec.insert("description".into(), json!(format!("{name} {}", self.word())));
        spec.insert("parameters".into(), schema(self.rng));
        match self.rng.u32(0..20) {
            0 | 1 => {
                spec.insert("executionMode".into(), json!("sequential"));
            }
            2 => {
                spec.insert("executionMode".into(), json!("parallel"));
            }
            _ => {}
        }
        let behavior = self.behavior();
        if !behavior.is_empty() || self.chance(50) {
            spec.insert("behavior".into(), Value::Object(behavior));
        }
        Value::Object(spec)
    }

    fn declaration(spec: &Value) -> Value {
        json!({"name": spec["name"], "description": spec["description"], "parameters": spec["parameters"]})
    }

    // -------------------------------------------------------------- messages

    fn user(&mut self) -> Value {
        let content = if self.chance(70) { json!(self.text()) } else { self.text_blocks() };
        json!({"role": "user", "content": content, "timestamp": 0})
    }

    fn custom(&mut self) -> Value {
        json!({"role": "notification", "text": self.text(), "timestamp": 0})
    }

    fn system(&mut self, tools: &[Value]) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), json!("system"));
        let content = if self.avoid_known || self.chance(65) { json!(self.text()) } else { self.text_blocks() };
        m.insert("content".into(), content);
        if self.chance(30) {
            let mut sections = Map::new();
            for name in ["intro", "rules", "style"] {
                if self.chance(50) {
                    let value =
                        if self.chance(20) { Value::Null } else { json!(format!("<{name}>{}</{name}>", self.word())) };
                    sections.insert(name.into(), value);
                }
            }
            m.insert("sections".into(), Value::Object(sections));
        }
        if !tools.is_empty() && self.chance(30) {
            let added: Vec<Value> = tools.iter().filter(|_| self.chance(60)).map(Self::declaration).collect();
            m.insert("toolsAdded".into(), Value::Array(added));
        }
        if self.chance(20) {
            let name = *self.pick(&TOOL_NAMES);
            m.insert("toolsRemoved".into(), json!([{"name": name}]));
        }
        m.insert("timestamp".into(), json!(0));
        Value::Object(m)
    }

    /// An earlier assistant answer: text, sometimes thinking, sometimes a failed response.
    fn assistant_text(&mut self) -> Value {
        let mut content = Vec::new();
        if self.chance(25) {
            content.push(json!({"type": "thinking", "thinking": self.text()}));
        }
        if self.chance(90) {
            content.push(json!({"type": "text", "text": self.text()}));
        }
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert("content".into(), Value::Array(content));
        for (key, value) in [("api", "faux"), ("provider", "faux"), ("model", "faux-1")] {
            m.insert(key.into(), json!(value));
        }
        match self.rng.u32(0..10) {
            0 => {
                m.insert("stopReason".into(), json!("error"));
                m.insert("errorMessage".into(), json!(format!("provider {}", self.word())));
            }
            1 => {
                m.insert("stopReason".into(), json!("aborted"));
                m.insert("errorMessage".into(), json!("Request was aborted"));
            }
            2 => {
                m.insert("stopReason".into(), json!("length"));
            }
            _ => {
                m.insert("stopReason".into(), json!("stop"));
            }
        }
        m.insert("timestamp".into(), json!(0));
        Value::Object(m)
    }

    /// A message that may be queued or prompted: mostly user, sometimes system or custom.
    fn queued(&mut self, tools: &[Value]) -> Value {
        match self.rng.u32(0..10) {
            0 => self.system(tools),
            1 => self.custom(),
            _ => self.user(),
        }
    }

    fn queued_list(&mut self, tools: &[Value]) -> Vec<Value> {
        let count = self.rng.usize(1..3);
        (0..count).map(|_| self.queued(tools)).collect()
    }

    /// An initial transcript: optional leading system message, earlier exchanges (with a
    /// completed tool call), custom messages.
    fn transcript(&mut self, tools: &[Value], for_continue: bool) -> Vec<Value> {
        let mut messages = Vec::new();
        if self.chance(50) {
            messages.push(self.system(tools));
        }
        for _ in 0..self.rng.usize(0..3) {
            match self.rng.u32(0..6) {
                0 => messages.push(self.custom()),
                1 if !tools.is_empty() => {
                    let id = format!("old{}", self.next_call);
                    self.next_call += 1;
                    let name = tools[self.rng.usize(0..tools.len())]["name"].clone();
                    messages.push(self.user());
                    messages.push(json!({"role": "assistant", "content": [
                        {"type": "toolCall", "id": id, "name": name, "arguments": {}}], "api": "faux",
                        "provider": "faux", "model": "faux-1", "stopReason": "toolUse", "timestamp": 0}));
                    // Sometimes the result is missing (an orphan call) or comes without its call.
                    if !self.chance(15) {
                        messages.push(json!({"role": "toolResult", "toolCallId": id, "toolName": name,
                            "content": [{"type": "text", "text": self.text()}], "isError": self.chance(20),
                            "timestamp": 0}));
                    }
                    if self.chance(8) {
                        messages.push(json!({"role": "toolResult", "toolCallId": "lost", "toolName": name,
                            "content": [{"type": "text", "text": self.text()}], "isError": false, "timestamp": 0}));
                    }
                }
                _ => {
                    messages.push(self.user());
                    messages.push(self.assistant_text());
                }
            }
        }
        if for_continue {
            match self.rng.u32(0..10) {
                0 => {} // may end with an assistant message: continue fails
                1 => messages.push(self.custom()),
                2 => messages.push(self.system(tools)),
                _ => messages.push(self.user()),
            }
        }
        messages
    }

    // --------------------------------------------------------------- responses

    fn arg_value(&mut self, property: &Value, required: bool) -> Option<Value> {
        let kind = property["type"].as_str().unwrap_or("string");
        let roll = self.rng.u32(0..100);
        if roll < 5 {
            return None; // missing
        }
        if roll < 9 && !required {
            return Some(Value::Null); // dropped when optional
        }
        let coerce = (9..22).contains(&roll);
        let invalid = (22..30).contains(&roll);
        let n = self.rng.i64(-3..50);
        Some(match (kind, coerce, invalid) {
            ("string", true, _) => {
                if self.chance(50) {
                    json!(n)
                } else {
                    json!(self.chance(50))
                }
            }
            ("string", _, true) => json!({"s": self.word()}),
            ("string", ..) => json!(self.word()),
            ("integer", true, _) => {
                if self.chance(50) {
                    json!(n.to_string())
                } else {
                    json!(format!("{n}.7"))
                }
            }
            ("integer", _, true) => json!(self.word()),
            ("integer", ..) => json!(n),
            ("number", true, _) => json!(format!("{n}.5")),
            ("number", _, true) => json!([n]),
            ("number", ..) => json!(n),
            ("boolean", true, _) => json!(if self.chance(50) { "true" } else { "false" }),
            ("boolean", _, true) => json!("yes"),
            ("boolean", ..) => json!(self.chance(50)),
            ("array", true, _) => self.arg_value(&property["items"], true).unwrap_or(json!(n)),
            ("array", _, true) => json!({"a": n}),
            ("array", ..) => {
                let count = self.rng.usize(0..3);
                Value::Array((0..count).filter_map(|_| self.arg_value(&property["items"], true)).collect())
            }
            ("object", _, true) => json!(self.word()),
            ("object", ..) => self.arguments(property),
            ("null", _, true) => json!(n),
            ("null", ..) => Value::Null,
            _ => json!(self.word()),
        })
    }

    fn arguments(&mut self, schema: &Value) -> Value {
        let required: Vec<&str> =
            schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let mut args = Map::new();
        if let Some(properties) = schema["properties"].as_object() {
            for (name, property) in properties {
                let is_required = required.contains(&name.as_str());
                if !is_required && self.chance(35) {
                    continue;
                }
                if let Some(value) = self.arg_value(property, is_required) {
                    args.insert(name.clone(), value);
                }
            }
        }
        if self.chance(5) {
            args.insert("extra".into(), json!(self.word()));
        }
        Value::Object(args)
    }

    fn response(&mut self, known: &[Value]) -> Value {
        let count = self.rng.usize(0..4);
        let mut content = Vec::new();
        let mut calls = Vec::new();
        for _ in 0..count {
            match self.rng.u32(0..10) {
                0..=2 => content.push(json!({"type": "text", "text": self.text()})),
                3 | 4 => content.push(json!({"type": "thinking", "thinking": self.text()})),
                _ => {
                    let id = format!("call{}", self.next_call);
                    self.next_call += 1;
                    let (name, arguments) = if known.is_empty() || self.chance(8) {
                        ("ghost".to_owned(), json!({"q": self.word()}))
                    } else {
                        let spec = known[self.rng.usize(0..known.len())].clone();
                        let name = spec["name"].as_str().unwrap_or("ghost").to_owned();
                        (name, self.arguments(&spec["parameters"]))
                    };
                    calls.push((id.clone(), name.clone()));
                    content.push(json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments}));
                }
            }
        }
        let roll = self.rng.u32(0..100);
        let stop = if calls.is_empty() {
            match roll {
                0..=69 => "stop",
                70..=79 => "length",
                80..=89 => "error",
                90..=94 => "aborted",
                _ => "toolUse",
            }
        } else {
            match roll {
                0..=69 => "toolUse",
                70..=79 => "stop",
                80..=89 => "length",
                90..=94 => "error",
                _ => "aborted",
            }
        };
        self.batches.push(calls);
        let mut response = Map::new();
        response.insert("content".into(), Value::Array(content));
        response.insert("stopReason".into(), json!(stop));
        let wants_message = match stop {
            "error" => 80,
            "aborted" => 40,
            _ => 4,
        };
        if self.chance(wants_message) {
            response.insert("errorMessage".into(), json!(format!("provider {}", self.word())));
        }
        Value::Object(response)
    }

    // ------------------------------------------------------------------ config

    fn tool_list(&mut self, names: &[String]) -> Value {
        let count = self.rng.usize(0..4);
        let mut list = Vec::new();
        let mut listed = Vec::new();
        for _ in 0..count {
            let name = if !names.is_empty() && self.chance(70) { self.pick(names).clone() } else { String::new() };
            let inline_name = if name.is_empty() { (*self.pick(&TOOL_NAMES)).to_owned() } else { name.clone() };
            if self.avoid_known && listed.contains(&inline_name) {
                continue;
            }
            listed.push(inline_name.clone());
            if name.is_empty() {
                let spec = self.tool_spec(&inline_name);
                self.specs.push(spec.clone());
                list.push(spec);
            } else {
                list.push(json!(name));
            }
        }
        Value::Array(list)
    }

    fn call_rule(&mut self, after: bool) -> Value {
        let mut rule = Map::new();
        match self.rng.u32(0..4) {
            0 => {
                rule.insert("tool".into(), json!(*self.pick(&TOOL_NAMES)));
            }
            1 => {
                let id = format!("call{}", self.rng.usize(0..6));
                rule.insert("toolCallId".into(), json!(id));
            }
            _ => {}
        }
        if self.chance(15) {
            rule.insert("throw".into(), json!(format!("hook {}", self.word())));
        }
        if after {
            if self.chance(40) {
                let content = if self.chance(15) { Value::Null } else { self.text_blocks() };
                rule.insert("content".into(), content);
            }
            if self.chance(30) {
                let details = self.details();
                rule.insert("details".into(), details);
            }
            if self.chance(30) {
                let flag = self.flag();
                rule.insert("isError".into(), flag);
            }
            if self.chance(25) {
                let flag = self.flag();
                rule.insert("terminate".into(), flag);
            }
        } else {
            if self.chance(60) {
                rule.insert("block".into(), json!(self.chance(85)));
            }
            if self.chance(50) {
                rule.insert("reason".into(), json!(self.text()));
            }
            if self.chance(25) {
                let flag = self.flag();
                rule.insert("terminate".into(), flag);
            }
        }
        Value::Object(rule)
    }

    fn config(&mut self, tools: &[Value], names: &[String]) -> Map<String, Value> {
        let mut config = Map::new();
        match self.rng.u32(0..10) {
            0 | 1 => {
                config.insert("toolExecution".into(), json!("sequential"));
            }
            2 => {
                config.insert("toolExecution".into(), json!("parallel"));
            }
            _ => {}
        }
        if self.level_agent {
            for key in ["steeringMode", "followUpMode"] {
                if self.chance(35) {
                    config.insert(key.into(), json!(if self.chance(50) { "all" } else { "one-at-a-time" }));
                }
            }
        }
        for (key, after) in [("beforeToolCall", false), ("afterToolCall", true)] {
            if self.chance(20) {
                let count = self.rng.usize(0..3);
                let rules: Vec<Value> = (0..count).map(|_| self.call_rule(after)).collect();
                config.insert(key.into(), Value::Array(rules));
            }
        }
        if self.chance(15) {
            let count = self.rng.usize(1..3);
            let rules = (0..count)
                .map(|_| {
                    let turn = self.rng.u32(1..4);
                    if self.chance(20) {
                        json!({"turn": turn, "throw": format!("finish {}", self.word())})
                    } else {
                        json!({"turn": turn, "action": if self.chance(50) { "end" } else { "continue" }})
                    }
                })
                .collect();
            config.insert("finishTurn".into(), Value::Array(rules));
        }
        if self.chance(18) {
            let count = self.rng.usize(1..3);
            let mut rules = Vec::new();
            for _ in 0..count {
                let mut rule = Map::new();
                rule.insert("turn".into(), json!(self.rng.u32(1..4)));
                if self.chance(12) {
                    rule.insert("throw".into(), json!(format!("prepare {}", self.word())));
                }
                if self.chance(45) {
                    let messages = if self.chance(10) { Value::Null } else { Value::Array(self.queued_list(tools)) };
                    rule.insert("messages".into(), messages);
                }
                if self.chance(45) {
                    let list = self.tool_list(names);
                    rule.insert("tools".into(), list);
                }
                if self.chance(30) {
                    rule.insert("thinkingLevel".into(), json!(*self.pick(&THINKING_LEVELS)));
                }
                rules.push(Value::Object(rule));
            }
            config.insert("prepareNextTurn".into(), Value::Array(rules));
        }
        if self.chance(10) {
            config.insert("transformContext".into(), json!({"keepLast": self.rng.u32(1..5)}));
        }
        config
    }

    fn action(&mut self, tools: &[Value]) -> Value {
        let event = *self.pick(&EVENT_TYPES);
        let nth = match self.rng.u32(0..10) {
            0..=5 => 1,
            6..=8 => 2,
            _ => self.rng.u32(3..6),
        };
        let mut action = Map::new();
        action.insert("on".into(), json!({"event": event, "nth": nth}));
        let what = if self.level_agent {
            *self.pick(&["abort", "abort", "steer", "steer", "followUp", "followUp", "prompt", "continue", "reset"])
        } else {
            "abort"
        };
        action.insert("do".into(), json!(what));
        match what {
            "steer" | "followUp" => {
                let message = self.queued(tools);
                action.insert("message".into(), message);
            }
            "prompt" => {
                if self.chance(70) {
                    action.insert("text".into(), json!(self.text()));
                } else {
                    let messages = self.queued_list(tools);
                    action.insert("messages".into(), Value::Array(messages));
                }
            }
            _ => {}
        }
        Value::Object(action)
    }

    fn op(&mut self, tools: &[Value], names: &[String]) -> Value {
        match self.rng.u32(0..20) {
            0..=8 => json!({"op": "prompt", "text": self.text()}),
            9 | 10 => json!({"op": "prompt", "messages": self.queued_list(tools)}),
            11 | 12 => json!({"op": "continue"}),
            13 => json!({"op": "steer", "message": self.queued(tools)}),
            14 => json!({"op": "followUp", "message": self.queued(tools)}),
            15 => json!({"op": "reset"}),
            16 | 17 => {
                let list = self.tool_list(names);
                json!({"op": "setTools", "tools": list})
            }
            _ => json!({"op": "state"}),
        }
    }

    // ---------------------------------------------------------------- scenario

    /// Give the calls of every response distinct delays (`perCall` on every spec of the
    /// called name), and sometimes per-call behaviour overrides.
    fn assign_per_call(&mut self, scenario: &mut Map<String, Value>) {
        let mut entries: Vec<(String, Map<String, Value>)> = Vec::new();
        let batches = std::mem::take(&mut self.batches);
        for calls in &batches {
            let mut slots: Vec<u64> = (0..calls.len() as u64).map(|k| k * DELAY_STEP_MS).collect();
            self.rng.shuffle(&mut slots);
            for ((id, name), slot) in calls.iter().zip(slots) {
                let mut entry = Map::new();
                entry.insert("toolCallId".into(), json!(id));
                if calls.len() > 1 || self.chance(25) {
                    let delay = if calls.len() > 1 { slot } else { 10 };
                    if delay > 0 {
                        entry.insert("delayMs".into(), json!(delay));
                    }
                }
                if self.chance(12) {
                    let extra = self.behavior();
                    for (key, value) in extra {
                        entry.entry(key).or_insert(value);
                    }
                }
                if entry.len() > 1 {
                    entries.push((name.clone(), entry));
                }
            }
        }
        let mut patch = |spec: &mut Value| {
            let Some(name) = spec["name"].as_str().map(str::to_owned) else { return };
            let mine: Vec<Value> =
                entries.iter().filter(|(n, _)| *n == name).map(|(_, e)| Value::Object(e.clone())).collect();
            if mine.is_empty() {
                return;
            }
            if let Some(object) = spec.as_object_mut() {
                let behavior = object.entry("behavior").or_insert_with(|| json!({}));
                if let Some(behavior) = behavior.as_object_mut() {
                    behavior.insert("perCall".into(), Value::Array(mine));
                }
            }
        };
        for key in ["tools", "toolLibrary"] {
            if let Some(Value::Array(specs)) = scenario.get_mut(key) {
                specs.iter_mut().for_each(&mut patch);
            }
        }
        let patch_lists = |lists: &mut dyn Iterator<Item = &mut Value>| {
            for list in lists {
                for item in list.as_array_mut().into_iter().flatten() {
                    if item.is_object() {
                        patch(item);
                    }
                }
            }
        };
        if let Some(Value::Array(ops)) = scenario.get_mut("ops") {
            patch_lists(&mut ops.iter_mut().filter_map(|op| op.get_mut("tools")));
        }
        if let Some(Value::Array(rules)) = scenario.get_mut("config").and_then(|c| c.get_mut("prepareNextTurn")) {
            patch_lists(&mut rules.iter_mut().filter_map(|rule| rule.get_mut("tools")));
        }
    }
}

/// Generate one valid scenario named `name`. With `avoid_known`, leave out the triggers of
/// the divergences reported in issue 9 (system content as text blocks, tool progress updates,
/// `null` behaviour fields, a tool list naming a tool twice), to look for others while those
/// are being fixed.
pub fn scenario(rng: &mut Rng, name: &str, avoid_known: bool) -> Value {
    let level_agent = rng.bool();
    let mut g = Gen { rng, level_agent, next_call: 0, specs: Vec::new(), batches: Vec::new(), avoid_known };
    let mut s = Map::new();
    s.insert("name".into(), json!(name));
    s.insert("level".into(), json!(if level_agent { "agent" } else { "loop" }));
    match g.rng.u32(0..10) {
        0..=2 => {}
        3..=6 => {
            s.insert("tokenSize".into(), json!(2));
        }
        _ => {
            s.insert("tokenSize".into(), json!(3));
        }
    }
    if g.chance(35) {
        s.insert("thinkingLevel".into(), json!(*g.pick(&THINKING_LEVELS)));
    }

    // Tools: a few executable ones, sometimes a library with other definitions of the same names.
    let mut names: Vec<&str> = TOOL_NAMES.to_vec();
    g.rng.shuffle(&mut names);
    let tool_count = g.rng.usize(0..4);
    let tools: Vec<Value> = names[..tool_count].iter().map(|n| g.tool_spec(n)).collect();
    let library: Vec<Value> = if g.chance(30) {
        (0..g.rng.usize(1..3))
            .map(|_| {
                let name = *g.pick(&TOOL_NAMES);
                g.tool_spec(name)
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut all_names: Vec<String> =
        tools.iter().chain(&library).filter_map(|t| t["name"].as_str().map(str::to_owned)).collect();
    all_names.sort();
    all_names.dedup();
    let known: Vec<Value> = tools.iter().chain(&library).cloned().collect();

    let continue_run = !level_agent && g.chance(15);
    let messages = if continue_run || g.chance(35) { g.transcript(&tools, continue_run) } else { Vec::new() };
    if !messages.is_empty() {
        s.insert("messages".into(), Value::Array(messages));
    }
    if level_agent && g.chance(60) {
        s.insert("systemPrompt".into(), json!(g.text()));
    }

    let config = g.config(&tools, &all_names);
    if !config.is_empty() || g.chance(10) {
        s.insert("config".into(), Value::Object(config));
    }

    if level_agent {
        let count = g.rng.usize(1..5);
        let mut ops: Vec<Value> = (0..count).map(|_| g.op(&tools, &all_names)).collect();
        if !ops.iter().any(|op| op["op"] == "prompt") {
            ops.insert(0, json!({"op": "prompt", "text": g.text()}));
        }
        s.insert("ops".into(), Value::Array(ops));
    } else if continue_run {
        s.insert("continue".into(), json!(true));
    } else {
        let mut prompts = vec![g.user()];
        if g.chance(25) {
            prompts.insert(0, g.queued(&tools));
        }
        if g.chance(10) {
            prompts.push(g.custom());
        }
        s.insert("prompts".into(), Value::Array(prompts));
        for key in ["steering", "followUps"] {
            if g.chance(25) {
                let count = g.rng.usize(1..3);
                let entries: Vec<Value> =
                    (0..count).map(|_| json!({"poll": g.rng.u32(1..5), "messages": g.queued_list(&tools)})).collect();
                s.insert(key.into(), Value::Array(entries));
            }
        }
    }
    if g.chance(25) {
        let count = g.rng.usize(1..3);
        let actions: Vec<Value> = (0..count).map(|_| g.action(&tools)).collect();
        s.insert("actions".into(), Value::Array(actions));
    }

    // Responses last, so tool calls can target every spec, including inline ones.
    let mut targets = known;
    targets.extend(g.specs.iter().cloned());
    let count = g.rng.usize(1..6);
    let responses: Vec<Value> = (0..count).map(|_| g.response(&targets)).collect();
    s.insert("responses".into(), Value::Array(responses));
    if !tools.is_empty() {
        s.insert("tools".into(), Value::Array(tools));
    }
    if !library.is_empty() {
        s.insert("toolLibrary".into(), Value::Array(library));
    }
    g.assign_per_call(&mut s);
    Value::Object(s)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn strings_at(value: &Value, key: &str, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(members) => {
                for (k, v) in members {
                    if k == key {
                        if let Some(s) = v.as_str() {
                            out.insert(s.to_owned());
                        }
                    }
                    strings_at(v, key, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| strings_at(v, key, out)),
            _ => {}
        }
    }

    #[test]
    fn a_seed_reproduces_its_scenario() {
        let first = scenario(&mut Rng::with_seed(7), "a", false);
        assert_eq!(first, scenario(&mut Rng::with_seed(7), "a", false));
        assert_ne!(first, scenario(&mut Rng::with_seed(8), "a", false));
    }

    /// Every scenario is accepted by our scenario parser, and a few hundred cover every
    /// level, block kind, stop reason, op and action of the contract.
    #[test]
    fn scenarios_are_valid_and_cover_the_contract() {
        let mut rng = Rng::with_seed(1);
        let (mut types, mut stops, mut ops, mut actions, mut roles, mut levels) = Default::default();
        for i in 0..400 {
            let s = scenario(&mut rng, &format!("s{i}"), false);
            let text = s.to_string();
            if let Err(error) = pi_testkit::scenario::Scenario::parse(&text, None) {
                panic!("{error}: {text}");
            }
            strings_at(&s, "type", &mut types);
            strings_at(&s, "stopReason", &mut stops);
            strings_at(&s, "op", &mut ops);
            strings_at(&s, "do", &mut actions);
            strings_at(&s, "role", &mut roles);
            strings_at(&s, "level", &mut levels);
        }
        let set = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        assert!(set(&["text", "thinking", "toolCall"]).is_subset(&types));
        assert_eq!(stops, set(&["aborted", "error", "length", "stop", "toolUse"]));
        assert_eq!(ops, set(&["continue", "followUp", "prompt", "reset", "setTools", "state", "steer"]));
        assert_eq!(actions, set(&["abort", "continue", "followUp", "prompt", "reset", "steer"]));
        assert_eq!(roles, set(&["assistant", "notification", "system", "toolResult", "user"]));
        assert_eq!(levels, set(&["agent", "loop"]));
    }
}
