//! Every Markdown page of `docs/` as a doc test: each Rust code block in them is compiled (and
//! run unless it is marked `no_run`) by `cargo test -p pi-integration-tests --doc`, so the
//! docs' examples cannot rot. A block that is not Rust says its language (`text`, `sh`,
//! `toml`, ...); an unlabeled block would be compiled as Rust. `docs/api/` (recorded public
//! APIs, no code blocks) is not included.

#[doc = include_str!("../../docs/architecture.md")]
pub mod architecture {}

#[doc = include_str!("../../docs/auth.md")]
pub mod auth {}

#[doc = include_str!("../../docs/classifiers.md")]
pub mod classifiers {}

#[doc = include_str!("../../docs/conformance.md")]
pub mod conformance {}

#[doc = include_str!("../../docs/mcp.md")]
pub mod mcp {}

#[doc = include_str!("../../docs/performance.md")]
pub mod performance {}

#[doc = include_str!("../../docs/providers.md")]
pub mod providers {}

#[doc = include_str!("../../docs/providers/azure-openai-responses.md")]
pub mod providers_azure_openai_responses {}

#[doc = include_str!("../../docs/providers/bedrock-converse-stream.md")]
pub mod providers_bedrock_converse_stream {}

#[doc = include_str!("../../docs/providers/google-vertex.md")]
pub mod providers_google_vertex {}

#[doc = include_str!("../../docs/providers/mistral-conversations.md")]
pub mod providers_mistral_conversations {}

#[doc = include_str!("../../docs/providers/openai-codex-responses.md")]
pub mod providers_openai_codex_responses {}

#[doc = include_str!("../../docs/providers/pi-messages.md")]
pub mod providers_pi_messages {}

#[doc = include_str!("../../docs/providers/real-streams.md")]
pub mod providers_real_streams {}

#[doc = include_str!("../../docs/proxy.md")]
pub mod proxy {}

#[doc = include_str!("../../docs/reliability.md")]
pub mod reliability {}

#[doc = include_str!("../../docs/scale-out.md")]
pub mod scale_out {}

#[doc = include_str!("../../docs/sessions.md")]
pub mod sessions {}

#[doc = include_str!("../../docs/snapshot-testing.md")]
pub mod snapshot_testing {}

#[doc = include_str!("../../docs/tracing.md")]
pub mod tracing {}
