//! `cargo xtask proxy-load [--release] [--streams N] [--chars N] [--tokens-per-second R]`: N
//! concurrent streams (default 500) through our proxy server over loopback, each checked event
//! by event. (`cargo xtask` builds with `--release`; the flag only asserts it.)
//!
//! Client and server run in this process on one two-thread runtime; the faux provider answers
//! every request with the same text of `--chars` characters (default 2000) in 16-character
//! deltas, as fast as it can or at R tokens per second per stream. Each stream must yield
//! `start`, `text_start`, the deltas in order (their concatenation is the text), `text_end` and
//! `done` with the text. Prints throughput, the process's peak resident set size (`VmHWM`,
//! client and server together) and its growth per stream, and the latency each event gets:
//! the upstream's events are stamped as the proxy server takes them from the provider and again
//! as the client receives them, and the same streams are run once more straight from the
//! provider (no proxy, same stamps); the difference of the percentiles is what the proxy adds.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use pi_providers::faux::{faux_assistant_message, faux_text, FauxResponse};
use pi_proxy::server::Limits;
use pi_proxy::ProxyStreamFn;
use pi_types::{
    AssistantMessageEvent, AssistantMessageEventStream, Message, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext, UserMessage,
};

use crate::proxy_common::TOKEN;

struct Settings {
    streams: usize,
    chars: usize,
    tokens_per_second: Option<f64>,
}

fn parse(args: &[String]) -> Result<Settings, String> {
    let mut settings = Settings { streams: 500, chars: 2000, tokens_per_second: None };
    crate::proxy_common::parse_flags(args, "proxy-load", |flag, number| {
        match flag {
            "--streams" => settings.streams = number.max(1),
            "--chars" => settings.chars = number,
            "--tokens-per-second" => settings.tokens_per_second = Some(number as f64).filter(|r| *r > 0.0),
            other => return Err(format!("unknown option {other}")),
        }
        Ok(())
    })?;
    Ok(settings)
}

/// When each event of each stream left the provider (stamped by [`Stamped`]) and reached the
/// consumer; a stream is known by the number in its prompt.
#[derive(Default)]
struct Stamps {
    sent: Mutex<Vec<Vec<Instant>>>,
}

impl Stamps {
    fn new(streams: usize) -> Arc<Self> {
        Arc::new(Self { sent: Mutex::new(vec![Vec::new(); streams]) })
    }

    /// Per-event latencies in microseconds: received minus sent, event by event.
    fn latencies(&self, received: &[Vec<Instant>]) -> Vec<f64> {
        let sent = self.sent.lock().map(|s| s.clone()).unwrap_or_default();
        sent.iter()
            .zip(received)
            .flat_map(|(sent, received)| {
                sent.iter().zip(received).map(|(s, r)| r.saturating_duration_since(*s).as_secs_f64() * 1e6)
            })
            .collect()
    }
}

/// The provider with every event stamped as it is taken from it.
struct Stamped {
    inner: Arc<dyn StreamFn>,
    stamps: Arc<Stamps>,
}

impl StreamFn for Stamped {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let id = match context.messages().last() {
            Some(Message::User(user)) => user.content.text().parse::<usize>().unwrap_or(0),
            _ => 0,
        };
        let stamps = Arc::clone(&self.stamps);
        let events = self.inner.stream(model, context, options).map(move |event| {
            if let Ok(mut sent) = stamps.sent.lock() {
                if let Some(stream) = sent.get_mut(id) {
                    stream.push(Instant::now());
                }
            }
            event
        });
        AssistantMessageEventStream::new(events)
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(rank).copied().unwrap_or(0.0)
}

/// The 50th and 99th percentiles of `values`, in microseconds.
fn p50_p99(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    (percentile(&values, 0.5), percentile(&values, 0.99))
}

/// Run `streams` streams at once from `client`, each checked; the events received per stream,
/// and when each arrived.
async fn run_streams(
    client: Arc<dyn StreamFn>,
    model: &Model,
    streams: usize,
    text: &str,
) -> Result<(usize, Vec<Vec<Instant>>), String> {
    let tasks: Vec<_> = (0..streams)
        .map(|id| {
            let (client, model, text) = (Arc::clone(&client), model.clone(), text.to_owned());
            tokio::spawn(async move {
                let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text(id.to_string()))]);
                let mut stream = client.stream(&model, context, StreamOptions::default());
                let mut checker = Checker::default();
                let mut received = Vec::new();
                while let Some(event) = stream.next().await {
                    received.push(Instant::now());
                    checker.see(&event);
                }
                checker.finish(&text).map(|events| (events, received))
            })
        })
        .collect();
    let mut events = 0;
    let mut arrivals = Vec::with_capacity(streams);
    for (index, task) in tasks.into_iter().enumerate() {
        let (count, received) =
            task.await.map_err(|e| format!("stream {index}: {e}"))?.map_err(|e| format!("stream {index}: {e}"))?;
        events += count;
        arrivals.push(received);
    }
    Ok((events, arrivals))
}

