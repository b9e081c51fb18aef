//! Appends per second and resume latency of every session store (docs/scale-out.md).
//!
//! `cargo bench -p pi-rs-store --bench stores` (PostgreSQL at `PI_TEST_POSTGRES_URL`, else
//! left out). Appends: one message per write, as an agent appends them, alternating a user
//! message (~100 bytes of JSON text) and an assistant message (~600 bytes), each write with
//! the lifetime usage. Resume: `Session::load` of a 10,000-message transcript of the same
//! messages and `SavedSession::resume` into an agent, from a fresh connection each time;
//! p50 and p99 of the samples.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_agent::pi_loop::MessageList;
use pi_agent::{AgentOptions, FileStore, Session, SessionStore, SessionWrite, UsageTotal};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider};
use pi_store::{PostgresStore, SqliteStore};
use pi_types::{AgentMessage, StopReason};

const APPENDS: usize = 2_000;
const TRANSCRIPT: usize = 10_000;
const RESUMES: usize = 100;

fn message(n: usize) -> AgentMessage {
    match n % 2 {
        0 => AgentMessage::from(format!("Question {n}: what does the build log say about the failing test?")),
        _ => {
            let text = format!("Answer {n}: {}", "the test fails because the fixture is missing. ".repeat(10));
            faux_assistant_message(vec![faux_text(text)], StopReason::Stop).into()
        }
    }
}

#[derive(Clone)]
enum Place {
    File(std::path::PathBuf, bool),
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Place {
    async fn store(&self) -> Arc<dyn SessionStore> {
        match self {
            Place::File(dir, false) => Arc::new(FileStore::new(dir)),
            Place::File(dir, true) => Arc::new(FileStore::new(dir).durable()),
            Place::Sqlite(path) => Arc::new(SqliteStore::open(path).await.unwrap()),
            Place::Postgres(url) => Arc::new(PostgresStore::connect(url).await.unwrap()),
        }
    }
}

/// Appends per second: `APPENDS` writes of one message each.
async fn appends(place: &Place, id: &str) -> f64 {
    let store = place.store().await;
    let mut usage = UsageTotal::default();
    let mut messages = MessageList::new();
    let mut version = 0;
    let start = Instant::now();
    for n in 0..APPENDS {
        let next = message(n);
        if let Some(assistant) = next.as_assistant() {
            usage.add(&assistant.usage);
        }
        messages.push(next);
        let write = SessionWrite { version, messages: &messages, from: n, usage: &usage };
        version = store.append(id, write).await.unwrap();
    }
    APPENDS as f64 / start.elapsed().as_secs_f64()
}

/// Resume latencies (sorted) of a `TRANSCRIPT`-message session.
async fn resumes(place: &Place, id: &str) -> Vec<Duration> {
    let store = place.store().await;
    let messages: MessageList = (0..TRANSCRIPT).map(message).collect();
    let usage = UsageTotal::default();
    store.rewrite(id, SessionWrite { version: 0, messages: &messages, from: 0, usage: &usage }).await.unwrap();
    let faux = FauxProvider::default();
    let mut samples = Vec::with_capacity(RESUMES);
    for _ in 0..RESUMES {
        let store = place.store().await;
        let start = Instant::now();
        let (_session, saved) = Session::load(store, id).await.unwrap();
        let agent = saved.resume(AgentOptions::new(Arc::new(faux.clone()))).unwrap();
        samples.push(start.elapsed());
        assert_eq!(agent.messages().len(), TRANSCRIPT);
    }
    samples.sort();
    samples
}

fn percentile(samples: &[Duration], p: usize) -> f64 {
    let index = (samples.len() * p / 100).min(samples.len() - 1);
    samples[index].as_secs_f64() * 1000.0
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = std::env::temp_dir().join(format!("pi-store-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut places = vec![
        ("file", Place::File(dir.clone(), false)),
        ("file, durable (fsync)", Place::File(dir.clone(), true)),
        ("sqlite (WAL, synchronous=NORMAL)", Place::Sqlite(dir.join("bench.sqlite"))),
    ];
    match std::env::var("PI_TEST_POSTGRES_URL") {
        Ok(url) => places.push(("postgres (loopback)", Place::Postgres(url))),
        Err(_) => eprintln!("PostgreSQL left out: PI_TEST_POSTGRES_URL is not set"),
    }
    println!("| store | appends/s (1 message per write) | resume p50 (10,000 msgs) | resume p99 |");
    println!("|---|---:|---:|---:|");
    let run = pi_types::now_ms();
    for (index, (name, place)) in places.iter().enumerate() {
        let (rate, samples) = runtime.block_on(async {
            let rate = appends(place, &format!("appends-{run}-{index}.jsonl")).await;
            (rate, resumes(place, &format!("resume-{run}-{index}.jsonl")).await)
        });
        println!("| {name} | {rate:.0} | {:.1} ms | {:.1} ms |", percentile(&samples, 50), percentile(&samples, 99));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
