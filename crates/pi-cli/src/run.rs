//! One-shot mode: build the agent, stream one prompt, report how it ended.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use pi_agent::{Agent, AgentOptions, RunHandle};
use pi_types::{AgentMessage, StopReason};

use crate::args::{ModelArgs, OutputMode};
use crate::demo::demo_tools;
use crate::error::CliError;
use crate::render::{stdout_colors, Renderer};
use crate::setup::Backend;

/// The system prompt when `--system` is not given.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are pi, a helpful assistant in a terminal. Answer briefly. Use the \
                                         tools when they help; call independent tools in parallel.";

/// The line printed when the offline demo runs.
pub const DEMO_NOTICE: &str =
    "(offline demo on the faux provider: set an API key such as OPENAI_API_KEY, or pass --provider or --base-url)";

/// A renderer shared with the agent's listener.
pub type SharedRenderer = Arc<Mutex<Renderer>>;

/// Lock a shared renderer (a panic in another holder leaves it usable).
pub fn lock(renderer: &SharedRenderer) -> MutexGuard<'_, Renderer> {
    renderer.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An agent on the backend's model, with the demo tools on the offline demo (or with
/// `--demo-tools`: their weather is made up, so a real model gets them only when asked), retrying transient provider errors;
/// with `--session`, continuing (and recording) the saved conversation.
pub fn build_agent(backend: &Backend, args: &ModelArgs) -> Result<Agent, CliError> {
    let saved = args.session.as_deref().map(crate::session::open).transpose()?;
    // A saved conversation keeps its own system prompt unless `--system` names one.
    let fresh = saved.as_ref().is_none_or(|(_, saved)| saved.messages.is_empty());
    let system = args.system.clone().or_else(|| fresh.then(|| DEFAULT_SYSTEM_PROMPT.to_owned()));
    let mut options = AgentOptions::new(backend.stream_fn())
        .with_model(backend.model.clone())
        .with_thinking_level(args.thinking.unwrap_or_default())
        .with_tools(if backend.is_demo() || args.demo_tools { demo_tools()? } else { Vec::new() })
        .with_retry(crate::session::retry_policy(args.retries, backend));
    if let Some(system) = system {
        options = options.with_system_prompt(system);
    }
    match saved {
        Some((session, saved)) => {
            crate::session::resume(&session, args.session.as_deref().unwrap_or_default(), saved, options)
        }
        None => Ok(Agent::new(options)),
    }
}

/// Print events of `agent` with `renderer` for as long as the subscription lives (and, at
/// `-vvv`, each delta as a trace event).
pub fn attach(agent: &Agent, renderer: &SharedRenderer) -> pi_agent::Subscription {
    let renderer = Arc::clone(renderer);
    agent.subscribe_fn(move |event| {
        trace_delta(event);
        lock(&renderer).event(event)
    })
}

fn trace_delta(event: &pi_types::AgentEvent) {
    use pi_types::AssistantMessageEvent as Update;
    if !tracing::enabled!(target: crate::logging::DELTA_TARGET, tracing::Level::TRACE) {
        return;
    }
    if let pi_types::AgentEvent::MessageUpdate { assistant_message_event, .. } = event {
        let (kind, delta) = match assistant_message_event {
            Update::TextDelta { delta, .. } => ("text", delta),
            Update::ThinkingDelta { delta, .. } => ("thinking", delta),
            Update::ToolcallDelta { delta, .. } => ("toolcall", delta),
            _ => return,
        };
        tracing::trace!(target: crate::logging::DELTA_TARGET, kind, delta = delta.as_str(), "delta");
    }
}

/// How the last run ended, as the CLI reports it.
pub fn outcome(agent: &Agent, backend: &Backend) -> Result<(), CliError> {
    let messages = agent.messages();
    match messages.last() {
        Some(AgentMessage::Assistant(last)) if last.stop_reason == StopReason::Error => {
            let message = last.error_message.as_deref().unwrap_or("the request failed");
            Err(CliError::Run(backend.describe_failure(&agent.model(), message)))
        }
        Some(AgentMessage::Assistant(last)) if last.stop_reason == StopReason::Aborted => Err(CliError::Aborted),
        _ => Ok(()),
    }
}

/// Await a run; the first Ctrl-C aborts it (the run still reports its end).
pub async fn await_run(agent: &Agent, mut run: RunHandle) -> Result<(), CliError> {
    let result = tokio::select! {
        result = &mut run => result,
        _ = tokio::signal::ctrl_c() => {
            agent.abort();
            run.await
        }
    };
    result.map_err(|e| CliError::Run(e.to_string()))
}

/// `pi PROMPT`: stream one answer to stdout.
pub async fn one_shot(
    backend: &Backend,
    args: &ModelArgs,
    mode: OutputMode,
    prompt: String,
    out: Box<dyn Write + Send>,
) -> Result<(), CliError> {
    let agent = build_agent(backend, args)?;
    let mut mcp = crate::mcp::McpTools::start(&args.mcp, &agent)?;
    mcp.wait_ready().await?.iter().for_each(|line| eprintln!("pi: {line}"));
    mcp.sync(&agent);
    let spinner = mode == OutputMode::Pretty && std::io::stderr().is_terminal();
    let renderer = Arc::new(Mutex::new(Renderer::new(mode, out, stdout_colors()).with_spinner(spinner)));
    if backend.is_demo() && backend.proxy.is_none() {
        match mode {
            OutputMode::Pretty => lock(&renderer).notice(DEMO_NOTICE),
            // Keep stdout pure events; the notice goes to stderr.
            OutputMode::Events | OutputMode::Json => eprintln!("{DEMO_NOTICE}"),
        }
    }
    let _printer = attach(&agent, &renderer);
    let run = agent.prompt(prompt);
    await_run(&agent, run).await?;
    outcome(&agent, backend)
}
