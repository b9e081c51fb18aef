//! How to reach a server, what to call its tools, and how long to wait for it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::error::McpError;

/// A byte stream that carries MCP's newline-delimited JSON-RPC (an in-process pipe, a socket).
pub trait ByteStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> ByteStream for T {}

/// Opens a new [`ByteStream`] to a server; called again for every reconnection.
pub type Connector = Arc<dyn Fn() -> BoxFuture<'static, std::io::Result<Box<dyn ByteStream>>> + Send + Sync>;

/// Where a server is.
#[derive(Clone)]
#[non_exhaustive]
pub enum ServerTransport {
    /// A child process speaking MCP on its stdin/stdout; its stderr goes to the log (debug), and
    /// its last lines are quoted when it fails to start.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables (values are never printed).
        env: Vec<(String, String)>,
    },
    /// A streamable-HTTP endpoint (`http://` or `https://`).
    Http {
        /// The endpoint URL.
        url: String,
        /// Sent as `Authorization: Bearer ...` when set (never printed).
        bearer_token: Option<String>,
    },
    /// Any byte stream, e.g. an in-process server over `tokio::io::duplex`.
    Stream(Connector),
}

impl fmt::Debug for ServerTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish(),
            Self::Http { url, bearer_token } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer_token", &bearer_token.as_ref().map(|_| "<redacted>"))
                .finish(),
            Self::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

impl fmt::Display for ServerTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio { command, args, .. } => {
                write!(f, "stdio: {command}")?;
                args.iter().try_for_each(|arg| write!(f, " {arg}"))
            }
            Self::Http { url, .. } => write!(f, "http: {url}"),
            Self::Stream(_) => f.write_str("stream"),
        }
    }
}

/// Upper bounds on every wait; the defaults suit interactive use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Starting the server and the `initialize` handshake (default 30 s).
    pub connect: Duration,
    /// One `tools/list` (all pages, default 30 s).
    pub list: Duration,
    /// Silence during a `tools/call`: each progress notification restarts it (default 120 s).
    pub call_idle: Duration,
    /// A whole `tools/call`, progress or not (default 10 min).
    pub call_total: Duration,
    /// Reconnections after the connection was lost or could not be made (default 5; then given up).
    pub reconnect_attempts: u32,
    /// Wait before the first reconnection, doubled after each failure up to 30 s (default 500 ms).
    pub reconnect_delay: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(30),
            list: Duration::from_secs(30),
            call_idle: Duration::from_secs(120),
            call_total: Duration::from_secs(600),
            reconnect_attempts: 5,
            reconnect_delay: Duration::from_millis(500),
        }
    }
}

/// One MCP server: its name, where it is, the prefix of its tool names and its limits.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Shown in `/tools`, errors and tool-result details.
    pub name: String,
    /// Where it is.
    pub transport: ServerTransport,
    /// Prepended to each tool name the model sees (`None`: the server's names as they are).
    pub prefix: Option<String>,
    /// Bounds on every wait.
    pub limits: Limits,
}

impl ServerConfig {
    /// A server with default limits and no prefix.
    pub fn new(name: impl Into<String>, transport: ServerTransport) -> Self {
        Self { name: name.into(), transport, prefix: None, limits: Limits::default() }
    }

