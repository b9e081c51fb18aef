//! `cargo xtask proxy-load [--streams N] [--chars N]`: N concurrent streams (default 500)
//! through our proxy server over loopback, each checked event by event.
//!
//! Client and server run in this process on one two-thread runtime; the faux provider answers
//! every request with the same text of `--chars` characters (default 2000) in 16-character
//! deltas. Each stream must yield `start`, `text_start`, the deltas in order (their
//! concatenation is the text), `text_end` and `done` with the text. Prints throughput and the
//! process's peak resident set size (`VmHWM`, client and server together).

use std::time::Instant;

use futures::StreamExt;
use pi_providers::faux::{faux_assistant_message, faux_text, FauxResponse};
use pi_proxy::server::Limits;
use pi_proxy::ProxyStreamFn;
use pi_types::{AssistantMessageEvent, Message, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage};

use crate::proxy_common::{start, TOKEN};

struct Settings {
    streams: usize,
    chars: usize,
}

fn parse(args: &[String]) -> Result<Settings, String> {
    let mut settings = Settings { streams: 500, chars: 2000 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: usize = value.parse().map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--streams" => settings.streams = number.max(1),
            "--chars" => settings.chars = number,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(settings)
}

/// Peak resident set size of this process in KiB (Linux `VmHWM`).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Checks one stream as it runs, keeping no event (a consumer that kept every event would
/// make the client copy the growing message per delta and measure itself, not the proxy).
#[derive(Default)]
struct Checker {
    events: usize,
    names: Vec<&'static str>,
    streamed: String,
    final_text: Option<String>,
}

impl Checker {
    fn see(&mut self, event: &AssistantMessageEvent) {
        self.events += 1;
        let name = event.type_name();
        if self.names.last() != Some(&name) {
            self.names.push(name);
        }
        if let AssistantMessageEvent::TextDelta { delta, .. } = event {
            self.streamed.push_str(delta);
        }
        if let Some(message) = event.final_message() {
            self.final_text = Some(message.text());
        }
    }

    /// The number of events, or what was wrong.
    fn finish(self, text: &str) -> Result<usize, String> {
        if self.names != ["start", "text_start", "text_delta", "text_end", "done"] {
            return Err(format!("unexpected event sequence: {:?}", self.names));
        }
        if self.streamed != text || self.final_text.as_deref() != Some(text) {
            return Err("the deltas or the final message differ from the scripted text".into());
        }
        Ok(self.events)
    }
}

async fn load(settings: Settings) -> Result<String, String> {
    let faux = crate::proxy_common::faux("faux", 4, None);
    let text: String = "The quick brown fox jumps over the lazy dog. ".chars().cycle().take(settings.chars).collect();
    let message = faux_assistant_message(vec![faux_text(text.clone())], StopReason::Stop);
    faux.set_responses(std::iter::repeat_n(FauxResponse::Message(message), settings.streams));
    let limits = Limits {
        max_streams: settings.streams,
        max_streams_per_token: settings.streams,
        max_connections: settings.streams + 16,
        ..Limits::default()
    };
    let server = start(&[&faux], limits).await?;
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let model = faux.model();
    let rss_before = peak_rss_kib();
    let started = Instant::now();
    let tasks: Vec<_> = (0..settings.streams)
        .map(|_| {
            let (client, model, text) = (client.clone(), model.clone(), text.clone());
            tokio::spawn(async move {
                let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text("go"))]);
                let mut stream = client.stream(&model, context, StreamOptions::default());
                let mut checker = Checker::default();
                while let Some(event) = stream.next().await {
                    checker.see(&event);
                }
                checker.finish(&text)
            })
        })
        .collect();
    let mut events = 0;
    for (index, task) in tasks.into_iter().enumerate() {
        events +=
            task.await.map_err(|e| format!("stream {index}: {e}"))?.map_err(|e| format!("stream {index}: {e}"))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let peak = peak_rss_kib().map_or_else(|| "unknown".to_owned(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0));
    let before = rss_before.map_or_else(|| "unknown".to_owned(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0));
    Ok(format!(
        "proxy-load: {} concurrent streams, {events} events in order in {seconds:.2} s: {:.0} events/s, {:.0} streams/s, \
         {:.3} MB/s of text; peak RSS {peak} (before the streams {before}): ok",
        settings.streams,
        events as f64 / seconds,
        settings.streams as f64 / seconds,
        (settings.streams * settings.chars) as f64 / seconds / 1e6,
    ))
}

/// The command.
pub fn run(args: &[String]) -> Result<String, String> {
    let settings = parse(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(load(settings))
}
