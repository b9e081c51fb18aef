//! `--mcp SERVER`: tools from MCP servers ([`pi_mcp`]) next to the built-in ones, handed to
//! the agent when the servers' tool sets changed (a server became ready, reconnected or sent
//! `list_changed`): before each run, and to a running agent at each turn boundary, so the
//! next request declares the change.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use pi_agent::pi_loop::{AgentContext, HookResult, TurnContext, TurnUpdate};
use pi_agent::{Agent, CancellationToken, SetHooks};
use pi_mcp::{McpHub, ServerConfig, ServerStatus};
use pi_types::AgentTool;

use crate::error::CliError;

/// The `--mcp` option (global: `pi --mcp ...` and `pi chat --mcp ...`).
#[derive(Clone, Debug, Default, Args)]
pub struct McpArgs {
    /// An MCP server whose tools the agent gets (repeatable): a command line run as a child
    /// speaking stdio, e.g. 'npx -y @modelcontextprotocol/server-everything', or a streamable
    /// HTTP URL; `NAME=` in front names it (default: the command's file name or URL's host).
    #[arg(long = "mcp", global = true, value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Stop with an error (exit 1) when an --mcp server is not ready at start-up, instead of
    /// going on without its tools.
    #[arg(long = "mcp-required", global = true, requires = "servers")]
    pub required: bool,
}

/// How long a one-shot prompt waits for the servers to start before it runs without them.
const ONE_SHOT_WAIT: Duration = Duration::from_secs(30);

/// The MCP servers of a session and the agent's built-in tools.
pub struct McpTools {
    hub: Option<McpHub>,
    required: bool,
    builtin: Vec<Arc<dyn AgentTool>>,
    seen: u64,
    /// Names (and servers) of the MCP tools last handed to the agent.
    current: Vec<(String, String)>,
    /// The hub's tool-set version a running agent last got (see [`turn_hook`]).
    turn_seen: Arc<AtomicU64>,
}

impl McpTools {
    /// Parse the `--mcp` servers and start connecting (in the background); the agent's tools
    /// now are the built-in ones.
    pub fn start(args: &McpArgs, agent: &Agent) -> Result<Self, CliError> {
        let builtin = agent.tools().to_vec();
        let mut this = Self {
            hub: None,
            required: args.required,
            builtin,
            seen: 0,
            current: Vec::new(),
            turn_seen: Arc::default(),
        };
        if args.servers.is_empty() {
            return Ok(this);
        }
        let hub = McpHub::new();
        for spec in &args.servers {
            let config = ServerConfig::parse(spec).map_err(|e| CliError::Usage(e.to_string()))?;
            hub.add_server(config);
        }
        this.turn_seen = Arc::new(AtomicU64::new(0));
        agent.update_options(|options| options.prepare_next_turn(turn_hook(&hub, &this.builtin, &this.turn_seen)));
        this.hub = Some(hub);
        Ok(this)
    }

    /// A line saying which servers are starting (before [`McpTools::wait_ready`]), if any.
    pub fn starting(&self) -> Option<String> {
        let hub = self.hub.as_ref()?;
        let names: Vec<String> = hub.servers().into_iter().map(|s| s.name).collect();
        Some(format!("(starting mcp server{} {}…)", if names.len() == 1 { "" } else { "s" }, names.join(", ")))
    }

    /// Wait (bounded) until every server has started or failed once; one line per server
    /// that is not ready. With `--mcp-required` a server that is not ready is an error (its
    /// line; the lines of the others are returned).
    pub async fn wait_ready(&self) -> Result<Vec<String>, CliError> {
        let Some(hub) = &self.hub else { return Ok(Vec::new()) };
        hub.wait_ready(ONE_SHOT_WAIT).await;
        let mut lines: Vec<String> = hub
            .servers()
            .into_iter()
            .filter(|s| !matches!(s.status, ServerStatus::Ready { .. }))
            .map(|s| not_ready_line(&s.name, &s.status, self.required))
            .collect();
        if self.required && !lines.is_empty() {
            let first = lines.remove(0);
            lines.iter().for_each(|line| eprintln!("pi: {line}"));
            return Err(CliError::Setup(first));
        }
        Ok(lines)
    }

    /// Hand the agent the built-in tools plus the servers' current tools if they changed
    /// since the last call; returns a line saying what changed.
    pub fn sync(&mut self, agent: &Agent) -> Option<String> {
        let hub = self.hub.as_ref()?;
        let mcp_tools = hub.tools_if_changed(&mut self.seen)?;
        let tools = merged(&self.builtin, mcp_tools);
        let named: Vec<(String, String)> = tools[self.builtin.len()..]
            .iter()
            .map(|t| (t.spec().name().to_owned(), hub.server_of(t.spec().name()).unwrap_or_default()))
            .collect();
        let added: Vec<&str> =
            named.iter().filter(|n| !self.current.contains(n)).map(|(name, _)| name.as_str()).collect();
        let removed: Vec<&str> =
            self.current.iter().filter(|n| !named.contains(n)).map(|(name, _)| name.as_str()).collect();
        let notice = change_line(&added, &removed);
        agent.set_tools(tools);
        self.turn_seen.store(self.seen, Ordering::Relaxed);
        self.current = named;
        notice
    }

