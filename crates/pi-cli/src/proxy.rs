//! `pi proxy serve`: run the pi-proxy server (see `pi_proxy::server`) from the command line.
//!
//! Tokens and provider keys come from the environment (`PI_PROXY_TOKENS`, `PI_PROXY_TOKEN`,
//! `ANTHROPIC_API_KEY`, ...) or a configuration file (`--config`, else `$PI_PROXY_CONFIG`).
//! One line on stdout says where it listens; Ctrl-C or SIGTERM shut it down gracefully.

use std::io::Write;

use pi_providers::registry::has_env_credentials;
use pi_proxy::server::{serve as serve_proxy, ServerConfig};

use crate::args::ServeArgs;
use crate::error::CliError;
use crate::setup::demo_provider;

/// Resolves on Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Serve until Ctrl-C or SIGTERM.
pub async fn serve(args: &ServeArgs) -> Result<(), CliError> {
    let config = match &args.config {
        Some(path) => ServerConfig::load(Some(path)),
        None => ServerConfig::from_env(),
    }
    .map_err(|e| CliError::Setup(e.to_string()))?;
    if args.with_demo {
        config.models.set_provider(demo_provider());
    }
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| CliError::Setup(format!("cannot listen on {}: {e}", args.listen)))?;
    let address = listener.local_addr().map_err(|e| CliError::Io(format!("cannot read the bound address: {e}")))?;
    let providers: Vec<String> = config.models.providers().iter().map(|p| p.id().to_owned()).collect();
    // Only what can answer: a built-in provider without credentials here would fail every
    // request. Configured providers (and the demo) carry their own key source.
    let (usable, keyless): (Vec<String>, Vec<String>) = providers
        .into_iter()
        .partition(|id| !pi_providers::catalog::catalog().contains_key(id.as_str()) || has_env_credentials(id));
    let tokens = config.tokens.len();
    {
        let mut stdout = std::io::stdout();
        let listed = if usable.is_empty() { "none".to_owned() } else { usable.join(", ") };
        let _ = writeln!(
            stdout,
            "pi proxy listening on http://{address} ({tokens} token{}; providers with keys: {listed}; {} more \
             without keys)",
            if tokens == 1 { "" } else { "s" },
            keyless.len()
        );
        let _ = stdout.flush();
    }
    serve_proxy(config, listener, shutdown_signal()).await.map_err(|e| CliError::Setup(e.to_string()))
}
