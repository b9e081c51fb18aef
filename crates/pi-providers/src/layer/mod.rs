//! The layers ([`pi_types::StreamLayer`]) the registry puts around a built-in provider's adapters.

pub(crate) mod azure_completions;
pub(crate) mod cloudflare;
pub(crate) mod opencode;
