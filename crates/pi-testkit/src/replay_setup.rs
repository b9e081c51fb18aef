//! What both replay levels share: the trace, the scripted provider and tools, the scenario's
//! hooks and its action counter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pi_loop::{AfterToolCallResult, AgentContext, BeforeToolCallResult, Hooks, SetHooks, TurnDecision, TurnUpdate};
use pi_providers::faux::{FauxOptions, FauxProvider, FauxResponse};
use pi_types::{
    AgentEvent, AgentMessage, AgentTool, AssistantMessage, AssistantMessageEventStream, BoxError, Model, StreamFn,
    StreamOptions, ThinkingLevel, TranscriptContext, UserContent,
};
use serde_json::{json, Map, Value};

use crate::normalize::canonical_line;
use crate::scenario::{Scenario, ScenarioError, ToolSpecJson};
use crate::scenario_tool::ScenarioTool;

/// Builds the provider a replay streams a scenario's scripted responses through, from those
/// responses (in order; `api`, `provider` and `model` are the faux model's) and the scenario's
/// `tokenSize`. The default is the faux provider.
pub type ProviderFactory = dyn Fn(Vec<AssistantMessage>, usize) -> Arc<dyn StreamFn> + Send + Sync;

/// The lines of a trace, in order of occurrence. `None` reserves a slot.
#[derive(Clone, Default)]
pub(crate) struct Trace {
    lines: Arc<Mutex<Vec<Option<String>>>>,
}

impl Trace {
    pub(crate) fn push(&self, line: String) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(Some(line));
        }
    }

    pub(crate) fn record(&self, record: &impl serde::Serialize) {
        self.push(canonical_line(record));
    }

    pub(crate) fn error(&self, message: &str) {
        self.record(&json!({"kind": "error", "message": message}));
    }

    /// Reserve a line to fill later (`None` leaves it out).
    pub(crate) fn reserve(&self) -> usize {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.push(None);
        lines.len() - 1
    }

    pub(crate) fn fill(&self, index: usize, line: Option<String>) {
        if let Ok(mut lines) = self.lines.lock() {
            if let Some(slot) = lines.get_mut(index) {
                *slot = line;
            }
        }
    }

    pub(crate) fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().flatten().map(|l| format!("{l}\n")).collect()
    }
}

pub(crate) fn parse_message(value: &Value) -> Result<AgentMessage, ScenarioError> {
    AgentMessage::from_json(value.clone()).map_err(|e| ScenarioError(format!("message: {e}")))
}

pub(crate) fn parse_messages(values: &[Value]) -> Result<Vec<AgentMessage>, ScenarioError> {
    values.iter().map(parse_message).collect()
}

/// Everything the loop and agent runners share.
pub(crate) struct Setup {
    pub(crate) trace: Trace,
    pub(crate) faux: FauxProvider,
    pub(crate) model: Model,
    pub(crate) stream_fn: Arc<dyn StreamFn>,
    pub(crate) library: HashMap<String, ToolSpecJson>,
    pub(crate) initial_tools: Vec<Arc<dyn AgentTool>>,
}

struct TracingStream {
    trace: Trace,
    inner: Arc<dyn StreamFn>,
    count: Mutex<usize>,
}

impl StreamFn for TracingStream {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let n = {
            let mut count = self.count.lock().unwrap_or_else(|p| p.into_inner());
            *count += 1;
            *count
        };
        let level = options.reasoning.unwrap_or(ThinkingLevel::Off);
        self.trace.record(&json!({
            "kind": "request", "n": n, "messages": context.messages(), "thinkingLevel": level,
        }));
        self.inner.stream(model, context, options)
    }
}

