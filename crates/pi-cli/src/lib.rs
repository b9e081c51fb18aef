//! The `pi` command line: one prompt, streamed to the terminal, with tools.
//!
//! With an API key in the environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
//! `GEMINI_API_KEY`, ...) it talks to that provider; without one it runs on the built-in
//! faux provider, scripted to call the `word_count` tool and answer, so the command works
//! on a fresh machine.
//!
//! ```
//! let options = pi_cli::CliOptions::parse(["--provider", "faux", "Hello there"].map(String::from)).unwrap();
//! assert_eq!(options.prompt, "Hello there");
//! ```

use std::io::Write;
use std::sync::Arc;

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxRequest, FauxResponse};
use pi_providers::{env_api_key, Models, Provider};
use pi_types::{
    AgentEvent, AgentMessage, AgentToolResult, AssistantMessageEvent, FnTool, Message, Model, StopReason, StreamFn,
    ThinkingLevel, UserContent,
};

/// Providers tried, in order, when none is named, with their default model.
const DEFAULT_MODELS: [(&str, &str); 3] =
    [("anthropic", "claude-haiku-4-5"), ("openai", "gpt-4.1-mini"), ("google", "gemini-2.5-flash")];

/// Usage text.
pub const USAGE: &str = "usage: pi [--provider ID] [--model ID] [--system TEXT] [--thinking LEVEL] PROMPT...

Streams the answer to PROMPT. Providers: anthropic, openai, google, deepseek, groq, openrouter (API key from
the environment, e.g. ANTHROPIC_API_KEY) or faux (built-in, scripted; the default without a key).";

/// What the command line asked for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CliOptions {
    /// Provider id.
    pub provider: Option<String>,
    /// Model id.
    pub model: Option<String>,
    /// System prompt.
    pub system: Option<String>,
    /// Thinking level.
    pub thinking: ThinkingLevel,
    /// The prompt.
    pub prompt: String,
}

/// A command-line problem.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments.
    #[error("{0}\n\n{USAGE}")]
    Usage(String),
    /// Unknown provider or model.
    #[error("{0}")]
    Model(String),
    /// The run failed.
    #[error("{0}")]
    Run(String),
}

impl CliOptions {
    /// Parse the arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, CliError> {
        let mut options = CliOptions::default();
        let mut words = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| CliError::Usage(format!("{name} needs a value")));
            match arg.as_str() {
                "--provider" => options.provider = Some(value("--provider")?),
                "--model" => options.model = Some(value("--model")?),
                "--system" => options.system = Some(value("--system")?),
                "--thinking" => {
                    let level = value("--thinking")?;
                    options.thinking = serde_json::from_value(serde_json::Value::String(level.clone()))
                        .map_err(|_| CliError::Usage(format!("unknown thinking level `{level}`")))?;
                }
                "-h" | "--help" => return Err(CliError::Usage("help".into())),
                flag if flag.starts_with("--") => return Err(CliError::Usage(format!("unknown option `{flag}`"))),
                _ => words.push(arg),
            }
        }
        options.prompt = words.join(" ");
        if options.prompt.trim().is_empty() {
            return Err(CliError::Usage("a prompt is required".into()));
        }
        Ok(options)
    }
}

