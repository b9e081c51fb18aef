//! Tools whose behaviour a scenario scripts.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use pi_types::CancellationToken;
use pi_types::{AgentTool, AgentToolResult, BoxError, Tool, ToolSpec, ToolUpdateFn, UserContent};
use serde_json::{Map, Value};

use crate::scenario::{ScenarioError, ToolSpecJson};

/// A scripted tool (see the scenario format's "Tool specs").
#[derive(Debug)]
pub struct ScenarioTool {
    spec: ToolSpec,
    behavior: Map<String, Value>,
}

impl ScenarioTool {
    /// Build the tool of a spec.
    pub fn build(json: &ToolSpecJson) -> Result<Arc<dyn AgentTool>, ScenarioError> {
        let declaration = Tool {
            name: json.name.clone(),
            description: json.description.clone(),
            parameters: json.parameters.clone().into(),
            constrained_sampling: None,
        };
        let mut spec = ToolSpec::new(declaration).map_err(|e| ScenarioError(e.to_string()))?;
        spec.execution_mode = json.execution_mode;
        Ok(Arc::new(Self { spec, behavior: json.behavior.clone() }))
    }

    fn behavior_for(&self, call_id: &str) -> Map<String, Value> {
        let mut behavior = self.behavior.clone();
        let per_call = behavior.shift_remove("perCall");
        let entry = per_call.as_ref().and_then(Value::as_array).and_then(|entries| {
            entries
                .iter()
                .filter_map(Value::as_object)
                .find(|e| e.get("toolCallId").and_then(Value::as_str) == Some(call_id))
        });
        if let Some(entry) = entry {
            for (key, value) in entry {
                if key != "toolCallId" {
                    behavior.insert(key.clone(), value.clone());
                }
            }
        }
        behavior
    }
}

fn text_of(value: Option<&Value>) -> String {
    value.and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// `details ?? {}`: absent and `null` both give `{}`.
fn details_of(value: Option<&Value>) -> Value {
    value.filter(|v| !v.is_null()).cloned().unwrap_or_else(|| Value::Object(Map::new()))
}

impl AgentTool for ScenarioTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn execute(
        &self,
        call_id: String,
        args: Value,
        cancel: CancellationToken,
        on_update: ToolUpdateFn,
    ) -> BoxFuture<'static, Result<AgentToolResult, BoxError>> {
        let behavior = self.behavior_for(&call_id);
        let name = self.spec.name().to_owned();
        Box::pin(async move {
            for update in behavior.get("updates").and_then(Value::as_array).into_iter().flatten() {
                on_update(AgentToolResult {
                    content: vec![UserContent::text(text_of(update.get("text")))],
                    details: Some(details_of(update.get("details"))),
                    ..Default::default()
                });
            }
            let abortable = behavior.get("abortable").and_then(Value::as_bool).unwrap_or(false);
            let delay = behavior.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
            if delay > 0 {
                let sleep = tokio::time::sleep(Duration::from_millis(delay));
                if abortable {
                    tokio::select! {
                        () = sleep => {}
                        () = cancel.cancelled() => {}
                    }
                } else {
                    sleep.await;
                }
            }
            if abortable && cancel.is_cancelled() {
                return Err(format!("Tool {name} aborted").into());
            }
            if let Some(message) = behavior.get("throw") {
                return Err(message.as_str().map(str::to_owned).unwrap_or_else(|| message.to_string()).into());
            }
            let mut text = text_of(behavior.get("text"));
            if behavior.get("echoArgs").and_then(Value::as_bool).unwrap_or(false) {
                text.push_str(&crate::normalize::sorted_json(&args));
            }
            // Flags are copied onto the result only when present, as given (`null` too).
            let mut result = serde_json::Map::new();
            result.insert("content".into(), serde_json::json!([{"type": "text", "text": text}]));
            result.insert("details".into(), details_of(behavior.get("details")));
            for flag in ["isError", "terminate"] {
                if let Some(value) = behavior.get(flag) {
                    result.insert(flag.into(), value.clone());
                }
            }
            serde_json::from_value::<AgentToolResult>(Value::Object(result)).map_err(|e| BoxError::from(e.to_string()))
        })
    }
}
