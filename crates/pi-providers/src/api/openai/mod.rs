//! OpenAI's wire APIs and the endpoints that speak them: Chat Completions, Responses, Azure
//! OpenAI (Responses, and its chat-completions models) and the ChatGPT Codex backend.

pub mod azure;
pub mod codex;
pub mod completions;
pub(crate) mod grammar;
pub mod responses;
