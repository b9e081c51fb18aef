//! The crate's one error type.

use std::time::Duration;

use rmcp::service::ServiceError;

/// What can go wrong connecting to an MCP server or calling one of its tools.
///
/// A tool call that fails returns one of these as its `Err`; the agent loop turns it into an
/// error result the model sees (`to_string()`), so every message names the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The `--mcp` specification or a [`crate::ServerConfig`] is not usable.
    #[error("invalid MCP server specification {spec:?}: {reason}")]
    InvalidSpec {
        /// The specification as given.
        spec: String,
        /// Why it is not usable.
        reason: String,
    },
    /// The server could not be started or reached, or did not complete the handshake.
    #[error("MCP server '{server}': could not connect: {reason}")]
    Connect {
        /// The server's name.
        server: String,
        /// The cause.
        reason: String,
    },
    /// A stdio server's process ended before the handshake; `reason` is its last stderr lines
    /// (joined with ` | `).
    #[error("MCP server '{server}' failed to start: {reason}")]
    Start {
        /// The server's name.
        server: String,
        /// The last lines the process wrote to stderr.
        reason: String,
    },
    /// A request (`initialize`, `tools/list`, `tools/call`) did not complete in time.
    #[error("MCP server '{server}': {what} did not complete within {limit:?}")]
    Timeout {
        /// The server's name.
        server: String,
        /// The request.
        what: String,
        /// The limit that ran out.
        limit: Duration,
    },
    /// The connection closed (the server exited or the stream ended) while a request was open.
    #[error("MCP server '{server}' closed the connection during {what}")]
    Closed {
        /// The server's name.
        server: String,
        /// The request that was open.
        what: String,
    },
    /// The server is not connected now (starting, reconnecting or given up).
    #[error("MCP server '{server}' is not connected")]
    NotConnected {
        /// The server's name.
        server: String,
    },
    /// The server answered with a JSON-RPC error or an unexpected response.
    #[error("MCP server '{server}': {what} failed: {reason}")]
    Request {
        /// The server's name.
        server: String,
        /// The request.
        what: String,
        /// The server's error text.
        reason: String,
    },
    /// The run was aborted while the call was open (`notifications/cancelled` was sent).
    #[error("MCP tool call '{tool}' on server '{server}' was cancelled")]
    Cancelled {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
    },
    /// The tool's arguments were not a JSON object.
    #[error("MCP tool '{tool}': arguments must be a JSON object")]
    Arguments {
        /// The tool's name on the server.
        tool: String,
    },
}

/// An rmcp request failure as this crate's error, naming the server and the request.
pub(crate) fn service_error(server: &str, what: &str, error: ServiceError) -> McpError {
    let (server, what) = (server.to_owned(), what.to_owned());
    match error {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::Closed { server, what },
        ServiceError::Timeout { timeout } => McpError::Timeout { server, what, limit: timeout },
        ServiceError::McpError(error) => McpError::Request { server, what, reason: error.message.to_string() },
        other => McpError::Request { server, what, reason: crate::server::readable(&other.to_string()) },
    }
}