    /// `/tools`: every tool with where it comes from (with `--mcp` only: without it every
    /// tool is built in), then the servers and their states.
    pub fn describe(&self, agent: &Agent) -> String {
        let source = |name: &str| match self.current.iter().find(|(tool, _)| tool == name) {
            Some((_, server)) => format!(" (mcp: {server})"),
            None if self.hub.is_some() => " (built-in)".to_owned(),
            None => String::new(),
        };
        let mut lines = vec!["tools:".to_owned()];
        for tool in agent.tools().iter() {
            let spec = tool.spec();
            lines.push(format!("  {}{}: {}", spec.name(), source(spec.name()), spec.declaration.description));
        }
        if let Some(hub) = &self.hub {
            lines.push("mcp servers:".to_owned());
            for server in hub.servers() {
                lines.push(format!("  {} ({}): {}", server.name, server.transport, status_text(&server.status)));
            }
        }
        lines.join("\n")
    }
}

/// The tools an agent gets: the built-in ones, then the servers' (a server tool named like a
/// built-in one is left out: the built-in one keeps its name).
fn merged(builtin: &[Arc<dyn AgentTool>], mcp_tools: Vec<Arc<dyn AgentTool>>) -> Vec<Arc<dyn AgentTool>> {
    let names: HashSet<&str> = builtin.iter().map(|t| t.spec().name()).collect();
    let mcp_tools = mcp_tools.into_iter().filter(|t| !names.contains(t.spec().name()));
    builtin.iter().cloned().chain(mcp_tools).collect()
}

/// The `prepare_next_turn` hook that hands a running agent the servers' tool-set changes at
/// each turn boundary, never inside a turn: when the set changed since the agent last got it,
/// the next request carries the new tools, and the loop records the difference as a system
/// message (`toolsAdded` / `toolsRemoved`) before it. Calls of the turn that just ended ran
/// with the turn's tools (a tool whose server went away answers with an error naming it).
/// Between runs [`McpTools::sync`] does the same and updates the agent's own tool list.
fn turn_hook(
    hub: &McpHub,
    builtin: &[Arc<dyn AgentTool>],
    turn_seen: &Arc<AtomicU64>,
) -> impl Fn(&TurnContext<'_>, CancellationToken) -> std::future::Ready<HookResult<Option<TurnUpdate>>> + Send + Sync + 'static
{
    let (hub, builtin, turn_seen) = (hub.clone(), builtin.to_vec(), Arc::clone(turn_seen));
    move |turn, _cancel| {
        let version = hub.tools_version();
        if turn_seen.swap(version, Ordering::Relaxed) == version {
            return std::future::ready(Ok(None));
        }
        let context = AgentContext { messages: turn.context.messages.clone(), tools: merged(&builtin, hub.tools()) };
        std::future::ready(Ok(Some(TurnUpdate { context: Some(context), ..TurnUpdate::default() })))
    }
}

fn status_text(status: &ServerStatus) -> String {
    match status {
        ServerStatus::Connecting => "connecting".into(),
        ServerStatus::Ready { tools } => format!("ready, {tools} tool{}", if *tools == 1 { "" } else { "s" }),
        ServerStatus::Reconnecting { attempt, last_error } => format!("reconnecting (attempt {attempt}): {last_error}"),
        ServerStatus::Failed(error) => format!("failed: {error}"),
        _ => format!("{status:?}"),
    }
}

/// Why a server is not ready after the start-up wait, in one line (its error names it); what
/// happens next unless it is `required`.
fn not_ready_line(name: &str, status: &ServerStatus, required: bool) -> String {
    let seconds = ONE_SHOT_WAIT.as_secs();
    match status {
        ServerStatus::Connecting if required => format!("mcp server {name} is not ready after {seconds} s"),
        ServerStatus::Connecting => {
            format!("mcp server {name} is still starting after {seconds} s; its tools join when it is ready")
        }
        ServerStatus::Reconnecting { last_error, .. } if required => last_error.clone(),
        ServerStatus::Reconnecting { last_error, .. } => format!("{last_error} (retrying in the background)"),
        ServerStatus::Failed(error) => error.clone(),
        other => format!("mcp server {name}: {}", status_text(other)),
    }
}

fn change_line(added: &[&str], removed: &[&str]) -> Option<String> {
    if added.is_empty() && removed.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = added.iter().map(|name| format!("+{name}")).collect();
    parts.extend(removed.iter().map(|name| format!("-{name}")));
    Some(format!("(mcp tools: {})", parts.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_lines_name_added_and_removed_tools() {
        assert_eq!(change_line(&["add"], &["echo"]).as_deref(), Some("(mcp tools: +add -echo)"));
        assert_eq!(change_line(&[], &[]), None);
    }

    #[test]
    fn a_bad_server_spec_is_a_usage_error() {
        let options = pi_agent::AgentOptions::new(Arc::new(pi_providers::faux::FauxProvider::default()));
        let agent = Agent::new(options);
        let args = McpArgs { servers: vec!["name=".into()], required: false };
        let error = McpTools::start(&args, &agent).err().expect("rejected");
        assert!(matches!(error, CliError::Usage(ref text) if text.contains("no command")), "{error:?}");
    }
}
