//! The client side of one connection: routes progress to the open calls, flags tool-list changes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::Notify;

/// Receives one call's progress notifications.
pub(crate) type ProgressFn = Arc<dyn Fn(ProgressNotificationParam) + Send + Sync>;

/// Progress that arrived before its call registered (the request is sent before its token is
/// known here); a few are kept so the first notifications of a fast tool are not lost.
const EARLY_PROGRESS: usize = 32;

#[derive(Default)]
struct Routes {
    calls: HashMap<ProgressToken, ProgressFn>,
    early: VecDeque<ProgressNotificationParam>,
}

/// Shared between the connection's [`ClientHandler`] and the tools that call through it.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    routes: Arc<Mutex<Routes>>,
    /// Set by `notifications/tools/list_changed`; the server's task lists the tools again.
    pub(crate) tools_changed: Arc<Notify>,
}

impl Handler {
    /// Route `token`'s progress to `on_progress` until the returned guard is dropped.
    pub(crate) fn register(&self, token: ProgressToken, on_progress: ProgressFn) -> ProgressRoute {
        let early: Vec<_> = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            routes.calls.insert(token.clone(), Arc::clone(&on_progress));
            let (mine, others): (Vec<_>, Vec<_>) = routes.early.drain(..).partition(|p| p.progress_token == token);
            routes.early = others.into();
            mine
        };
        early.into_iter().for_each(|p| on_progress(p));
        ProgressRoute { routes: Arc::clone(&self.routes), token }
    }
}

/// Unregisters a call's progress route when dropped.
pub(crate) struct ProgressRoute {
    routes: Arc<Mutex<Routes>>,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        let removed = self.routes.lock().unwrap_or_else(PoisonError::into_inner).calls.remove(&self.token);
        drop(removed);
    }
}

impl ClientHandler for Handler {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let route = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            match routes.calls.get(&params.progress_token) {
                Some(route) => Some(Arc::clone(route)),
                None => {
                    if routes.early.len() == EARLY_PROGRESS {
                        routes.early.pop_front();
                    }
                    routes.early.push_back(params.clone());
                    None
                }
            }
        };
        if let Some(route) = route {
            route(params);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    /// `pi` with this crate's version, and no client capabilities: servers do not ask for
    /// sampling, roots or elicitation.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("pi", env!("CARGO_PKG_VERSION")))
    }
}
