//! `pi login PROVIDER`: signing in to a subscription provider. `openai-codex` (a ChatGPT plan)
//! signs in with a device code: `pi` prints where to go and the code to enter, waits until the
//! sign-in is granted (Ctrl-C cancels), and stores the tokens in the auth file
//! ([`pi_providers::codex_auth::default_auth_path`]), from which every later request reads and
//! refreshes them. Other providers take a key from their environment variables.

use std::io::Write;

use pi_providers::codex_auth::{default_auth_path, CodexTokenStore};
use pi_providers::codex_login::DeviceLogin;
use pi_types::CancellationToken;

use crate::error::CliError;

/// Sign in to `provider`, writing what the user must do to `out`.
pub async fn login(provider: &str, out: &mut dyn Write) -> Result<(), CliError> {
    if provider != "openai-codex" {
        return Err(CliError::Usage(format!(
            "`pi login` signs in to openai-codex (a ChatGPT plan); `{provider}` takes its key from its \
             environment variables (`pi models --provider {provider}` says whether one is set)"
        )));
    }
    let path = default_auth_path();
    let device = DeviceLogin::default();
    let code = device.start().await.map_err(CliError::Setup)?;
    let say = |out: &mut dyn Write, text: String| {
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    };
    say(out, format!("Open {} in a browser and enter the code {}", code.verification_uri, code.user_code));
    say(out, "Waiting for the sign-in (Ctrl-C cancels)...".to_owned());
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let credential = device.finish(&code, &cancel).await;
    interrupt.abort();
    let credential = credential.map_err(CliError::Setup)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::Io(format!("cannot create {}: {e}", dir.display())))?;
    }
    CodexTokenStore::new(&path).write(&credential).map_err(|e| CliError::Io(e.to_string()))?;
    say(out, format!("Signed in to openai-codex; tokens saved in {}", path.display()));
    Ok(())
}