/// The faux provider's script: count the prompt's words with the tool, then answer.
fn faux_demo() -> FauxProvider {
    let faux = FauxProvider::default();
    let step: pi_providers::faux::FauxResponseFn = Arc::new(|request: FauxRequest| {
        let messages = request.context.messages();
        let reply = match messages.last() {
            Some(Message::ToolResult(result)) => {
                let count = match result.content.first() {
                    Some(UserContent::Text(t)) => t.text.clone(),
                    _ => "?".into(),
                };
                let text = format!(
                    "Your prompt has {count} words. (This answer comes from the built-in faux provider; set \
                     ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY to talk to a real model.)"
                );
                faux_assistant_message(vec![faux_text(text)], StopReason::Stop)
            }
            Some(Message::User(user)) => {
                let text = user.content.text();
                let args = serde_json::json!({ "text": text }).as_object().cloned().unwrap_or_default();
                let call = faux_tool_call("call_1", "word_count", args);
                faux_assistant_message(vec![faux_text("Let me count the words."), call], StopReason::ToolUse)
            }
            _ => faux_assistant_message(vec![faux_text("Nothing to do.")], StopReason::Stop),
        };
        Box::pin(std::future::ready(Ok(reply)))
    });
    // Enough steps for any run of this command: one per request.
    faux.set_responses((0..16).map(|_| FauxResponse::Build(Arc::clone(&step))));
    faux
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WordCountArgs {
    /// The text whose words to count.
    text: String,
}

fn word_count_tool() -> Result<FnTool, CliError> {
    FnTool::typed("word_count", "Count the words of a text", |args: WordCountArgs, _ctx| async move {
        Ok(AgentToolResult::text(args.text.split_whitespace().count().to_string()))
    })
    .map_err(|e| CliError::Model(e.to_string()))
}

/// Resolve the provider registry and model for the options.
pub fn resolve_model(options: &CliOptions) -> Result<(Arc<dyn StreamFn>, Model), CliError> {
    let provider = match &options.provider {
        Some(provider) => provider.clone(),
        None => DEFAULT_MODELS
            .iter()
            .find(|(provider, _)| env_api_key(provider).is_some())
            .map_or_else(|| "faux".to_owned(), |(provider, _)| (*provider).to_owned()),
    };
    if provider == "faux" {
        let faux = faux_demo();
        let model = faux.model();
        let models = Models::new();
        models.set_provider(Provider::new("faux").with_model(model.clone()).with_api("faux", Arc::new(faux)));
        return Ok((Arc::new(models), model));
    }
    let models = Models::with_builtins();
    if models.provider(&provider).is_none() {
        return Err(CliError::Model(format!("unknown provider `{provider}`")));
    }
    let id = options
        .model
        .clone()
        .or_else(|| DEFAULT_MODELS.iter().find(|(p, _)| *p == provider).map(|(_, m)| (*m).to_owned()));
    let Some(id) = id else {
        return Err(CliError::Model(format!("--model is required for provider `{provider}`")));
    };
    let model = models
        .get_model(&provider, &id)
        .ok_or_else(|| CliError::Model(format!("unknown model `{id}` for provider `{provider}`")))?;
    Ok((Arc::new(models), model))
}

/// Run one prompt, streaming text to `out` and tool activity to `log`.
pub async fn run(
    options: CliOptions,
    out: impl Write + Send + 'static,
    log: impl Write + Send + 'static,
) -> Result<(), CliError> {
    let (stream_fn, model) = resolve_model(&options)?;
    let mut agent_options = AgentOptions::new(stream_fn)
        .with_model(model)
        .with_thinking_level(options.thinking)
        .with_tool(word_count_tool()?);
    if let Some(system) = &options.system {
        agent_options = agent_options.with_system_prompt(system.clone());
    }
    let agent = Agent::new(agent_options);
    let out = std::sync::Mutex::new(out);
    let log = std::sync::Mutex::new(log);
    let _printer = agent.subscribe_fn(move |event| print_event(event, &out, &log));
    agent.prompt(options.prompt.as_str()).await.map_err(|e| CliError::Run(e.to_string()))?;
    let messages = agent.messages();
    match messages.last() {
        Some(AgentMessage::Assistant(last))
            if last.stop_reason == StopReason::Error || last.stop_reason == StopReason::Aborted =>
        {
            Err(CliError::Run(last.error_message.clone().unwrap_or_else(|| "the request failed".into())))
        }
        _ => Ok(()),
    }
}

fn print_event(event: &AgentEvent, out: &std::sync::Mutex<impl Write>, log: &std::sync::Mutex<impl Write>) {
    // Terminal output is best effort: a closed pipe must not fail the run.
    match event {
        AgentEvent::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. }, ..
        } => {
            if let Ok(mut out) = out.lock() {
                let _ = out.write_all(delta.as_bytes());
                let _ = out.flush();
            }
        }
        AgentEvent::MessageEnd { message: AgentMessage::Assistant(_) } => {
            if let Ok(mut out) = out.lock() {
                let _ = writeln!(out);
            }
        }
        AgentEvent::ToolExecutionStart { tool_name, args, .. } => {
            if let Ok(mut log) = log.lock() {
                let _ = writeln!(log, "[tool] {tool_name} {}", pi_types::json::stringify(args));
            }
        }
        AgentEvent::ToolExecutionEnd { tool_name, result, is_error, .. } => {
            let text = pi_types::content_text(&result.content, " ");
            let status = if *is_error { "failed" } else { "done" };
            if let Ok(mut log) = log.lock() {
                let _ = writeln!(log, "[tool] {tool_name} {status}: {text}");
            }
        }
        _ => {}
    }
}