/// Peak resident set size of this process in KiB (Linux `VmHWM`).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident set size of this process in KiB now (Linux `VmRSS`; 0 when unknown).
pub(crate) fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).unwrap_or(0)
}

/// Checks one stream as it runs, keeping no event (a consumer that kept every event would
/// make the client copy the growing message per delta and measure itself, not the proxy).
#[derive(Default)]
pub(crate) struct Checker {
    events: usize,
    names: Vec<&'static str>,
    streamed: String,
    final_text: Option<String>,
}

impl Checker {
    pub(crate) fn see(&mut self, event: &AssistantMessageEvent) {
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
    pub(crate) fn finish(self, text: &str) -> Result<usize, String> {
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
    let faux = crate::proxy_common::faux("faux", 4, settings.tokens_per_second);
    let text: String = "The quick brown fox jumps over the lazy dog. ".chars().cycle().take(settings.chars).collect();
    let message = faux_assistant_message(vec![faux_text(text.clone())], StopReason::Stop);
    let model = faux.model();

    // The same streams straight from the provider: the latency an event gets without the proxy.
    faux.set_responses(std::iter::repeat_n(FauxResponse::Message(message.clone()), settings.streams));
    let stamps = Stamps::new(settings.streams);
    let direct: Arc<dyn StreamFn> = Arc::new(Stamped { inner: Arc::new(faux.clone()), stamps: Arc::clone(&stamps) });
    let (_, arrivals) = run_streams(direct, &model, settings.streams, &text).await?;
    let (direct_p50, direct_p99) = p50_p99(stamps.latencies(&arrivals));

    faux.set_responses(std::iter::repeat_n(FauxResponse::Message(message), settings.streams));
    let limits = Limits {
        max_streams: settings.streams,
        max_streams_per_token: settings.streams,
        max_connections: settings.streams + 16,
        ..Limits::default()
    };
    let stamps = Stamps::new(settings.streams);
    let stamped = Stamped { inner: Arc::new(faux.clone()), stamps: Arc::clone(&stamps) };
    let server = crate::proxy_common::start_with(&faux, Arc::new(stamped), limits).await?;
    let client: Arc<dyn StreamFn> = Arc::new(ProxyStreamFn::new(&server.url, TOKEN));
    let rss_before = peak_rss_kib();
    let started = Instant::now();
    let (events, arrivals) = run_streams(client, &model, settings.streams, &text).await?;
    let seconds = started.elapsed().as_secs_f64();
    let (proxy_p50, proxy_p99) = p50_p99(stamps.latencies(&arrivals));
    let peak = peak_rss_kib();
    let mib =
        |kib: Option<u64>| kib.map_or_else(|| "unknown".to_owned(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0));
    let per_stream = peak.zip(rss_before).map_or_else(
        || "unknown".to_owned(),
        |(peak, before)| format!("{:.1} KiB", peak.saturating_sub(before) as f64 / settings.streams as f64),
    );
    let pacing =
        settings.tokens_per_second.map_or_else(|| "unpaced".to_owned(), |r| format!("{r} tokens/s per stream"));
    Ok(format!(
        "proxy-load: {} concurrent streams ({pacing}), {events} events in order in {seconds:.2} s: {:.0} events/s, \
         {:.0} streams/s, {:.3} MB/s of text; latency per event p50 {proxy_p50:.0} µs, p99 {proxy_p99:.0} µs \
         (straight from the provider: p50 {direct_p50:.0} µs, p99 {direct_p99:.0} µs; the proxy adds p50 {:.0} µs, \
         p99 {:.0} µs); peak RSS {} (before the streams {}), {per_stream} per stream: ok",
        settings.streams,
        events as f64 / seconds,
        settings.streams as f64 / seconds,
        (settings.streams * settings.chars) as f64 / seconds / 1e6,
        proxy_p50 - direct_p50,
        proxy_p99 - direct_p99,
        mib(peak),
        mib(rss_before),
    ))
}

/// The command.
pub fn run(args: &[String]) -> Result<String, String> {
    let settings = parse(args)?;
    let runtime = crate::proxy_common::runtime()?;
    runtime.block_on(load(settings))
}
