//! `cargo xtask proxy-abuse [--release] [--streams N] [--slow N] [--idle N] [--big N]`: N paced
//! streams (default 500) through our proxy server over loopback while it is attacked: slow
//! bodies with a valid token (default 500, one byte a second, from 127.0.0.3), idle
//! connections that never send a byte (default 1000, from 127.0.0.2) and big bodies (default
//! 16 of just under the 8 MiB limit, about 170,000 messages each for a model the server does
//! not serve, from 127.0.0.4). Server limits are the defaults except the stream slots (sized
//! for the streams).
//!
//! Every legitimate stream must complete in order with its text. Prints the answers each
//! attack got, the largest gap between two events of any stream (p50 and max over streams),
//! and the process's resident set size (`VmRSS`; client and server together) before the
//! attacks, at its peak and after them (idle connections dropped, slow bodies answered, 2 s
//! later). Fails when a stream fails, the largest gap reaches 200 ms or the RSS after is over
//! twice the RSS before.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use pi_providers::faux::{faux_assistant_message, faux_text, FauxResponse};
use pi_proxy::server::Limits;
use pi_proxy::ProxyStreamFn;
use pi_types::{Message, Model, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::proxy_common::TOKEN;
use crate::proxy_load::{resident_kib, Checker};

struct Settings {
    streams: usize,
    slow: usize,
    idle: usize,
    big: usize,
}

fn parse(args: &[String]) -> Result<Settings, String> {
    let mut settings = Settings { streams: 500, slow: 500, idle: 1000, big: 16 };
    crate::proxy_common::parse_flags(args, "proxy-abuse", |flag, number| {
        match flag {
            "--streams" => settings.streams = number.max(1),
            "--slow" => settings.slow = number,
            "--idle" => settings.idle = number,
            "--big" => settings.big = number,
            other => return Err(format!("unknown option {other}")),
        }
        Ok(())
    })?;
    Ok(settings)
}

/// Characters of each stream's text: 2000 in 16-character deltas at 50 deltas a second, so a
/// stream runs about 2.5 s, while the attacks arrive.
const CHARS: usize = 2000;
const TOKENS_PER_SECOND: f64 = 50.0;
/// The largest gap allowed between two events of a stream (the deltas are 20 ms apart).
const MAX_GAP: Duration = Duration::from_millis(200);

/// A connection to `server` from the loopback address `from`.
async fn connect(from: [u8; 4], server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    socket.connect(server).await
}

/// The status code the server answered on `socket`, 0 when it closed without one.
async fn status_of(socket: &mut TcpStream) -> u16 {
    let mut answer = [0u8; 64];
    let n = socket.read(&mut answer).await.unwrap_or(0);
    let line = String::from_utf8_lossy(&answer[..n]);
    line.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

fn request_head(server: SocketAddr, length: usize) -> String {
    format!(
        "POST /api/stream HTTP/1.1\r\nhost: {server}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    )
}

/// A valid token, a whole head, then one byte a second: what the server answers.
async fn slow_body(server: SocketAddr) -> u16 {
    let Ok(mut socket) = connect([127, 0, 0, 3], server).await else { return 0 };
    if socket.write_all(request_head(server, 100_000).as_bytes()).await.is_err() {
        return 0;
    }
    let (mut read, mut write) = socket.split();
    let trickle = async {
        loop {
            if write.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        std::future::pending::<()>().await;
    };
    let mut answer = [0u8; 64];
    let n = tokio::select! {
        () = trickle => 0,
        n = read.read(&mut answer) => n.unwrap_or(0),
    };
    let line = String::from_utf8_lossy(&answer[..n]);
    line.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

/// A body of just under `max` bytes: small messages for a model the server does not serve.
fn big_body(model: &Model, max: usize) -> Vec<u8> {
    let unknown = Model { id: "not-served".into(), ..model.clone() };
    let message = r#"{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}"#;
    let head = serde_json::json!({"model": unknown, "options": {}}).to_string();
    let mut body = format!("{},\"context\":{{\"messages\":[{message}", &head[..head.len() - 1]).into_bytes();
    while body.len() + message.len() + 8 < max {
        body.push(b',');
        body.extend_from_slice(message.as_bytes());
    }
    body.extend_from_slice(b"]}}");
    body
}

async fn send_big(server: SocketAddr, body: Arc<Vec<u8>>) -> u16 {
    let Ok(mut socket) = connect([127, 0, 0, 4], server).await else { return 0 };
    let _ = socket.write_all(request_head(server, body.len()).as_bytes()).await;
    // The server may answer (503) before it read the whole body.
    let _ = socket.write_all(&body).await;
    status_of(&mut socket).await
}

/// One legitimate stream: its number of events and largest gap between two of them.
async fn legit(client: Arc<dyn StreamFn>, model: Model, id: usize, text: String) -> Result<Duration, String> {
    let context = TranscriptContext::from_messages(vec![Message::from(UserMessage::text(id.to_string()))]);
    let mut stream = client.stream(&model, context, StreamOptions::default());
    let mut checker = Checker::default();
    let (mut last, mut gap) = (None::<Instant>, Duration::ZERO);
    while let Some(event) = stream.next().await {
        let now = Instant::now();
        if let Some(last) = last {
            gap = gap.max(now - last);
        }
        last = Some(now);
        checker.see(&event);
    }
    checker.finish(&text).map(|_| gap).map_err(|e| format!("stream {id}: {e}"))
}

fn counts(statuses: &[u16]) -> String {
    let mut by_status = BTreeMap::new();
    for status in statuses {
        *by_status.entry(*status).or_insert(0usize) += 1;
    }
    let parts: Vec<String> = by_status
        .iter()
        .map(|(status, n)| if *status == 0 { format!("{n} closed") } else { format!("{n}× {status}") })
        .collect();
    parts.join(", ")
}

async fn abuse(settings: Settings) -> Result<String, String> {
    let faux = crate::proxy_common::faux("faux", 4, Some(TOKENS_PER_SECOND));
    let text: String = "The quick brown fox jumps over the lazy dog. ".chars().cycle().take(CHARS).collect();
    let message = faux_assistant_message(vec![faux_text(text.clone())], StopReason::Stop);
    let model = faux.model();
    let warmup = 8;
    faux.set_responses(std::iter::repeat_n(FauxResponse::Message(message), settings.streams + warmup));
    let limits = Limits {
        max_streams: settings.streams + warmup,
        max_streams_per_token: settings.streams + warmup,
        ..Limits::default()
    };
    let max_body = limits.max_body_bytes;
    let server = crate::proxy_common::start(&[&faux], limits).await?;
    let address: SocketAddr = server.url.trim_start_matches("http://").parse().map_err(|e| format!("url: {e}"))?;
    let client: Arc<dyn StreamFn> = Arc::new(ProxyStreamFn::new(&server.url, TOKEN));
    for id in 0..warmup {
        legit(Arc::clone(&client), model.clone(), id, text.clone()).await?;
    }
    let big = Arc::new(big_body(&model, max_body));
    let rss_before = resident_kib();

    let streams: Vec<_> = (0..settings.streams)
        .map(|id| tokio::spawn(legit(Arc::clone(&client), model.clone(), id, text.clone())))
        .collect();
    // The attacks arrive while the streams run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut idle = Vec::with_capacity(settings.idle);
    let mut idle_refused = 0;
    for _ in 0..settings.idle {
        match connect([127, 0, 0, 2], address).await {
            Ok(socket) => idle.push(socket),
            Err(_) => idle_refused += 1,
        }
    }
    let slow: Vec<_> = (0..settings.slow).map(|_| tokio::spawn(slow_body(address))).collect();
    let bigs: Vec<_> = (0..settings.big).map(|_| tokio::spawn(send_big(address, Arc::clone(&big)))).collect();
    let mut peak = resident_kib();
    let mut gaps = Vec::with_capacity(settings.streams);
    for stream in streams {
        gaps.push(stream.await.map_err(|e| format!("stream task: {e}"))??);
        peak = peak.max(resident_kib());
    }
    let mut big_statuses = Vec::new();
    for task in bigs {
        big_statuses.push(task.await.unwrap_or(0));
        peak = peak.max(resident_kib());
    }
    // How many idle connections the server had closed by the time the streams ended.
    let mut idle_closed = 0;
    for socket in &mut idle {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(1), socket.read(&mut byte)).await;
        idle_closed += usize::from(matches!(read, Ok(Ok(0) | Err(_))));
    }
    drop(idle);
    let mut slow_statuses = Vec::new();
    for task in slow {
        slow_statuses.push(task.await.unwrap_or(0));
    }
    drop(big);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = resident_kib();

    gaps.sort();
    let largest = gaps.last().copied().unwrap_or_default();
    let median = gaps.get(gaps.len() / 2).copied().unwrap_or_default();
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let report = format!(
        "proxy-abuse: {} streams completed in order; largest gap between events p50 {} ms, max {} ms; \
         {} slow bodies: {}; {} idle connections: {} refused on connect, {} closed by the server while the \
         streams ran; {} big bodies ({:.1} MiB): {}; RSS before {}, peak {}, after {} ({:.2}x before)",
        settings.streams,
        median.as_millis(),
        largest.as_millis(),
        settings.slow,
        counts(&slow_statuses),
        settings.idle,
        idle_refused,
        idle_closed,
        settings.big,
        max_body as f64 / (1024.0 * 1024.0),
        counts(&big_statuses),
        mib(rss_before),
        mib(peak),
        mib(rss_after),
        rss_after as f64 / rss_before.max(1) as f64,
    );
    if largest >= MAX_GAP {
        return Err(format!("{report}\nlargest gap {} ms: not under {} ms", largest.as_millis(), MAX_GAP.as_millis()));
    }
    if rss_after > 2 * rss_before {
        return Err(format!("{report}\nRSS after the attacks is over twice the RSS before"));
    }
    Ok(format!("{report}: ok"))
}

/// The command.
pub fn run(args: &[String]) -> Result<String, String> {
    let settings = parse(args)?;
    let runtime = crate::proxy_common::runtime()?;
    runtime.block_on(abuse(settings))
}