impl Setup {
    pub(crate) fn new(scenario: &Scenario, provider: Option<&ProviderFactory>) -> Result<Self, ScenarioError> {
        let trace = Trace::default();
        let faux = FauxProvider::new(FauxOptions {
            api: "faux".into(),
            provider: "faux".into(),
            tokens_per_second: Some(1e9),
            ..FauxOptions::default().with_token_size(scenario.token_size)
        });
        let mut responses = Vec::new();
        for response in &scenario.responses {
            let mut object = Map::new();
            object.insert("role".into(), json!("assistant"));
            object.insert("content".into(), Value::Array(response.content.clone()));
            object.insert("api".into(), json!("faux"));
            object.insert("provider".into(), json!("faux"));
            object.insert("model".into(), json!("faux-1"));
            object.insert("stopReason".into(), serde_json::to_value(response.stop_reason).unwrap_or_default());
            if let Some(error) = &response.error_message {
                object.insert("errorMessage".into(), json!(error));
            }
            object.insert("timestamp".into(), json!(pi_types::now_ms()));
            let message: AssistantMessage =
                serde_json::from_value(Value::Object(object)).map_err(|e| ScenarioError(format!("response: {e}")))?;
            responses.push(message);
        }
        let model = faux.model();
        let inner: Arc<dyn StreamFn> = match provider {
            Some(build) => build(responses, scenario.token_size),
            None => {
                faux.set_responses(responses.into_iter().map(FauxResponse::Message));
                Arc::new(faux.clone())
            }
        };
        let stream_fn: Arc<dyn StreamFn> =
            Arc::new(TracingStream { trace: trace.clone(), inner, count: Mutex::new(0) });
        let mut library = HashMap::new();
        for spec in scenario.tool_library.iter().chain(&scenario.tools) {
            library.insert(spec.name.clone(), spec.clone());
        }
        let initial_tools = scenario.tools.iter().map(ScenarioTool::build).collect::<Result<_, _>>()?;
        Ok(Self { trace, faux, model, stream_fn, library, initial_tools })
    }

    pub(crate) fn resolve_tools(&self, items: &[Value]) -> Result<Vec<Arc<dyn AgentTool>>, ScenarioError> {
        items
            .iter()
            .map(|item| match item {
                Value::String(name) => self
                    .library
                    .get(name)
                    .ok_or_else(|| ScenarioError(format!("unknown tool \"{name}\" (not in tools or toolLibrary)")))
                    .and_then(ScenarioTool::build),
                spec => serde_json::from_value::<ToolSpecJson>(spec.clone())
                    .map_err(|e| ScenarioError(format!("inline tool: {e}")))
                    .and_then(|spec| ScenarioTool::build(&spec)),
            })
            .collect()
    }
}

fn rule_matches(rule: &Map<String, Value>, call: &pi_types::ToolCall) -> bool {
    let field = |key: &str| rule.get(key).and_then(Value::as_str);
    field("tool").is_none_or(|t| t == call.name) && field("toolCallId").is_none_or(|id| id == call.id)
}

fn thrown(rule: &Map<String, Value>) -> Option<BoxError> {
    rule.get("throw").map(|t| BoxError::from(t.as_str().map(str::to_owned).unwrap_or_else(|| t.to_string())))
}

fn turn_number(new_messages: &[AgentMessage]) -> u64 {
    new_messages.iter().filter(|m| matches!(m, AgentMessage::Assistant(_))).count() as u64
}

fn find_turn_rule(rules: &[Map<String, Value>], turn: u64) -> Option<&Map<String, Value>> {
    rules.iter().find(|r| r.get("turn").and_then(Value::as_u64) == Some(turn))
}

