//! Command-line arguments (clap derive): the one-shot prompt, `pi chat`, and the model and
//! output options they share.

use std::ffi::OsString;

use clap::{Args, Parser, Subcommand};
use pi_types::ThinkingLevel;

use crate::error::CliError;

const EXAMPLES: &str = "\
Examples:
  pi \"What's the weather in Shanghai and Beijing?\"      # offline demo without a provider
  pi --events \"What is 12 * (3 + 4)?\"                   # every agent event, one per line
  pi --json \"What time is it in Tokyo?\" | jq .type      # one JSON event per line
  pi --provider anthropic \"Hello\"                       # key from ANTHROPIC_API_KEY
  PI_API_KEY=none pi --base-url http://localhost:11434/v1 --model qwen3 \"Hi\"  # Ollama
  pi chat                                               # interactive session
  pi proxy serve --listen 127.0.0.1:8787                # a proxy holding this environment's keys
  pi --proxy http://127.0.0.1:8787 --token T --model claude-haiku-4-5 \"Hi\"
  pi -- help me with the weather in Oslo                # a prompt that starts with a command word
  pi -- chat                                            # the prompt \"chat\"

Commands and prompts: a first word naming a command (chat, models, sessions, login, logout, auth, proxy,
help) is
that command (`pi chat`, `pi help chat`, `pi login openai-codex`, `pi proxy serve`); when the
words after it do not fit it (`pi models anthropic`), pi stops with a one-line error that
suggests the right form, and sends nothing to a model. Words after `--` are always the prompt.

Exit codes: 0 success, 1 the run or its setup failed (missing key, provider error), 2 bad
arguments (unknown option, provider, model or API), 130 aborted.";

/// `pi`: a tool-using agent on the command line.
///
/// Streams the answer to PROMPT. Without a provider configured it runs an offline demo on
/// the faux provider, with three demo tools (weather lookup, calculator, current time); with
/// an API key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...) it
/// talks to that provider (the demo tools only with --demo-tools).
#[derive(Debug, Parser)]
#[command(name = "pi", version, after_help = EXAMPLES)]
#[command(propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// What to do (default: answer PROMPT).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Model options.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output options.
    #[command(flatten)]
    pub output: OutputArgs,
    /// The prompt (several words are joined with spaces).
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Interactive session: history, steering while the agent works, /followup, /abort,
    /// /reset, /model, /tools (/help lists them).
    Chat,
    /// List the built-in models (all providers, or --provider ID): provider/model id, API,
    /// context window, output limit, price per million input/output tokens, and whether the
    /// provider's credentials are set. With --json: the catalog as JSON. --type classifier or
    /// --type image lists the classifier or image-generation catalog instead.
    Models {
        /// Which catalog: chat (the default), classifier or image.
        #[arg(long = "type", value_name = "TYPE", value_parser = ["chat", "classifier", "image"])]
        kind: Option<String>,
        /// Fetch the live catalogs (Radius' gateway) with the stored credentials first, keep
        /// them in $PI_MODELS_STORE or ~/.pi/agent/models-store.json, and list those providers'
        /// models of every type.
        #[arg(long)]
        refresh: bool,
    },
    /// Sign in to a provider and keep its credential in $PI_AUTH_FILE or ~/.pi/agent/auth.json
    /// (owner-only): anthropic (Claude Pro/Max), openrouter and openai-codex (a ChatGPT plan)
    /// sign in with a browser or a device code; other providers ask for their API key.
    Login {
        /// The provider to sign in to.
        #[arg(value_name = "PROVIDER")]
        provider: String,
    },
    /// List the sessions of STORE (a directory's *.jsonl files, sqlite:PATH or
    /// postgres://...; default: the current directory): id, last update, messages, cost.
    Sessions {
        /// Where the sessions are.
        #[arg(value_name = "STORE", default_value = ".")]
        store: String,
    },
    /// Remove the stored credential of a provider.
    Logout {
        /// The provider to sign out of.
        #[arg(value_name = "PROVIDER")]
        provider: String,
    },
    /// Which providers are usable and from where: a stored sign-in or key, the environment,
    /// or none.
    Auth,
    /// The pi proxy: a server that keeps the provider keys.
    Proxy {
        /// What to do.
        #[command(subcommand)]
        command: ProxyCommand,
    },
}

