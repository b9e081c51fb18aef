//! Tools: the declaration the model sees and the executable [`AgentTool`].

use std::future::Future;
use std::sync::Arc;

use crate::cancel::CancellationToken;
use futures_core::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::content::{JsonObject, UserContent};
use crate::error::{BoxError, TypesError};
use crate::usage::Usage;
use crate::validation::{schema_for, ArgumentValidator};

/// A tool as declared to the model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments (key order kept as given).
    pub parameters: Arc<Value>,
    /// Provider-side constrained sampling preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained_sampling: Option<ConstrainedSampling>,
}

impl Tool {
    /// A declaration from its name, description and JSON Schema (no constrained sampling).
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        let (name, description) = (name.into(), description.into());
        Self { name, description, parameters: Arc::new(parameters), constrained_sampling: None }
    }
}

/// A reference to a declared tool by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReference {
    /// Tool name.
    pub name: String,
}

/// How strictly a provider should constrain sampling to the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strictness {
    /// Use it where supported.
    Prefer,
    /// Fail where unsupported.
    Require,
}

/// Constrained-sampling configuration of a tool (`false` on the wire disables it).
#[derive(Clone, Debug, PartialEq)]
pub enum ConstrainedSampling {
    /// `false`: never constrain.
    Disabled,
    /// JSON-schema constrained sampling (OpenAI `strict`).
    JsonSchema {
        /// Prefer or require.
        strict: Strictness,
    },
    /// Grammar variants per format (`openai_lark`, `openai_regex`).
    Grammar {
        /// Grammar text per format.
        variants: indexmap::IndexMap<String, String>,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ConstrainedSamplingWire {
    JsonSchema { strict: Strictness },
    Grammar { variants: indexmap::IndexMap<String, String> },
}

impl Serialize for ConstrainedSampling {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Disabled => serializer.serialize_bool(false),
            Self::JsonSchema { strict } => {
                ConstrainedSamplingWire::JsonSchema { strict: *strict }.serialize(serializer)
            }
            Self::Grammar { variants } => {
                ConstrainedSamplingWire::Grammar { variants: variants.clone() }.serialize(serializer)
            }
        }
    }
}

impl<'de> Deserialize<'de> for ConstrainedSampling {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        if value == Value::Bool(false) {
            return Ok(Self::Disabled);
        }
        match serde_json::from_value(value).map_err(D::Error::custom)? {
            ConstrainedSamplingWire::JsonSchema { strict } => Ok(Self::JsonSchema { strict }),
            ConstrainedSamplingWire::Grammar { variants } => Ok(Self::Grammar { variants }),
        }
    }
}

/// Whether tool calls of one assistant message run one after another or together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolExecutionMode {
    /// Prepare, execute and finish each call before the next.
    Sequential,
    /// Prepare in order, execute concurrently.
    #[default]
    Parallel,
}

/// Recovery policy for an effect whose outcome is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayPolicy {
    /// Never re-run.
    Never,
    /// Safe to re-run.
    Safe,
}

/// What a tool returns (also its progress updates).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "AgentToolResultWire")]
pub struct AgentToolResult {
    /// Model-facing content.
    pub content: Vec<UserContent>,
    /// Details for logs and UIs (`None` = absent, `Some(Null)` = `null`).
    #[serde(default, deserialize_with = "crate::serde_util::present", skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Machine-readable result matching the tool's output schema; not sent to the model.
    #[serde(default, deserialize_with = "crate::serde_util::present", skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Usage of the execution itself (boxed: rarely set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// Report a failure without an `Err`: the model sees an error result, details are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Ask to stop after this batch (only when every result of the batch asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate: Option<bool>,
    /// Every other member of the result object, kept as given: the reference passes a tool's
    /// result object on as it is, so `"isError": null` or a member of the tool's own reaches
    /// events and hooks unchanged. Only `true` flags count, as in the reference.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The wire form of [`AgentToolResult`]: flags that are not booleans (`null`) are kept among
/// the other members instead of being dropped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentToolResultWire {
    content: Vec<UserContent>,
    #[serde(default, deserialize_with = "crate::serde_util::present")]
    details: Option<Value>,
    #[serde(default, deserialize_with = "crate::serde_util::present")]
    structured_content: Option<Value>,
    #[serde(default)]
    usage: Option<Box<Usage>>,
    #[serde(default, deserialize_with = "crate::serde_util::present")]
    is_error: Option<Value>,
    #[serde(default, deserialize_with = "crate::serde_util::present")]
    terminate: Option<Value>,
    #[serde(flatten)]
    extra: JsonObject,
}

impl From<AgentToolResultWire> for AgentToolResult {
    fn from(wire: AgentToolResultWire) -> Self {
        let mut extra = wire.extra;
        let mut flag = |name: &str, value: Option<Value>| match value {
            Some(Value::Bool(flag)) => Some(flag),
            Some(other) => {
                extra.insert(name.to_owned(), other);
                None
            }
            None => None,
        };
        let is_error = flag("isError", wire.is_error);
        let terminate = flag("terminate", wire.terminate);
        Self {
            content: wire.content,
            details: wire.details,
            structured_content: wire.structured_content,
            usage: wire.usage,
            is_error,
            terminate,
            extra,
        }
    }
}

