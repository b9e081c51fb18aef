//! Provider registry and streaming adapters for pi.
//!
//! An adapter for each of the reference's ten streaming APIs reproduces
//! `@earendil-works/pi-ai` 1.6.1 event for event: `openai_completions`, `anthropic`,
//! `openai_responses`, `google`, `google_vertex`, `bedrock`, `azure_openai_responses`,
//! `mistral`, `openai_codex_responses` and `pi_messages`. Each is a [`pi_types::StreamFn`]: it
//! never fails synchronously, makes its connection inside the returned stream and ends it with
//! exactly one `done` or `error` event. The [`registry`] resolves a provider, its credentials
//! and the adapter for a model's API, like the reference's `createModels` / `createProvider`;
//! the built-in [`catalog`] is the reference's: 43 providers, 1,696 chat models. The [`faux`]
//! provider is a scripted stand-in for tests.
//!
//! Beyond chat, [`classifier`] (structured questions answered with probabilities, five APIs)
//! and [`images`] (image generation over OpenRouter) port pi-ai 1.6.1's one-shot calls,
//! `Models::classify` and `Models::generate_images`, with their catalogs (see
//! `docs/classifiers.md`). [`deferred`] responses (`Models::stream_deferred`,
//! `fetch_deferred`, `cancel_deferred`) are dispatched per API like streams; the faux provider
//! implements them, as the reference's does.
//!
//! # Features
//!
//! * `http` (default): every adapter but Bedrock's, `Provider::builtin`,
//!   `Provider::with_http_apis` and `Models::with_builtins`, with their HTTP client (reqwest on
//!   rustls). Without it (`default-features = false`) the crate is the registry, the catalog,
//!   the SSE decoder, the error classification and the faux provider, and brings no network
//!   stack: what tests and applications with their own provider need.
//! * `bedrock`: the `bedrock` adapter (`bedrock-converse-stream`, Amazon Bedrock's Converse
//!   stream API) with the official AWS crates it needs (SigV4 signing, event-stream framing,
//!   the credential chain); implies `http`.
//! * `vertex`: application default credentials (OAuth2 access tokens) for the
//!   `google_vertex` adapter, through the `gcp_auth` crate. Vertex's API-key mode works with
//!   `http` alone.
//!
//! # Example
//!
//! A registry with one provider whose API is served by the faux provider; a provider crate of
//! your own registers the same way, under its own API id. `Models` is itself a `StreamFn`, so
//! it can be handed to `pi-loop` or `pi-agent` and dispatch every request by the model's
//! provider and API.
//!
//! ```
//! use std::sync::Arc;
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_providers::{Auth, Models, Provider};
//! use pi_types::{Context, Message, StopReason, StreamOptions, UserMessage};
//!
//! let faux = FauxProvider::default();
//! faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hi!")], StopReason::Stop))]);
//! let models = Models::new();
//! models.set_provider(
//!     Provider::new("faux").with_auth(Auth::None).with_model(faux.model()).with_api("faux", Arc::new(faux.clone())),
//! );
//!
//! let model = models.get_model("faux", "faux-1").unwrap();
//! let context = Context { messages: vec![Message::from(UserMessage::text("Hello"))], ..Default::default() };
//! let reply = futures::executor::block_on(models.complete(&model, context, StreamOptions::default())).unwrap();
//! assert_eq!(reply.text(), "Hi!");
//! assert_eq!(reply.stop_reason, StopReason::Stop);
//! ```
//!
//! With `http`, [`Models::with_builtins`](registry::Models) holds the catalog's providers,
//! keyed from the environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, ...):
//!
//! ```no_run
//! # #[cfg(feature = "http")] {
//! use pi_providers::Models;
//! use pi_types::{Context, Message, StreamOptions, UserMessage};
//! # futures::executor::block_on(async {
//! let models = Models::with_builtins();
//! let model = models.get_model("anthropic", "claude-sonnet-4-5").expect("in the catalog");
//! let context = Context { messages: vec![Message::from(UserMessage::text("Hello"))], ..Default::default() };
//! let reply = models.complete(&model, context, StreamOptions::default()).await;
//! # });
//! # }
//! ```
//!
//! # HTTP client
//!
//! Requests go out through a `reqwest::Client` chosen per request: the request's own
//! (`StreamOptions::http_client`), the provider's, the registry's, else one shared default
//! that keeps connections pooled across requests and agents. A client of yours carries a
//! proxy, a private CA or a client certificate; environment proxies (`HTTPS_PROXY`, ...) are
//! an explicit opt-in. The time limits, size caps and cancellation hold whatever the client.
//! See the `client` module (feature `http`).
//!
//! See `docs/providers.md` for the SSE decoder, retry, timeout and compatibility rules.

pub mod api;
#[cfg(feature = "http")]
pub mod auth;
pub mod cache_warming;
pub mod catalog;
pub mod classifier;
pub mod deferred;
pub mod faux;
pub mod images;
#[cfg(feature = "http")]
mod layer;
pub mod models_store;
pub mod registry;
pub mod session_resources;
pub mod transport;

mod atomic_file;
// Parsing helpers shared by the faux provider and the adapters; some are the adapters' only.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
mod js_json;
// Their functions are re-exported below.
mod classify;
mod cost;
mod failure;

pub use classify::{is_context_overflow, is_recoverable_length, is_refused_connection, is_retryable_error};
pub use cost::calculate_cost;
pub use pi_types::StreamFn;
pub use registry::{env_api_key, Auth, Models, Provider, ProviderError};
/// The HTTP client crate the adapters send with, at the version this crate links: build
/// clients for [`transport::client`] with it.
#[cfg(feature = "http")]
pub use reqwest;
pub use session_resources::{cleanup_session_resources, register_session_resource_cleanup};
/// The shared HTTP client, the default idle limit and the `errorMessage` bound, for crates
/// that stream over HTTP themselves (the proxy client) with the adapters' settings.
#[cfg(feature = "http")]
pub use transport::http::{bound_error_message, client as http_client, DEFAULT_IDLE_TIMEOUT_MS};
