//! MCP servers as pi agent tools, on the official Rust MCP SDK ([`rmcp`]).
//!
//! An [`McpHub`] connects to servers over stdio (a child process), streamable HTTP, or any
//! byte stream, and exposes each server tool as an [`AgentTool`](pi_types::AgentTool): its
//! name (with an optional per-server prefix), description and `inputSchema` as parameters. A
//! call is `tools/call`: text and image content become the result's content, `isError` an
//! error result, progress notifications tool updates, the run's cancellation
//! `notifications/cancelled`; a server that dies mid-call gives an error result, and every wait
//! is bounded ([`Limits`]).
//!
//! The set is live: a server that becomes ready, reconnects or sends
//! `notifications/tools/list_changed` changes [`McpHub::tools`]; handing the new set to the
//! agent (`set_tools`) makes the next request carry the change as a system message with
//! `toolsAdded`/`toolsRemoved`. docs/mcp.md has the details and limits.
//!
//! ```
//! use std::time::Duration;
//! use pi_mcp::{McpHub, ServerConfig, ServerStatus};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let hub = McpHub::new();
//! // `pi --mcp 'CMD ARGS'` parses the same form; this command does not exist.
//! let mut config = ServerConfig::parse("files=pi-mcp-no-such-server --root /tmp").unwrap();
//! config.limits.reconnect_attempts = 0;
//! hub.add_server(config.with_prefix("fs_"));
//! hub.wait_ready(Duration::from_secs(5)).await;
//! let servers = hub.servers();
//! assert_eq!(servers[0].name, "files");
//! assert!(matches!(servers[0].status, ServerStatus::Failed(_)));
//! // With a real server, `hub.tools()` goes to `agent.set_tools(...)`.
//! assert!(hub.tools().is_empty());
//! # });
//! ```

mod config;
mod connection;
mod error;
mod handler;
mod hub;
mod server;
mod tool;

pub use config::{ByteStream, Connector, Limits, ServerConfig, ServerTransport};
pub use error::McpError;
pub use hub::{McpHub, ServerInfo, ServerStatus};
/// The MCP SDK this crate is built on (for in-process servers and custom transports).
pub use rmcp;
pub use tool::McpTool;
