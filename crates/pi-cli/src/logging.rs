//! Trace output on stderr: the spans of pi-loop, pi-providers and pi-proxy (docs/tracing.md)
//! and `pi proxy serve`'s access log.
//!
//! `RUST_LOG` (an `EnvFilter` directive) wins when set. Otherwise `-v` shows the agent's
//! spans (`invoke_agent`, `chat`, `execute_tool`, the HTTP attempts) as each closes, with
//! their attributes and timings; `-vv` and `-vvv` add the debug and trace levels. Without
//! either, `pi` prints nothing and `pi proxy serve` prints its access log only.

use std::io::IsTerminal;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command, ProxyCommand};

/// The crates whose spans and events `-v` shows.
const CRATES: [&str; 5] = ["pi_loop", "pi_agent", "pi_providers", "pi_proxy", "pi_cli"];

/// The filter for `verbose` (the count of `-v`) when `RUST_LOG` is not set; `None`: no output.
fn default_filter(verbose: u8, serving: bool) -> Option<String> {
    let level = match verbose {
        0 if serving => return Some(format!("warn,{}=info", pi_proxy::server::ACCESS_TARGET)),
        0 => return None,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let crates: Vec<String> = CRATES.iter().map(|name| format!("{name}={level}")).collect();
    Some(format!("warn,{}", crates.join(",")))
}

/// Install the stderr subscriber `cli` asks for (`-v`, `pi proxy serve [--log-json]`).
pub fn init_for(cli: &Cli) {
    match &cli.command {
        Some(Command::Proxy { command: ProxyCommand::Serve(serve) }) => init(cli.output.verbose, true, serve.log_json),
        _ => init(cli.output.verbose, false, false),
    }
}

/// Install the stderr subscriber for this process (`serving`: `pi proxy serve`; `json`: one
/// JSON object per line). Does nothing when there is nothing to show.
fn init(verbose: u8, serving: bool, json: bool) {
    let filter = match std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty()) {
        Some(directives) => EnvFilter::new(directives),
        None => match default_filter(verbose, serving) {
            Some(directives) => EnvFilter::new(directives),
            None => return,
        },
    };
    // Spans print when they close (with their recorded attributes and busy/idle times).
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_span_events(FmtSpan::CLOSE);
    // Another subscriber already set (a test harness) keeps its place.
    let _ = if json {
        builder.json().with_span_list(false).flatten_event(true).try_init()
    } else {
        builder.with_ansi(std::io::stderr().is_terminal()).try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_unless_asked_and_the_access_log_when_serving() {
        assert_eq!(default_filter(0, false), None);
        assert_eq!(default_filter(0, true).as_deref(), Some("warn,pi_proxy::access=info"));
        let verbose = default_filter(1, false).unwrap_or_default();
        assert!(verbose.contains("pi_loop=info") && verbose.contains("pi_providers=info"), "{verbose}");
        assert!(default_filter(3, true).unwrap_or_default().contains("pi_proxy=trace"));
    }
}