impl AgentToolResult {
    /// A text result with empty details `{}`.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![UserContent::text(text)], details: Some(Value::Object(Map::new())), ..Default::default() }
    }

    /// Set the details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

/// Receives a tool's progress updates while it runs; later calls are ignored.
pub type ToolUpdateFn = Arc<dyn Fn(AgentToolResult) + Send + Sync>;

/// Static metadata of an executable tool: its declaration, compiled validator and policies.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// The declaration the model sees.
    pub declaration: Tool,
    /// Human-readable label.
    pub label: String,
    /// Per-tool execution mode override.
    pub execution_mode: Option<ToolExecutionMode>,
    /// JSON Schema of `structured_content`.
    pub output_schema: Option<Value>,
    /// Replay policy.
    pub replay: Option<ReplayPolicy>,
    validator: Arc<ArgumentValidator>,
}

impl ToolSpec {
    /// Compile the argument validator of a declaration (once per tool).
    pub fn new(declaration: Tool) -> Result<Self, TypesError> {
        let validator = ArgumentValidator::new(&declaration.parameters)
            .map_err(|e| TypesError::InvalidToolSchema { tool: declaration.name.clone(), reason: e.to_string() })?;
        Ok(Self {
            label: declaration.name.clone(),
            declaration,
            execution_mode: None,
            output_schema: None,
            replay: None,
            validator: Arc::new(validator),
        })
    }

    /// Set the label.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Set the execution mode override.
    pub fn with_execution_mode(mut self, mode: ToolExecutionMode) -> Self {
        self.execution_mode = Some(mode);
        self
    }

    /// The tool name.
    pub fn name(&self) -> &str {
        &self.declaration.name
    }

    /// The compiled validator.
    pub fn validator(&self) -> &ArgumentValidator {
        &self.validator
    }
}

/// An executable tool.
///
/// `execute` receives the validated (coerced) arguments. Returning `Err(e)` is the
/// reference's thrown error: the model gets an error result with text `e.to_string()`.
pub trait AgentTool: Send + Sync + 'static {
    /// Declaration, validator and policies.
    fn spec(&self) -> &ToolSpec;

    /// Compatibility shim for raw arguments before validation; `None` keeps them.
    fn prepare_arguments(&self, _arguments: &JsonObject) -> Option<JsonObject> {
        None
    }

    /// Run the call. `cancel` is the run's cancellation token; `on_update` reports progress.
    fn execute(
        &self,
        call_id: String,
        args: Value,
        cancel: CancellationToken,
        on_update: ToolUpdateFn,
    ) -> BoxFuture<'static, Result<AgentToolResult, BoxError>>;
}

/// Everything a closure tool gets besides its arguments.
#[derive(Clone)]
pub struct ToolCallContext {
    /// The tool-call id.
    pub call_id: String,
    /// The run's cancellation token.
    pub cancel: CancellationToken,
    /// Progress reporter.
    pub on_update: ToolUpdateFn,
}

type ToolBody = dyn Fn(Value, ToolCallContext) -> BoxFuture<'static, Result<AgentToolResult, BoxError>> + Send + Sync;

/// A tool made of a declaration and an async closure.
///
/// ```
/// use pi_types::{AgentToolResult, FnTool};
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args { city: String }
/// let tool = FnTool::typed("get_weather", "Current weather", |args: Args, _ctx| async move {
///     Ok(AgentToolResult::text(format!("Sunny in {}", args.city)))
/// }).unwrap();
/// assert_eq!(pi_types::AgentTool::spec(&tool).name(), "get_weather");
/// ```
#[derive(Clone)]
pub struct FnTool {
    spec: ToolSpec,
    body: Arc<ToolBody>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl FnTool {
    /// A tool over raw JSON arguments.
    pub fn new<F, Fut>(spec: ToolSpec, body: F) -> Self
    where
        F: Fn(Value, ToolCallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<AgentToolResult, BoxError>> + Send + 'static,
    {
        Self { spec, body: Arc::new(move |args, ctx| Box::pin(body(args, ctx))) }
    }

    /// A tool whose arguments are a Rust type: the JSON Schema comes from `schemars`, the
    /// arguments are deserialized with `serde` after validation.
    pub fn typed<A, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        body: F,
    ) -> Result<Self, TypesError>
    where
        A: JsonSchema + DeserializeOwned + Send + 'static,
        F: Fn(A, ToolCallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<AgentToolResult, BoxError>> + Send + 'static,
    {
        let declaration = Tool {
            name: name.into(),
            description: description.into(),
            parameters: Arc::new(schema_for::<A>()),
            constrained_sampling: None,
        };
        let spec = ToolSpec::new(declaration)?;
        let body = Arc::new(body);
        Ok(Self::new(spec, move |args: Value, ctx| {
            let body = Arc::clone(&body);
            async move {
                let args: A = serde_json::from_value(args)?;
                body(args, ctx).await
            }
        }))
    }

    /// Replace the spec (label, execution mode, ...), keeping the body.
    pub fn with_spec(mut self, f: impl FnOnce(ToolSpec) -> ToolSpec) -> Self {
        self.spec = f(self.spec);
        self
    }
}

impl AgentTool for FnTool {
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
        (self.body)(args, ToolCallContext { call_id, cancel, on_update })
    }
}