/// The command line read as a prompt only (no subcommands): used when the first word names
/// a command but the rest does not fit it (see [`parse`]).
#[derive(Debug, Parser)]
#[command(name = "pi")]
struct PromptLine {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[arg(value_name = "PROMPT")]
    prompt: Vec<String>,
}

/// The names of the subcommands, `help` included.
fn is_command_name(word: &str) -> bool {
    use clap::CommandFactory;
    word == "help" || Cli::command().get_subcommands().any(|c| c.get_name() == word)
}

/// `pi proxy` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProxyCommand {
    /// Serve POST /api/stream: bearer tokens from PI_PROXY_TOKENS / PI_PROXY_TOKEN (or the
    /// config file), provider keys from the usual variables; runs until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
}

/// `pi proxy serve` options.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    pub listen: String,
    /// JSON configuration file (tokens, providers, custom providers, limits); default
    /// $PI_PROXY_CONFIG if set.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Also serve the offline demo model faux/faux-1 (for trying a deployment without keys).
    #[arg(long)]
    pub with_demo: bool,
    /// Log each request (and anything -v adds) as a JSON line on stderr instead of text.
    #[arg(long)]
    pub log_json: bool,
}

/// Which provider and model to use.
#[derive(Clone, Default, Args)]
pub struct ModelArgs {
    /// Provider id from the registry (anthropic, openai, google, groq, ...), or `faux` for the
    /// offline demo.
    #[arg(long, global = true, value_name = "ID")]
    pub provider: Option<String>,
    /// Model id (e.g. claude-sonnet-4-5, gpt-4.1-mini); its provider is found in the registry.
    #[arg(long, global = true, value_name = "ID")]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible (or other) server, e.g. http://localhost:8000/v1.
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// Adapter for the server: openai-completions (default with --base-url),
    /// openai-responses, anthropic-messages, google-generative-ai, google-vertex,
    /// bedrock-converse-stream, azure-openai-responses, mistral-conversations,
    /// openai-codex-responses, pi-messages.
    #[arg(long, global = true, value_name = "API")]
    pub api: Option<String>,
    /// Reasoning effort: off, minimal, low, medium, high, xhigh, max.
    #[arg(long, global = true, value_name = "LEVEL", value_parser = parse_thinking)]
    pub thinking: Option<ThinkingLevel>,
    /// System prompt.
    #[arg(long, global = true, value_name = "TEXT")]
    pub system: Option<String>,
    /// Stream through a pi proxy at URL (it holds the provider keys; name the model).
    #[arg(long, global = true, value_name = "URL")]
    pub proxy: Option<String>,
    /// Bearer token for --proxy (default: $PI_PROXY_TOKEN).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Keep the conversation in URL and resume it when it exists: a FILE (one JSON message
    /// per line), sqlite:PATH#ID or postgres://USER@HOST:PORT/DB#ID (session ID, default
    /// `default`).
    #[arg(long, global = true, value_name = "URL")]
    pub session: Option<String>,
    /// Retry a response that fails with a transient provider error (rate limit, overload, 5xx,
    /// dropped connection) up to N times, waiting 2 s, 4 s, 8 s, ...; 0 disables.
    #[arg(long, global = true, value_name = "N", default_value_t = 3)]
    pub retries: u32,
    /// Send requests through the proxy that HTTPS_PROXY, HTTP_PROXY or ALL_PROXY names, except
    /// to hosts in NO_PROXY; without this flag those variables are ignored, so that keys go only
    /// where pi was told to send them.
    #[arg(long, global = true)]
    pub env_proxy: bool,
    /// Offer the demo tools (made-up weather, calculator, clock) to a real model too; the
    /// offline demo always has them.
    #[arg(long, global = true)]
    pub demo_tools: bool,
    /// MCP servers (`--mcp`, see [`crate::mcp`]).
    #[command(flatten)]
    pub mcp: crate::mcp::McpArgs,
}

impl std::fmt::Debug for ModelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelArgs")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api", &self.api)
            .field("thinking", &self.thinking)
            .field("system", &self.system.as_ref().map(String::len))
            .field("proxy", &self.proxy)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("env_proxy", &self.env_proxy)
            .field("demo_tools", &self.demo_tools)
            .finish()
    }
}

