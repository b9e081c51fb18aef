//! Sign-ins and stored credentials: the ChatGPT (Codex) OAuth credentials and their
//! device-code login.

pub mod codex;
pub mod codex_login;
