//! The `pi` command line: a tool-using agent in the terminal.
//!
//! * `pi PROMPT` streams one answer from an [`pi_agent::Agent`] that has three demo tools
//!   (weather lookup, calculator, current time): text as it arrives, thinking dimmed, each
//!   tool call with its arguments and result, and a summary line (stop reason, turns, token
//!   usage). `--events` prints one line per agent event, `--json` every event as JSON.
//! * `pi models [--provider ID]` lists the built-in catalog ([`models`]); `pi login
//!   openai-codex` signs in to a ChatGPT plan ([`login`]).
//! * `pi chat` is an interactive session with steering, follow-ups and aborts ([`chat`]).
//! * `pi proxy serve` runs the pi-proxy server ([`proxy`]); `--proxy URL --token T` makes
//!   the other commands stream through one.
//! * Without a configured provider both run the offline demo ([`demo`]): a faux provider
//!   whose script really calls the tools the prompt asks for.
//!
//! Model selection is in [`setup`], output in [`render`]. Every failure is a [`CliError`]:
//! one line on stderr and a non-zero exit code.
//!
//! ```
//! use pi_cli::args::{parse, Parsed};
//! let Ok(Parsed::Run(cli)) = parse(["pi", "--events", "What's", "the", "weather", "in", "Oslo?"]) else {
//!     panic!("expected a run");
//! };
//! assert_eq!(cli.prompt_text().as_deref(), Some("What's the weather in Oslo?"));
//! let calls = pi_cli::demo::plan("What's the weather in Shanghai and Beijing?");
//! assert_eq!(calls.len(), 2);
//! assert_eq!(calls[1].args["location"], "Beijing");
//! ```

pub mod args;
pub mod chat;
pub mod demo;
mod error;
pub mod login;
pub mod models;
pub mod proxy;
pub mod render;
pub mod run;
pub mod setup;

pub use error::CliError;

use args::{Cli, Command, ProxyCommand};

/// Run a parsed command line.
pub async fn execute(cli: Cli) -> Result<(), CliError> {
    let mode = cli.output.mode();
    match cli.command {
        Some(Command::Chat) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi chat` takes no prompt; type it in the session".into()));
            }
            let backend = setup::resolve(&cli.model)?;
            chat::chat(backend, &cli.model, mode).await
        }
        Some(Command::Models) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi models` takes no prompt".into()));
            }
            let listing = models::listing(cli.model.provider.as_deref(), mode == args::OutputMode::Json)?;
            std::io::Write::write_all(&mut std::io::stdout(), listing.as_bytes())
                .map_err(|e| CliError::Io(format!("cannot write the listing: {e}")))
        }
        Some(Command::Login { provider }) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi login` takes one PROVIDER".into()));
            }
            login::login(&provider, &mut std::io::stdout()).await
        }
        Some(Command::Proxy { command: ProxyCommand::Serve(serve) }) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi proxy serve` takes no prompt".into()));
            }
            proxy::serve(&serve).await
        }
        None => {
            let Some(prompt) = cli.prompt_text() else {
                return Err(CliError::Usage(
                    "a PROMPT is required (see `pi --help`; `pi chat` starts a session)".into(),
                ));
            };
            let backend = setup::resolve(&cli.model)?;
            run::one_shot(&backend, &cli.model, mode, prompt, Box::new(std::io::stdout())).await
        }
    }
}