/// How to print a run.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct OutputArgs {
    /// Print one line per agent event (agent_start, turn_start, message_update, ...), deltas inline.
    #[arg(long, global = true, conflicts_with = "json")]
    pub events: bool,
    /// Print every agent event as one JSON line.
    #[arg(long, global = true)]
    pub json: bool,
    /// Trace spans and events on stderr (-v: the agent's spans; -vv, -vvv: more); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The output style selected by [`OutputArgs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// Streamed answer with tool calls and a summary line.
    Pretty,
    /// One line per event.
    Events,
    /// One JSON object per event.
    Json,
}

impl OutputArgs {
    /// The selected mode.
    pub fn mode(&self) -> OutputMode {
        if self.json {
            OutputMode::Json
        } else if self.events {
            OutputMode::Events
        } else {
            OutputMode::Pretty
        }
    }
}

fn parse_thinking(text: &str) -> Result<ThinkingLevel, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| "expected one of off, minimal, low, medium, high, xhigh, max".to_owned())
}

/// What parsing the command line produced.
#[derive(Debug)]
pub enum Parsed {
    /// Run this.
    Run(Box<Cli>),
    /// Print this on stdout and exit 0 (help, version).
    Print(String),
}

/// Parse arguments (program name first), never panicking, also on non-UTF-8 input.
///
/// A first word naming a command is that command; when the words after it do not parse as
/// its arguments (`pi models anthropic`, `pi chat about cats`) that is a usage error
/// suggesting the right form or `--` for a prompt. Help and version become [`Parsed::Print`]; a
/// command that needs a subcommand and has none (`pi proxy`) is [`CliError::UsageHelp`] with
/// its help; every other problem is a one-line [`CliError::Usage`].
pub fn parse<I, T>(args: I) -> Result<Parsed, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let as_prompt = || match PromptLine::try_parse_from(&args) {
        Ok(line) => Some(Cli { command: None, model: line.model, output: line.output, prompt: line.prompt }),
        Err(_) => None,
    };
    let error = match Cli::try_parse_from(&args) {
        Ok(cli) if cli.command.is_none() || cli.prompt.is_empty() => return Ok(Parsed::Run(Box::new(cli))),
        // Words before a command word (`pi what is chat`): the command is not the first word.
        Ok(cli) => return Ok(Parsed::Run(Box::new(as_prompt().unwrap_or(cli)))),
        Err(error) => error,
    };
    match error.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
            return Ok(Parsed::Print(error.render().to_string()))
        }
        _ => {}
    }
    if let Some(cli) = as_prompt().filter(|cli| cli.prompt.len() > 1 && is_command_name(&cli.prompt[0])) {
        return Err(CliError::Usage(misfit_line(&cli.prompt)));
    }
    match error.kind() {
        clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Err(CliError::UsageHelp(error.render().to_string()))
        }
        _ => Err(CliError::Usage(usage_line(&error))),
    }
}

/// The error for a command word followed by words that do not fit the command (`words[0]`
/// is the command): the form that was probably meant, and `--` for a prompt. Sending such a
/// line to a model as a prompt would spend tokens on a typo.
fn misfit_line(words: &[String]) -> String {
    let (command, rest) = (&words[0], &words[1..]);
    let hint = match (command.as_str(), rest) {
        ("models", [provider]) => format!("did you mean `pi models --provider {provider}`?"),
        _ => format!("see `pi {command} --help`."),
    };
    format!(
        "`pi {command}` does not take `{}`: {hint} For a prompt that starts with `{command}`, put `--` first: `pi -- {}`",
        rest.join(" "),
        words.join(" ")
    )
}

/// clap's error as one line: its first paragraph (the message and what it lists, such as
/// the missing arguments) without the `error: ` prefix, plus a pointer to `--help`.
fn usage_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let paragraph: Vec<&str> =
        rendered.lines().map(str::trim).skip_while(|l| l.is_empty()).take_while(|l| !l.is_empty()).collect();
    let text = paragraph.join(" ");
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let text = if text.is_empty() { "invalid arguments" } else { text };
    format!("{text} (see `pi --help`)")
}

