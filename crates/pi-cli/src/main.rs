//! `pi`: the pi agent on the command line, a tool-using agent in the terminal.
//!
//! * `pi PROMPT` streams one answer from an [`pi_agent::Agent`] (on the offline demo, or with
//!   `--demo-tools`, with three demo tools: weather lookup, calculator, current time): text as it arrives, thinking dimmed, each
//!   tool call with its arguments and result, and a summary line (stop reason, turns, token
//!   usage). `--events` prints one line per agent event, `--json` every event as JSON.
//! * `pi models [--provider ID]` lists the built-in catalog ([`models`]); `pi login
//!   PROVIDER` / `pi logout PROVIDER` keep or remove a provider's credential, `pi auth` says
//!   which providers are usable and from where ([`login`]).
//! * `pi chat` is an interactive session with steering, follow-ups and aborts ([`chat`]).
//! * `pi proxy serve` runs the pi-proxy server ([`proxy`]); `--proxy URL --token T` makes
//!   the other commands stream through one.
//! * Without a configured provider both run the offline demo ([`demo`]): a faux provider
//!   whose script really calls the tools the prompt asks for.
//!
//! Model selection is in [`setup`], output in [`render`]. Every failure is a [`CliError`]:
//! one line on stderr and a non-zero exit code.

use std::io::Write;
use std::process::ExitCode;

/// mimalloc rather than the system allocator: `pi proxy serve` parses request bodies of up to
/// 8 MiB on blocking threads, and glibc's malloc kept what a burst of them freed in its
/// per-thread arenas (`cargo xtask proxy-abuse --release`: resident set 3.0× its starting size
/// after the attacks with glibc, 1.6× with mimalloc, and half the peak; docs/reliability.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod chat;
mod demo;
mod error;
mod logging;
mod login;
mod mcp;
mod models;
mod proxy;
mod render;
mod run;
mod session;
mod setup;

use error::CliError;

use args::{parse, Cli, Command, Parsed, ProxyCommand};

/// Run a parsed command line.
async fn execute(cli: Cli) -> Result<(), CliError> {
    let mode = cli.output.mode();
    match cli.command {
        Some(Command::Chat) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi chat` takes no prompt; type it in the session".into()));
            }
            let backend = setup::resolve(&cli.model).await?;
            chat::chat(backend, &cli.model, mode).await
        }
        Some(Command::Models { kind, refresh }) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi models` takes no prompt".into()));
            }
            let json = mode == args::OutputMode::Json;
            let mut failure = None;
            let listing = match (cli.model.proxy.is_some(), kind.as_deref()) {
                (true, _) if refresh => {
                    return Err(CliError::Usage(
                        "`pi models --refresh` refreshes this machine's catalogs; it takes no --proxy".into(),
                    ))
                }
                (false, _) if refresh => {
                    let (listing, error) = models::refreshed_listing(cli.model.provider.as_deref(), json).await?;
                    failure = error;
                    listing
                }
                (true, Some(kind @ ("classifier" | "image"))) => {
                    return Err(CliError::Usage(format!(
                        "`pi models --type {kind}` lists the built-in catalog; it takes no --proxy"
                    )))
                }
                (false, Some(kind @ ("classifier" | "image"))) => {
                    models::typed_listing(kind, cli.model.provider.as_deref(), json)?
                }
                (true, _) => {
                    let (url, served) = setup::served_models(&cli.model).await?;
                    models::served_listing(&url, &served, cli.model.provider.as_deref(), json)?
                }
                (false, _) => models::listing(cli.model.provider.as_deref(), json)?,
            };
            let mut stdout = std::io::stdout();
            match stdout.write_all(listing.as_bytes()).and_then(|()| stdout.flush()) {
                // The reader has gone (`pi models | head -1`): output ends quietly, as Unix tools do.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                result => result.map_err(|e| CliError::Io(format!("cannot write the listing: {e}"))),
            }?;
            failure.map_or(Ok(()), Err)
        }
        Some(Command::Login { provider }) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi login` takes one PROVIDER".into()));
            }
            login::login(&provider, &mut std::io::stdout()).await
        }
        Some(Command::Sessions { store }) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi sessions` takes one STORE".into()));
            }
            let listing = session::list(&store).await?;
            std::io::Write::write_all(&mut std::io::stdout(), listing.as_bytes())
                .map_err(|e| CliError::Io(format!("cannot write the listing: {e}")))
        }
        Some(Command::Logout { provider }) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi logout` takes one PROVIDER".into()));
            }
            login::logout(&provider, &mut std::io::stdout()).await
        }
        Some(Command::Auth) => {
            if !cli.prompt.is_empty() {
                return Err(CliError::Usage("`pi auth` takes no prompt".into()));
            }
            login::status(&mut std::io::stdout())
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
            let backend = setup::resolve(&cli.model).await?;
            run::one_shot(&backend, &cli.model, mode, prompt, Box::new(std::io::stdout())).await
        }
    }
}

fn fail(error: &CliError) -> ExitCode {
    match error {
        CliError::UsageHelp(help) => eprint!("{help}"),
        _ => eprintln!("pi: {}", error.one_line()),
    }
    ExitCode::from(error.exit_code())
}

fn main() -> ExitCode {
    // args_os: arguments that are not UTF-8 are a usage error, not a panic.
    let cli = match parse(std::env::args_os()) {
        Ok(Parsed::Run(cli)) => cli,
        Ok(Parsed::Print(text)) => {
            let mut stdout = std::io::stdout();
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            return ExitCode::SUCCESS;
        }
        Err(error) => return fail(&error),
    };
    logging::init_for(&cli);
    // Idle blocking threads (the proxy server validates request bodies on them) end after half
    // a second instead of ten, and the allocator then returns what their heaps held.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_keep_alive(std::time::Duration::from_millis(500))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&CliError::Io(format!("cannot start the async runtime: {error}"))),
    };
    let result = runtime.block_on(execute(*cli));
    // Reader threads may still block on stdin: do not wait for them.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}
