//! Classifiers (the reference's `classify`): structured questions about a JSON state, answered
//! with calibrated probabilities instead of generated text.
//!
//! A [`ClassifierContext`] holds the `state`, optional `images` and named questions of three
//! kinds: `choice` (one of several keys), `score` (a level on a scale) and `bool`. A call
//! resolves to one [`ClassifierResult`] and never fails: an error is a result with
//! `stopReason: "error"` (or `"aborted"`) and an `errorMessage`, and usage a billed request
//! reported stays on it. Usage is priced from the model's catalog prices, tiers included
//! ([`crate::calculate_cost`]), or taken from the service's billed amount where it reports one
//! (OpenRouter, pi-decision).
//!
//! The five classifier APIs of pi-ai 1.6.1, each a [`Classifier`] and a function of its module
//! (feature `http`):
//!
//! | API | module | wire |
//! |---|---|---|
//! | `typesafe-system-one` | [`typesafe_system_one`] | `POST {baseUrl}/systemone` (TypeSafe, OpenRouter, GitHub Copilot, OpenCode) |
//! | `cloudflare-workers-ai-system-one` | [`cloudflare_workers_ai_system_one`] | `POST {baseUrl}/run` in Cloudflare's envelope |
//! | `openai-decisions` | [`openai_decisions`] | `POST {baseUrl}/decisions` |
//! | `pi-decision` | [`pi_decision`] | `POST {baseUrl}/decision` |
//! | `llama-cpp-classify` | [`llama_cpp_classify`] | llama-server's `/tokenize`, `/apply-template`, `/completion` |
//!
//! [`classify`] dispatches on `model.api`; `Models::classify` also resolves the provider's key
//! and client first (see `docs/classifiers.md`). The built-in classifier models are in
//! [`catalog`]. Request options are [`StreamOptions`]: `api_key`, `headers`, `timeout_ms`,
//! `max_retries` (default 2 here), `cancel`, `on_payload`, `on_response`, `http_client`,
//! `session_id` (pi-decision) and `temperature` (llama.cpp only).
//!
//! ```
//! use pi_providers::classifier::{ClassifierContext, ClassifierQuestion};
//! let context: ClassifierContext = serde_json::from_value(serde_json::json!({
//!     "state": {"ticket": "My card was charged twice."},
//!     "questions": {
//!         "topic": {"type": "choice", "instructions": "What is it about?",
//!                   "criteria": {"billing": "Payments", "shipping": ""}},
//!         "angry": {"type": "bool", "instructions": "Is the customer upset?",
//!                   "criteria": {"true": "frustrated", "false": "calm"}}
//!     }
//! })).expect("a classifier context");
//! assert!(matches!(context.questions["angry"], ClassifierQuestion::Bool { .. }));
//! assert_eq!(serde_json::to_value(&context).expect("serializes")["questions"]["topic"]["type"], "choice");
//! ```

/// A unit struct that is the [`Classifier`] of the module's `classify` function.
#[cfg(feature = "http")]
macro_rules! classifier_of_module {
    ($name:ident, $api:literal) => {
        #[doc = concat!("The `", $api, "` [`Classifier`](super::Classifier): this module's [`classify`].")]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl super::Classifier for $name {
            fn classify<'a>(
                &'a self,
                model: &'a super::ClassifierModel,
                context: &'a super::ClassifierContext,
                options: &'a pi_types::StreamOptions,
            ) -> futures::future::BoxFuture<'a, super::ClassifierResult> {
                futures::FutureExt::boxed(classify(model, context, options))
            }
        }
    };
}

pub mod catalog;
#[cfg(feature = "http")]
pub mod cloudflare_workers_ai_system_one;
#[cfg(feature = "http")]
pub mod llama_cpp_classify;
#[cfg(feature = "http")]
mod models;
#[cfg(feature = "http")]
pub mod openai_decisions;
#[cfg(feature = "http")]
pub mod pi_decision;
#[cfg(feature = "http")]
mod shared;
#[cfg(feature = "http")]
mod system_one;
#[cfg(feature = "http")]
pub(crate) use shared::read_json as read_json_body;
#[cfg(feature = "http")]
pub mod typesafe_system_one;

use std::fmt;