impl Cli {
    /// The one-shot prompt, if any words were given.
    pub fn prompt_text(&self) -> Option<String> {
        let text = self.prompt.join(" ");
        (!text.trim().is_empty()).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Cli {
        match parse(std::iter::once("pi").chain(args.iter().copied())) {
            Ok(Parsed::Run(cli)) => *cli,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn prompt_words_and_global_flags() {
        let cli = run(&["--model", "gpt-4o", "hello", "there"]);
        assert_eq!(cli.prompt_text().as_deref(), Some("hello there"));
        assert_eq!(cli.model.model.as_deref(), Some("gpt-4o"));
        let chat = run(&["chat", "--thinking", "high", "--events"]);
        assert!(matches!(chat.command, Some(Command::Chat)));
        assert_eq!(chat.model.thinking, Some(ThinkingLevel::High));
        assert_eq!(chat.output.mode(), OutputMode::Events);
    }

    #[test]
    fn a_command_word_followed_by_words_that_do_not_fit_is_an_error() {
        for args in [
            &["help", "me", "with", "the", "weather"][..],
            &["chat", "about", "cats"],
            &["--model", "gpt-4o", "proxy", "serve", "me", "tea"],
            &["login", "to", "my", "account"],
            &["models", "anthropic"],
        ] {
            let parsed = parse(std::iter::once("pi").chain(args.iter().copied()));
            assert!(
                matches!(parsed, Err(CliError::Usage(ref line)) if line.contains("put `--` first")),
                "{args:?}: {parsed:?}"
            );
        }
        for (args, prompt) in [(&["what", "is", "chat"][..], "what is chat"), (&["--", "models"], "models")] {
            let cli = run(args);
            assert!(cli.command.is_none(), "{args:?}: {cli:?}");
            assert_eq!(cli.prompt_text().as_deref(), Some(prompt), "{args:?}");
        }
        assert!(matches!(run(&["chat"]).command, Some(Command::Chat)));
        assert!(matches!(run(&["models", "--json"]).command, Some(Command::Models { kind: None, .. })));
        assert!(
            matches!(run(&["models", "--type", "image"]).command, Some(Command::Models { kind: Some(ref k), .. }) if k == "image")
        );
        assert!(matches!(run(&["login", "openai-codex"]).command, Some(Command::Login { .. })));
        assert!(matches!(run(&["logout", "anthropic"]).command, Some(Command::Logout { .. })));
        assert!(matches!(run(&["auth"]).command, Some(Command::Auth)));
        assert!(matches!(run(&["proxy", "serve"]).command, Some(Command::Proxy { .. })));
        let parsed = parse(["pi", "proxy"]);
        assert!(matches!(parsed, Err(CliError::UsageHelp(ref help)) if help.contains("Usage: pi proxy")), "{parsed:?}");
        // An error inside a command's own arguments stays that command's error.
        let parsed = parse(["pi", "proxy", "serve", "--listen"]);
        assert!(matches!(parsed, Err(CliError::Usage(ref line)) if line.contains("--listen")), "{parsed:?}");
    }

    #[test]
    fn the_proxy_token_is_not_in_debug_output() {
        let cli = run(&["--proxy", "http://127.0.0.1:1", "--token", "secret-token-123", "hi"]);
        let text = format!("{cli:?}");
        assert!(!text.contains("secret-token-123") && text.contains("<redacted>"), "{text}");
    }

    #[test]
    fn help_is_printed_not_an_error() {
        for args in [&["--help"][..], &["help"], &["help", "chat"], &["chat", "--help"]] {
            let parsed = parse(std::iter::once("pi").chain(args.iter().copied()));
            assert!(matches!(parsed, Ok(Parsed::Print(ref text)) if text.contains("Usage:")), "{args:?}: {parsed:?}");
        }
    }

    #[test]
    fn bad_arguments_are_one_line() {
        for args in [&["--thinking", "huge", "x"][..], &["--model"], &["--nope"], &["--json", "--events", "x"]] {
            match parse(std::iter::once("pi").chain(args.iter().copied())) {
                Err(CliError::Usage(line)) => {
                    assert!(!line.contains('\n') && line.ends_with("(see `pi --help`)"), "{line}")
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
