//! `pi`: the pi agent on the command line (see the `pi_cli` crate docs).

use std::io::Write;
use std::process::ExitCode;

use pi_cli::args::{parse, Parsed};

fn fail(error: &pi_cli::CliError) -> ExitCode {
    eprintln!("pi: {}", error.one_line());
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
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&pi_cli::CliError::Io(format!("cannot start the async runtime: {error}"))),
    };
    let result = runtime.block_on(pi_cli::execute(*cli));
    // Reader threads may still block on stdin: do not wait for them.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}