use futures::future::BoxFuture;
use indexmap::IndexMap;
use pi_types::{ImageContent, InputModality, Model, ModelCost, StreamOptions, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The model type tag of a classifier catalog entry (`"type": "classifier"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClassifierType {
    /// `classifier`.
    #[default]
    #[serde(rename = "classifier")]
    Classifier,
}

/// A classifier model: usable with [`classify`] only.
///
/// `Debug` lists the names of [`ClassifierModel::headers`] but never their values.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassifierModel {
    /// Always `classifier`.
    #[serde(rename = "type")]
    pub kind: ClassifierType,
    /// Model id sent to the service.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Classifier API id (`typesafe-system-one`, ...).
    pub api: String,
    /// Provider id.
    pub provider: String,
    /// Base URL of the API.
    pub base_url: String,
    /// Accepted inputs (`image` allows [`ClassifierContext::images`]).
    pub input: Vec<InputModality>,
    /// Provider input limits, as the catalog has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_limits: Option<Value>,
    /// Prices in dollars per million tokens.
    pub cost: ModelCost,
    /// Context window in tokens.
    pub context_window: u64,
    /// System One switches: `imageInput` (`assets`, `images`, `state-image-urls`) and
    /// `sendImageOptInHeader`; detected from the provider and id when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
    /// Extra HTTP headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<IndexMap<String, String>>,
}

impl fmt::Debug for ClassifierModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Option<Vec<&String>> = self.headers.as_ref().map(|h| h.keys().collect());
        f.debug_struct("ClassifierModel")
            .field("id", &self.id)
            .field("api", &self.api)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("input", &self.input)
            .field("cost", &self.cost)
            .field("context_window", &self.context_window)
            .field("compat", &self.compat)
            .field("headers", &header_names)
            .finish()
    }
}

impl ClassifierModel {
    /// Whether the model accepts image input.
    pub fn accepts_images(&self) -> bool {
        self.input.contains(&InputModality::Image)
    }

    /// The chat-model view the HTTP layer, the pricing and the auth resolvers take: id, api,
    /// provider, base URL, inputs, prices and headers.
    pub fn request_model(&self) -> Model {
        let mut model = Model::new(self.id.as_str())
            .with_api(self.api.as_str())
            .with_provider(self.provider.as_str())
            .with_base_url(self.base_url.clone());
        model.name.clone_from(&self.name);
        model.input.clone_from(&self.input);
        model.cost = self.cost.clone();
        model.context_window = self.context_window;
        model.headers.clone_from(&self.headers);
        model
    }
}

/// A `choice` question: one of the keys of `criteria` (key -> description, may be empty).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ClassifierQuestion {
    /// One key of `criteria`.
    #[serde(rename = "choice")]
    Choice {
        /// What to decide.
        instructions: String,
        /// The possible answers and what each means (descriptions may be empty).
        criteria: IndexMap<String, String>,
    },
    /// A level of `criteria`, from 0 (first) to `criteria.len() - 1`.
    #[serde(rename = "score")]
    Score {
        /// What to rate.
        instructions: String,
        /// The levels, lowest first.
        criteria: Vec<String>,
    },
    /// True or false.
    #[serde(rename = "bool")]
    Bool {
        /// What to decide.
        instructions: String,
        /// What true and false mean.
        criteria: BoolCriteria,
    },
}

impl ClassifierQuestion {
    /// The question's instructions.
    pub fn instructions(&self) -> &str {
        match self {
            Self::Choice { instructions, .. } | Self::Score { instructions, .. } | Self::Bool { instructions, .. } => {
                instructions
            }
        }
    }
}

/// What the answers of a `bool` question mean (either may be empty).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BoolCriteria {
    /// The meaning of true.
    #[serde(rename = "true")]
    pub yes: String,
    /// The meaning of false.
    #[serde(rename = "false")]
    pub no: String,
}

/// What a classifier judges: a JSON state, optional images and named questions (answered in
/// this order).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassifierContext {
    /// The data to judge.
    pub state: Map<String, Value>,
    /// Images judged together with the state; only models whose `input` includes `image`
    /// accept them.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "image_list")]
    pub images: Option<Vec<ImageContent>>,
    /// The questions by id.
    pub questions: IndexMap<String, ClassifierQuestion>,
}

/// Images as the reference writes them: `{"type": "image", "data", "mimeType"}`.
mod image_list {
    use pi_types::{ImageContent, UserContent};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    // `with` hands `Option<Vec<_>>`; `skip_serializing_if` keeps `None` out.
    #[allow(clippy::ref_option)]
    pub(super) fn serialize<S: Serializer>(images: &Option<Vec<ImageContent>>, s: S) -> Result<S::Ok, S::Error> {
        let tagged: Option<Vec<UserContent>> =
            images.as_ref().map(|list| list.iter().cloned().map(UserContent::Image).collect());
        tagged.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<ImageContent>>, D::Error> {
        Option::<Vec<ImageContent>>::deserialize(d)
    }
}

/// An answer, of the kind of its question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ClassifierAnswer {
    /// The chosen key, every key's probability and the confidence.
    #[serde(rename = "choice")]
    Choice {
        /// The most likely key.
        choice: String,
        /// Probability per key.
        probabilities: IndexMap<String, f64>,
        /// Confidence in the choice, 0 to 1.
        confidence: f64,
    },
    /// The expected level and the confidence.
    #[serde(rename = "score")]
    Score {
        /// The score, 0 to levels - 1.
        score: f64,
        /// Confidence, 0 to 1.
        confidence: f64,
    },
    /// The probability of true.
    #[serde(rename = "bool")]
    Bool {
        /// Probability of true.
        probability: f64,
    },
}

/// How a classification ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClassifierStopReason {
    /// Every question answered.
    #[default]
    Stop,
    /// Failed: see `errorMessage`.
    Error,
    /// Cancelled.
    Aborted,
}

/// The outcome of a classification.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassifierResult {
    /// The model's API.
    pub api: String,
    /// The model's provider.
    pub provider: String,
    /// The model id.
    pub model: String,
    /// Answers by question id (empty on error).
    pub answers: IndexMap<String, ClassifierAnswer>,
    /// Token usage and its cost, when the service reports token counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The service's response id, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// How it ended.
    pub stop_reason: ClassifierStopReason,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Unix time in milliseconds when the call started.
    pub timestamp: u64,
}

impl ClassifierResult {
    /// An empty successful result for `model`, stamped now.
    pub fn new(model: &ClassifierModel) -> Self {
        Self {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            timestamp: pi_types::now_ms(),
            ..Default::default()
        }
    }

    /// A failed result: no answers, `stopReason` `error` (or `aborted`).
    pub fn failed(model: &ClassifierModel, message: impl Into<String>, aborted: bool) -> Self {
        let mut result = Self::new(model);
        result.fail(message.into(), aborted);
        result
    }

    /// The result once the call's work is done: `outcome`'s error, if any, fails it (as
    /// `aborted` when the options' cancellation fired).
    #[cfg(feature = "http")]
    pub(crate) fn settle(mut self, outcome: Result<(), String>, options: &StreamOptions) -> Self {
        if let Err(message) = outcome {
            self.fail(message, cancelled(options));
        }
        self
    }

    pub(crate) fn fail(&mut self, message: String, aborted: bool) {
        self.answers.clear();
        self.stop_reason = if aborted { ClassifierStopReason::Aborted } else { ClassifierStopReason::Error };
        self.error_message = Some(message);
    }
}

/// One classifier API: answers a context's questions. Never fails: errors are results.
pub trait Classifier: Send + Sync {
    /// Classify `context` with `model`.
    fn classify<'a>(
        &'a self,
        model: &'a ClassifierModel,
        context: &'a ClassifierContext,
        options: &'a StreamOptions,
    ) -> BoxFuture<'a, ClassifierResult>;
}

/// Whether the options' cancellation fired (a failed call is then `aborted`).
#[cfg(feature = "http")]
pub(crate) fn cancelled(options: &StreamOptions) -> bool {
    options.cancel.as_ref().is_some_and(pi_types::CancellationToken::is_cancelled)
}

/// The built-in classifier for an API id, if there is one.
#[cfg(feature = "http")]
pub fn builtin(api: &str) -> Option<&'static dyn Classifier> {
    static LLAMA: std::sync::OnceLock<llama_cpp_classify::LlamaCppClassify> = std::sync::OnceLock::new();
    Some(match api {
        typesafe_system_one::API => &typesafe_system_one::TypesafeSystemOne,
        cloudflare_workers_ai_system_one::API => &cloudflare_workers_ai_system_one::CloudflareWorkersAiSystemOne,
        openai_decisions::API => &openai_decisions::OpenAiDecisions,
        pi_decision::API => &pi_decision::PiDecision,
        llama_cpp_classify::API => LLAMA.get_or_init(llama_cpp_classify::LlamaCppClassify::default),
        _ => return None,
    })
}

/// Classify with the built-in implementation of `model.api` (the key must be in
/// `options.api_key`; `Models::classify` resolves it from the provider).
#[cfg(feature = "http")]
pub async fn classify(
    model: &ClassifierModel,
    context: &ClassifierContext,
    options: &StreamOptions,
) -> ClassifierResult {
    match builtin(&model.api) {
        Some(classifier) => classifier.classify(model, context, options).await,
        None => ClassifierResult::failed(model, format!("No API provider registered for api: {}", model.api), false),
    }
}
