//! Trace output on stderr: the spans of pi-loop, pi-providers and pi-proxy (docs/tracing.md)
//! and `pi proxy serve`'s access log.
//!
//! `RUST_LOG` (an `EnvFilter` directive) wins when set. Otherwise each `-v` adds a layer:
//! * `-v`: the agent's spans (`invoke_agent`, `chat`, `execute_tool`) as each closes, with
//!   their attributes and timings, and the MCP servers' lifecycle (ready, failed, retrying);
//! * `-vv`: retry decisions (the agent's and the adapters'), each HTTP attempt (`POST` spans)
//!   and the MCP servers' stderr lines;
//! * `-vvv`: every text, thinking and tool-call delta as it arrives.
//!
//! Without either, `pi` prints nothing and `pi proxy serve` prints its access log only.

use std::io::IsTerminal;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command, ProxyCommand};

/// The target of the `-vvv` delta events.
pub const DELTA_TARGET: &str = "pi_cli::delta";

/// The filter for `verbose` (the count of `-v`) when `RUST_LOG` is not set; `None`: no output.
fn default_filter(verbose: u8, serving: bool) -> Option<String> {
    let directives = match verbose {
        0 if serving => return Some(format!("warn,{}=info", pi_proxy::server::ACCESS_TARGET)),
        0 => return None,
        1 => "warn,pi_loop=info,pi_agent=info,pi_mcp=info,pi_proxy=info,pi_cli=info",
        2 => "warn,pi_loop=info,pi_agent=debug,pi_mcp=debug,pi_proxy=debug,pi_providers=info,pi_cli=debug",
        _ => "warn,pi_loop=trace,pi_agent=trace,pi_mcp=trace,pi_proxy=trace,pi_providers=trace,pi_cli=trace",
    };
    Some(directives.to_owned())
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
        assert!(verbose.contains("pi_loop=info") && verbose.contains("pi_mcp=info"), "{verbose}");
        assert!(default_filter(2, false).unwrap_or_default().contains("pi_providers=info"));
        assert!(default_filter(3, true).unwrap_or_default().contains("pi_proxy=trace"));
    }
}
