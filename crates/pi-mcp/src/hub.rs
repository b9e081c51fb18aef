//! Many servers, one live tool set.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pi_types::AgentTool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
use crate::connection::ServerShared;
pub use crate::connection::ServerStatus;
use crate::server::{supervise, Publish};
use crate::tool::McpTool;

/// A server as `/tools` shows it.
#[derive(Clone, Debug)]
pub struct ServerInfo {
    /// Its name.
    pub name: String,
    /// Where it is (`stdio: CMD ARGS`, `http: URL`; no secrets).
    pub transport: String,
    /// Its state.
    pub status: ServerStatus,
    /// The names of its tools in the set, as the model sees them.
    pub tools: Vec<String>,
}

struct Slot {
    shared: Arc<ServerShared>,
    status: ServerStatus,
    tools: Vec<Arc<McpTool>>,
}

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    tasks: Vec<JoinHandle<()>>,
}

pub(crate) struct HubInner {
    state: Mutex<State>,
    /// Bumped when the tool set changes (tools added, removed or redeclared).
    tools_version: watch::Sender<u64>,
    /// Bumped on every change of any server's status or tools.
    status_version: watch::Sender<u64>,
}

impl HubInner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Publish for HubInner {
    /// A server's new tools and status (from its task).
    fn publish(&self, index: usize, tools: Vec<Arc<McpTool>>, status: ServerStatus) {
        let changed = {
            let mut state = self.lock();
            let Some(slot) = state.slots.get_mut(index) else { return };
            let same = slot.tools.len() == tools.len()
                && slot.tools.iter().zip(&tools).all(|(a, b)| a.spec().declaration == b.spec().declaration);
            slot.tools = tools;
            slot.status = status;
            !same
        };
        if changed {
            self.tools_version.send_modify(|v| *v = v.wrapping_add(1));
        }
        self.status_version.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// MCP servers as one live set of agent tools.
///
/// Each added server runs in a task on the current Tokio runtime: it connects, lists the tools,
/// lists them again on `notifications/tools/list_changed`, and reconnects when the connection
/// ends. [`tools`](Self::tools) is the set now; hand it to the agent between runs
/// (`agent.set_tools`) or between turns (a `prepare_next_turn` hook) whenever
/// [`tools_changed`](Self::tools_changed) says so, and the next request carries the change as a
/// system message with `toolsAdded`/`toolsRemoved`.
///
/// Dropping the hub (every clone) stops the tasks and closes the connections.
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<HubInner>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").field("servers", &self.servers()).finish()
    }
}

impl Default for McpHub {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for HubInner {
    fn drop(&mut self) {
        self.state.get_mut().unwrap_or_else(PoisonError::into_inner).tasks.iter().for_each(JoinHandle::abort);
    }
}

impl McpHub {
    /// A hub with no servers.
    pub fn new() -> Self {
        let inner = HubInner {
            state: Mutex::new(State::default()),
            tools_version: watch::Sender::new(0),
            status_version: watch::Sender::new(0),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Add a server and start connecting to it in the background (needs a Tokio runtime).
    pub fn add_server(&self, config: ServerConfig) {
        let shared = ServerShared::new(config);
        let mut state = self.inner.lock();
        let index = state.slots.len();
        state.slots.push(Slot { shared: Arc::clone(&shared), status: ServerStatus::Connecting, tools: Vec::new() });
        let inner: Arc<dyn Publish> = self.inner.clone();
        let hub = Arc::downgrade(&inner);
        let task = tokio::spawn(supervise(hub, index, shared));
        state.tasks.push(task);
    }

    /// Wait until no server is in its first connection attempt, at most `limit`; returns
    /// whether that happened in time (servers still connecting join the set later).
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        let mut changes = self.inner.status_version.subscribe();
        let settled = async {
            loop {
                if self.inner.lock().slots.iter().all(|s| s.status != ServerStatus::Connecting) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(limit, settled).await.is_ok()
    }

    /// The tools of every connected server, in the order the servers were added. A name that
    /// an earlier tool already has is left out (with a warning in the log): give one of the
    /// servers a prefix.
    pub fn tools(&self) -> Vec<Arc<dyn AgentTool>> {
        let state = self.inner.lock();
        let mut names = HashSet::new();
        let mut tools: Vec<Arc<dyn AgentTool>> = Vec::new();
        for tool in state.slots.iter().flat_map(|slot| &slot.tools) {
            if names.insert(tool.spec().name().to_owned()) {
                tools.push(Arc::clone(tool) as Arc<dyn AgentTool>);
            } else {
                tracing::warn!(
                    tool = tool.spec().name(),
                    server = tool.server_name(),
                    "duplicate MCP tool name left out"
                );
            }
        }
        tools
    }

    /// A counter that moves whenever [`tools`](Self::tools) changes.
    pub fn tools_version(&self) -> u64 {
        *self.inner.tools_version.borrow()
    }

    /// Wait until the tool set changes (after the version this receiver last saw).
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.inner.tools_version.subscribe()
    }

    /// The tool set if it changed since `*seen`, which is then updated: call it before each run
    /// or turn and hand what it returns to `set_tools`.
    pub fn tools_if_changed(&self, seen: &mut u64) -> Option<Vec<Arc<dyn AgentTool>>> {
        let version = self.tools_version();
        (version != *seen).then(|| {
            *seen = version;
            self.tools()
        })
    }

    /// Which server a tool the model sees comes from.
    pub fn server_of(&self, tool_name: &str) -> Option<String> {
        let state = self.inner.lock();
        let tool = state.slots.iter().flat_map(|s| &s.tools).find(|t| t.spec().name() == tool_name)?;
        Some(tool.server_name().to_owned())
    }

    /// Every server with its status and tools.
    pub fn servers(&self) -> Vec<ServerInfo> {
        let state = self.inner.lock();
        let info = |slot: &Slot| ServerInfo {
            name: slot.shared.config.name.clone(),
            transport: slot.shared.config.transport.to_string(),
            status: slot.status.clone(),
            tools: slot.tools.iter().map(|t| t.spec().name().to_owned()).collect(),
        };
        state.slots.iter().map(info).collect()
    }
}