    /// A child process `command args...`.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let transport = ServerTransport::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
        };
        Self::new(name, transport)
    }

    /// A streamable-HTTP endpoint.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(name, ServerTransport::Http { url: url.into(), bearer_token: None })
    }

    /// A server reached through `connector` (called again on every reconnection).
    pub fn stream<F>(name: impl Into<String>, connector: F) -> Self
    where
        F: Fn() -> BoxFuture<'static, std::io::Result<Box<dyn ByteStream>>> + Send + Sync + 'static,
    {
        Self::new(name, ServerTransport::Stream(Arc::new(connector)))
    }

    /// Prefix every tool name with `prefix` (e.g. `"fs_"`).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Replace the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Parse the CLI form `[NAME=]COMMAND ARGS...` (shell quoting) or `[NAME=]http(s)://URL`.
    ///
    /// Without `NAME=`, a URL is named by its host and a command by the file stem of its last
    /// word that is not an option (`npx -y @scope/server-x` is `server-x`).
    ///
    /// ```
    /// let config = pi_mcp::ServerConfig::parse("fs=npx -y 'my server'").unwrap();
    /// assert_eq!(config.name, "fs");
    /// assert_eq!(config.transport.to_string(), "stdio: npx -y my server");
    /// ```
    pub fn parse(spec: &str) -> Result<Self, McpError> {
        let invalid = |reason: &str| McpError::InvalidSpec { spec: spec.to_owned(), reason: reason.to_owned() };
        let trimmed = spec.trim();
        let (name, rest) = match trimmed.split_once('=') {
            Some((name, rest))
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                (Some(name.to_owned()), rest.trim())
            }
            _ => (None, trimmed),
        };
        if rest.starts_with("http://") || rest.starts_with("https://") {
            let url = reqwest::Url::parse(rest).map_err(|e| invalid(&e.to_string()))?;
            let name = name.unwrap_or_else(|| url.host_str().unwrap_or("http").to_owned());
            return Ok(Self::http(name, rest));
        }
        let words = shell_words::split(rest).map_err(|e| invalid(&e.to_string()))?;
        let Some((command, args)) = words.split_first() else { return Err(invalid("no command")) };
        let name = name.unwrap_or_else(|| {
            let word = words.iter().rev().find(|w| !w.starts_with('-')).unwrap_or(command);
            let stem = Path::new(word).file_stem().and_then(|s| s.to_str()).unwrap_or(word);
            stem.to_owned()
        });
        Ok(Self::stdio(name, command.clone(), args.iter().cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(spec: &str) -> (String, String) {
        let config = ServerConfig::parse(spec).expect("parses");
        (config.name, config.transport.to_string())
    }

    #[test]
    fn commands_urls_and_names() {
        assert_eq!(
            parsed("npx -y @modelcontextprotocol/server-everything"),
            ("server-everything".into(), "stdio: npx -y @modelcontextprotocol/server-everything".into())
        );
        assert_eq!(
            parsed("python3 ./srv/tools.py --verbose"),
            ("tools".into(), "stdio: python3 ./srv/tools.py --verbose".into())
        );
        assert_eq!(parsed("fs=node 'my dir/server.js'"), ("fs".into(), "stdio: node my dir/server.js".into()));
        assert_eq!(
            parsed("https://mcp.example.com/mcp"),
            ("mcp.example.com".into(), "http: https://mcp.example.com/mcp".into())
        );
        assert_eq!(parsed("web=http://127.0.0.1:9/mcp"), ("web".into(), "http: http://127.0.0.1:9/mcp".into()));
    }

    #[test]
    fn bad_specs_say_why() {
        let error = |spec: &str| ServerConfig::parse(spec).expect_err("rejected").to_string();
        assert_eq!(error(""), "invalid MCP server specification \"\": no command");
        assert_eq!(error("x=  "), "invalid MCP server specification \"x=  \": no command");
        assert!(error("node 'open").starts_with("invalid MCP server specification \"node 'open\": "));
        assert!(error("http://[::1").starts_with("invalid MCP server specification \"http://[::1\": "));
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let http = ServerTransport::Http { url: "https://h/mcp".into(), bearer_token: Some("s3cret-token".into()) };
        let stdio = ServerTransport::Stdio {
            command: "srv".into(),
            args: vec![],
            env: vec![("API_KEY".into(), "s3cret-key".into())],
        };
        for transport in [http, stdio] {
            let text = format!("{:?} {}", ServerConfig::new("x", transport.clone()), transport);
            assert!(!text.contains("s3cret"), "{text}");
        }
    }
}
