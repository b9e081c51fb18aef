//! `pi login PROVIDER`, `pi logout PROVIDER` and `pi auth`: the credentials in the auth file
//! (`$PI_AUTH_FILE`, else `~/.pi/agent/auth.json`, owner-only), through
//! [`pi_providers::auth::Authenticator`].
//!
//! `login` runs the provider's sign-in or asks for its API key; Ctrl-C cancels. Sign-ins
//! ([`pi_providers::auth::builtin_flows`]): a browser page with a loopback callback or a pasted
//! code (anthropic, openrouter, openai for Sign in with ChatGPT, openai-codex, radius), or a
//! device code to enter on any machine (github-copilot, kimi-coding, meta, xai, and
//! openai-codex or radius when chosen). `auth` lists every catalog provider with where its
//! credential comes from.

use std::io::{BufRead, Write};
use std::sync::Arc;

use futures::future::BoxFuture;
use pi_providers::auth::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, Authenticator, FileCredentialStore};
use pi_providers::registry::has_env_credentials;

use crate::error::CliError;

/// The terminal's side of a sign-in: questions and notices on stdout, answers from stdin.
struct Terminal;

fn read_line() -> BoxFuture<'static, Result<String, AuthError>> {
    Box::pin(async {
        let line = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map(|n| (n, line))
        })
        .await
        .map_err(|e| AuthError::Login(e.to_string()))?
        .map_err(|e| AuthError::Login(format!("cannot read the terminal: {e}")))?;
        match line {
            (0, _) => Err(AuthError::Login("Login cancelled".into())),
            (_, line) => Ok(line.trim().to_owned()),
        }
    })
}

fn say(text: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

impl AuthInteraction for Terminal {
    fn prompt<'a>(&'a self, prompt: AuthPrompt) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            match prompt {
                AuthPrompt::Select { message, options } => {
                    say(&message);
                    for (n, (_, label)) in options.iter().enumerate() {
                        say(&format!("  {}. {label}", n.saturating_add(1)));
                    }
                    let answer = read_line().await?;
                    let chosen = match answer.parse::<usize>() {
                        Ok(n) => n.checked_sub(1).and_then(|i| options.get(i)).map(|(id, _)| id.clone()),
                        Err(_) if answer.is_empty() => options.first().map(|(id, _)| id.clone()),
                        Err(_) => Some(answer),
                    };
                    chosen.ok_or_else(|| AuthError::Login("no such choice".into()))
                }
                AuthPrompt::Text { message, placeholder } | AuthPrompt::ManualCode { message, placeholder } => {
                    match placeholder {
                        Some(example) => say(&format!("{message} (e.g. {example})")),
                        None => say(&message),
                    }
                    read_line().await
                }
                AuthPrompt::Secret { message } => {
                    say(&format!("{message}:"));
                    read_line().await
                }
            }
        })
    }

    fn notify(&self, event: AuthEvent) {
        match event {
            AuthEvent::Info(text) | AuthEvent::Progress(text) => say(&text),
            AuthEvent::AuthUrl { url, instructions } => {
                say(&format!("Open this page in a browser:\n{url}"));
                if let Some(instructions) = instructions {
                    say(&instructions);
                }
            }
            AuthEvent::DeviceCode { user_code, verification_uri, .. } => {
                say(&format!("Open {verification_uri} in a browser and enter the code {user_code}"));
                say("Waiting for the sign-in (Ctrl-C cancels)...");
            }
        }
    }
}

/// The credentials of the auth file with every built-in sign-in, and the file's path: what
/// `login`, `logout`, `auth` and the run path ([`crate::setup`]) use.
pub(crate) fn authenticator() -> (Arc<Authenticator>, String) {
    let store = FileCredentialStore::default_location();
    let path = store.path().display().to_string();
    (Arc::new(Authenticator::with_builtin_flows(Arc::new(store))), path)
}

fn known(provider: &str) -> Result<(), CliError> {
    if pi_providers::catalog::provider_ids().contains(&provider) {
        return Ok(());
    }
    Err(CliError::Usage(format!("unknown provider `{provider}` (`pi models` lists them)")))
}

/// Sign in to `provider`, writing the outcome to `out`.
pub async fn login(provider: &str, out: &mut dyn Write) -> Result<(), CliError> {
    known(provider)?;
    let (auth, path) = authenticator();
    let credential = tokio::select! {
        result = auth.login(provider, &Terminal) => result.map_err(|e| CliError::Setup(e.to_string()))?,
        _ = tokio::signal::ctrl_c() => return Err(CliError::Aborted),
    };
    let what = match credential {
        pi_providers::auth::Credential::OAuth(_) => "Signed in to",
        pi_providers::auth::Credential::ApiKey(_) => "Stored the API key of",
    };
    writeln!(out, "{what} {provider}; saved in {path}").map_err(|e| CliError::Io(e.to_string()))
}

/// Remove the stored credential of `provider`.
pub async fn logout(provider: &str, out: &mut dyn Write) -> Result<(), CliError> {
    known(provider)?;
    let (auth, path) = authenticator();
    let stored = auth.store().read(provider).map_err(|e| CliError::Setup(e.to_string()))?.is_some();
    auth.logout(provider).await.map_err(|e| CliError::Setup(e.to_string()))?;
    let text = if stored {
        format!("Removed the credential of {provider} from {path}")
    } else {
        format!("No credential of {provider} in {path}")
    };
    writeln!(out, "{text}").map_err(|e| CliError::Io(e.to_string()))
}

/// One line per catalog provider: whether it is usable and from where.
pub fn status(out: &mut dyn Write) -> Result<(), CliError> {
    let (auth, path) = authenticator();
    let mut text = format!("Credentials: {path}\n");
    for provider in pi_providers::catalog::provider_ids() {
        let source = match auth.check_auth(provider).map_err(|e| CliError::Setup(e.to_string()))? {
            Some(check) if check.source == "OAuth" => "stored sign-in (OAuth)".to_owned(),
            Some(check) if check.source == "stored credential" => "stored API key".to_owned(),
            Some(check) => format!("environment ({})", check.source),
            None if has_env_credentials(provider) => "environment".to_owned(),
            None => "none".to_owned(),
        };
        text.push_str(&format!("{provider:<28} {source}\n"));
    }
    out.write_all(text.as_bytes()).map_err(|e| CliError::Io(e.to_string()))
}