/// The scenario's data-driven hooks.
pub(crate) fn scenario_hooks(setup: &Arc<Setup>, scenario: &Scenario) -> Hooks {
    let rules = &scenario.config;
    let mut hooks = Hooks::new();
    if let Some(before) = rules.before_tool_call.clone() {
        hooks = hooks.before_tool_call(move |ctx, _cancel| {
            let rule = before.iter().find(|r| rule_matches(r, ctx.tool_call)).cloned();
            async move {
                let Some(rule) = rule else { return Ok(None) };
                if let Some(error) = thrown(&rule) {
                    return Err(error);
                }
                Ok(Some(BeforeToolCallResult {
                    block: rule.get("block").and_then(Value::as_bool).unwrap_or(false),
                    reason: rule.get("reason").and_then(Value::as_str).map(str::to_owned),
                    terminate: rule.get("terminate").and_then(Value::as_bool),
                }))
            }
        });
    }
    if let Some(after) = rules.after_tool_call.clone() {
        hooks = hooks.after_tool_call(move |ctx, _cancel| {
            let rule = after.iter().find(|r| rule_matches(r, ctx.tool_call)).cloned();
            async move {
                let Some(rule) = rule else { return Ok(None) };
                if let Some(error) = thrown(&rule) {
                    return Err(error);
                }
                // The runtime merges each returned field with `??`, so a `null` keeps the result's own.
                let content = match rule.get("content").filter(|c| !c.is_null()) {
                    Some(content) => Some(serde_json::from_value::<Vec<UserContent>>(content.clone())?),
                    None => None,
                };
                Ok(Some(AfterToolCallResult {
                    content,
                    details: rule.get("details").cloned(),
                    is_error: rule.get("isError").and_then(Value::as_bool),
                    terminate: rule.get("terminate").and_then(Value::as_bool),
                    ..Default::default()
                }))
            }
        });
    }
    if let Some(finish) = rules.finish_turn.clone() {
        hooks = hooks.finish_turn(move |turn, _cancel| {
            let rule = find_turn_rule(&finish, turn_number(turn.new_messages)).cloned();
            async move {
                let Some(rule) = rule else { return Ok(None) };
                if let Some(error) = thrown(&rule) {
                    return Err(error);
                }
                Ok(match rule.get("action").and_then(Value::as_str) {
                    Some("end") => Some(TurnDecision::End),
                    Some("continue") => Some(TurnDecision::Continue),
                    _ => None,
                })
            }
        });
    }
    if let Some(prepare) = rules.prepare_next_turn.clone() {
        let setup = Arc::clone(setup);
        hooks = hooks.prepare_next_turn(move |turn, _cancel| {
            let rule = find_turn_rule(&prepare, turn_number(turn.new_messages)).cloned();
            let messages = turn.context.messages.clone();
            let setup = Arc::clone(&setup);
            async move {
                let Some(rule) = rule else { return Ok(None) };
                if let Some(error) = thrown(&rule) {
                    return Err(error);
                }
                let mut update = TurnUpdate::default();
                if let Some(list) = rule.get("messages").and_then(Value::as_array) {
                    update.messages = Some(parse_messages(list)?);
                }
                if let Some(list) = rule.get("tools").and_then(Value::as_array) {
                    update.context = Some(AgentContext { messages, tools: setup.resolve_tools(list)? });
                }
                if let Some(level) = rule.get("thinkingLevel") {
                    update.thinking_level = Some(serde_json::from_value(level.clone())?);
                }
                Ok(Some(update))
            }
        });
    }
    if let Some(transform) = &rules.transform_context {
        let keep = transform.keep_last;
        hooks = hooks.transform_context(move |messages, _cancel| {
            let start = messages.len().saturating_sub(keep);
            std::future::ready(Ok(messages[start..].to_vec()))
        });
    }
    hooks
}

/// Counts events per type and finds the actions they trigger.
#[derive(Default)]
pub(crate) struct ActionCounter {
    counts: Mutex<HashMap<&'static str, usize>>,
}

impl ActionCounter {
    pub(crate) fn fire<'s>(&self, scenario: &'s Scenario, event: &AgentEvent) -> Vec<&'s crate::scenario::ActionJson> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(event.type_name()).or_insert(0);
        *count += 1;
        let nth = *count;
        scenario.actions.iter().filter(|a| a.on.event == event.type_name() && a.on.nth == nth).collect()
    }
}
