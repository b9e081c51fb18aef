//! Models and thinking levels.

use compact_str::CompactString;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Requested reasoning effort. `Off` disables reasoning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No reasoning.
    #[default]
    Off,
    /// Minimal.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high (selected models).
    Xhigh,
    /// Maximum (selected models).
    Max,
}

impl ThinkingLevel {
    /// Every level, `Off` first.
    pub const ALL: [ThinkingLevel; 7] =
        [Self::Off, Self::Minimal, Self::Low, Self::Medium, Self::High, Self::Xhigh, Self::Max];

    /// The wire name (`"off"`, `"minimal"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Max => "max",
        }
    }
}

impl std::fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Provider-native value per thinking level; `Some(None)` (JSON `null`) marks a level
/// unsupported, a missing key uses the provider default.
pub type ThinkingLevelMap = IndexMap<ThinkingLevel, Option<String>>;

/// Input kinds a model accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputModality {
    /// Text.
    Text,
    /// Images.
    Image,
}

/// A price tier that applies above an input size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCostTier {
    /// $ per million input tokens.
    pub input: f64,
    /// $ per million output tokens.
    pub output: f64,
    /// $ per million cache-read tokens.
    pub cache_read: f64,
    /// $ per million cache-write tokens.
    pub cache_write: f64,
    /// The tier applies when the input exceeds this many tokens.
    pub input_tokens_above: u64,
}

/// Prices in dollars per million tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    /// Input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache read.
    pub cache_read: f64,
    /// Cache write.
    pub cache_write: f64,
    /// Prices for large inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Vec<ModelCostTier>>,
}

/// Prompt-cache lifetimes in seconds per retention tier.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPromptCache {
    /// Short retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<u64>,
    /// Long retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long: Option<u64>,
}

/// A chat model: where it is served, what it costs and what it can do.
///
/// `Debug` lists the names of [`Model::headers`] but never their values (they often carry keys).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    /// Model id sent to the provider.
    pub id: CompactString,
    /// Display name.
    pub name: String,
    /// API adapter id (`openai-completions`, `anthropic-messages`, ...).
    pub api: CompactString,
    /// Provider id.
    pub provider: CompactString,
    /// Base URL of the API.
    pub base_url: String,
    /// Whether the model reasons.
    pub reasoning: bool,
    /// Provider values per thinking level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<ThinkingLevelMap>,
    /// Accepted inputs.
    pub input: Vec<InputModality>,
    /// Prices.
    pub cost: ModelCost,
    /// Context window in tokens.
    pub context_window: u64,
    /// Output limit in tokens.
    pub max_tokens: u64,
    /// Extra HTTP headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<IndexMap<String, String>>,
    /// Prompt-cache lifetimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<ModelPromptCache>,
    /// Default sampling parameters merged into requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_params: Option<Map<String, Value>>,
    /// Per-API compatibility switches (see the providers crate for their meaning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
    /// Fields of newer catalogs this version does not model, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are secrets as often as not: show which headers are set, not what.
        let header_names = self.headers.as_ref().map(|headers| RedactedHeaders(headers.keys().collect()));
        f.debug_struct("Model")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("api", &self.api)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("reasoning", &self.reasoning)
            .field("thinking_level_map", &self.thinking_level_map)
            .field("input", &self.input)
            .field("cost", &self.cost)
            .field("context_window", &self.context_window)
            .field("max_tokens", &self.max_tokens)
            .field("headers", &header_names)
            .field("prompt_cache", &self.prompt_cache)
            .field("sampling_params", &self.sampling_params)
            .field("compat", &self.compat)
            .field("extra", &self.extra)
            .finish()
    }
}

/// Header names with every value shown as `<redacted>`.
struct RedactedHeaders<'a>(Vec<&'a String>);

impl std::fmt::Debug for RedactedHeaders<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter().map(|name| (name, "<redacted>"))).finish()
    }
}

impl Model {
    /// A minimal model with this id, for tests and scripted providers: name the API and the
    /// provider with [`with_api`](Self::with_api) and [`with_provider`](Self::with_provider)
    /// (by name, so they cannot be swapped), e.g. `Model::new("m").with_api("faux").with_provider("faux")`.
    ///
    /// Its limits are 0 (unknown). For a server reached over HTTP, set them with
    /// [`with_limits`](Self::with_limits) and its address with [`with_base_url`](Self::with_base_url):
    /// the adapters fit the requested output into `max_tokens` and the context window as the
    /// reference does, and with both at 0 that asks for a one-token answer.
    pub fn new(id: impl Into<CompactString>) -> Self {
        let id = id.into();
        Self { name: id.to_string(), id, input: vec![InputModality::Text], ..Default::default() }
    }

    /// This model with `api`, the wire API its requests use (e.g. `openai-completions`).
    pub fn with_api(self, api: impl Into<CompactString>) -> Self {
        Self { api: api.into(), ..self }
    }

    /// This model with `provider`, the provider it belongs to (e.g. `openai`).
    pub fn with_provider(self, provider: impl Into<CompactString>) -> Self {
        Self { provider: provider.into(), ..self }
    }

    /// This model with `base_url`, where its API is served (e.g. `http://localhost:8000/v1`).
    pub fn with_base_url(self, base_url: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), ..self }
    }

    /// This model with its context window and output limit, in tokens.
    pub fn with_limits(self, context_window: u64, max_tokens: u64) -> Self {
        Self { context_window, max_tokens, ..self }
    }
}
