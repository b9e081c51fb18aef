//! The streaming adapters, one folder per wire API and a folder per family of APIs that share
//! one (`openai`, `google`), with what they share: the adapters' helpers ([`request_options`],
//! the message transforms, the typed delta decodes).

#[cfg(feature = "http")]
pub mod anthropic;
#[cfg(feature = "bedrock")]
pub mod bedrock;
#[cfg(feature = "http")]
pub mod google;
#[cfg(feature = "http")]
pub mod mistral;
#[cfg(feature = "http")]
pub mod openai;
#[cfg(feature = "http")]
pub mod pi_messages;

// The thinking-level helpers the adapters share (crate-private ones are unused without them).
#[cfg(feature = "http")]
pub mod driver;
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) mod own_options;
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub mod request_options;
#[cfg(feature = "http")]
pub use own_options::with_own_options;
#[cfg(feature = "http")]
pub mod strict_tool_limits;
#[cfg(feature = "http")]
pub(crate) mod support;
#[cfg(feature = "http")]
pub(crate) mod transform;
#[cfg(feature = "http")]
pub(crate) mod typed;
