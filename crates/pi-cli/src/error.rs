//! The CLI's error type: every failure is one line for stderr plus an exit code.

/// A failure of the `pi` command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad command-line arguments (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// Bad command-line arguments, with the help text to print as is (exit code 2): `pi
    /// proxy` without its subcommand.
    #[error("{0}")]
    UsageHelp(String),
    /// The provider, model or key is not usable (exit code 1).
    #[error("{0}")]
    Setup(String),
    /// The run failed: the provider reported an error (exit code 1).
    #[error("{0}")]
    Run(String),
    /// The run was aborted by the user (exit code 130, as after SIGINT).
    #[error("aborted")]
    Aborted,
    /// Reading the terminal or writing output failed (exit code 1).
    #[error("{0}")]
    Io(String),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::UsageHelp(_) => 2,
            Self::Aborted => 130,
            Self::Setup(_) | Self::Run(_) | Self::Io(_) => 1,
        }
    }

    /// The error as one line: newlines of provider messages are folded into spaces.
    pub fn one_line(&self) -> String {
        self.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
    }
}
