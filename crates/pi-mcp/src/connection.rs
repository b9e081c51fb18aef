//! What a server's tools and its supervising task share: the server's configuration, its
//! current connection, and where it is in its life.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::{Peer, RoleClient};

use crate::config::ServerConfig;
use crate::handler::Handler;

/// A live connection: the peer to send requests on, the handler that routes what comes back.
#[derive(Clone)]
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) handler: Handler,
}

/// What a server's tools share: its configuration and its current connection.
pub(crate) struct ServerShared {
    pub(crate) config: ServerConfig,
    connection: Mutex<Option<Connection>>,
}

impl ServerShared {
    pub(crate) fn new(config: ServerConfig) -> Arc<Self> {
        Arc::new(Self { config, connection: Mutex::new(None) })
    }

    /// The current connection, if the server is connected.
    pub(crate) fn connection(&self) -> Option<Connection> {
        self.connection.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(crate) fn set_connection(&self, connection: Option<Connection>) {
        *self.connection.lock().unwrap_or_else(PoisonError::into_inner) = connection;
    }
}

/// Where a server is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerStatus {
    /// The first connection attempt is under way.
    Connecting,
    /// Connected; its tools are in the set.
    Ready {
        /// How many tools it lists.
        tools: usize,
    },
    /// The connection ended or failed; another attempt follows after a delay.
    Reconnecting {
        /// Consecutive failed attempts so far.
        attempt: u32,
        /// Why the last one ended.
        last_error: String,
    },
    /// Given up after `Limits::reconnect_attempts` consecutive failures.
    Failed(String),
}
