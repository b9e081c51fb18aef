//! Every session store, the same tests: file, SQLite and PostgreSQL (a real server at
//! `PI_TEST_POSTGRES_URL`; `.ci/run` starts one). Append, resume and reset; two workers racing
//! on one session; `kill -9` mid-append; 10,000 messages.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_agent::pi_loop::MessageList;
use pi_agent::{Agent, AgentError, AgentOptions, FileStore, Session, SessionStore, SessionWrite, UsageTotal};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
use pi_store::{PostgresStore, SqliteStore};
use pi_types::{AgentMessage, StopReason};

/// Makes [`store_child`] the process `kill_9_mid_append_keeps_the_last_complete_message` kills.
const CHILD: &str = "PI_STORE_TEST_CHILD";

#[derive(Clone, Copy, Debug)]
enum Kind {
    File,
    Sqlite,
    Postgres,
}

/// Where a test's sessions live: a scratch directory (file, SQLite) or the test server.
struct Place {
    kind: Kind,
    dir: PathBuf,
    postgres: Option<String>,
}

impl Place {
    /// The place for `test`, or `None` (with a message) when PostgreSQL is not configured
    /// outside CI. In CI (`CI=true`) a missing server fails the test.
    fn new(kind: Kind, test: &str) -> Option<Place> {
        let dir = std::env::temp_dir().join(format!("pi-store-{}-{test}-{kind:?}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let postgres = match kind {
            Kind::Postgres => match std::env::var("PI_TEST_POSTGRES_URL") {
                Ok(url) => Some(url),
                Err(_) if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
                    panic!("PI_TEST_POSTGRES_URL is not set: CI must start PostgreSQL (.ci/run)")
                }
                Err(_) => {
                    eprintln!("skipped: PI_TEST_POSTGRES_URL is not set (a PostgreSQL server; see .ci/run)");
                    return None;
                }
            },
            _ => None,
        };
        Some(Place { kind, dir, postgres })
    }

    /// A new connection to the place (each one a separate worker).
    async fn store(&self) -> Arc<dyn SessionStore> {
        match self.kind {
            Kind::File => Arc::new(FileStore::new(&self.dir)),
            Kind::Sqlite => Arc::new(SqliteStore::open(self.dir.join("sessions.sqlite")).await.unwrap()),
            Kind::Postgres => Arc::new(PostgresStore::connect(self.postgres.as_deref().unwrap()).await.unwrap()),
        }
    }

    /// A session id no other test run uses (PostgreSQL's database is shared).
    fn id(&self, name: &str) -> String {
        format!("{name}-{}-{}.jsonl", std::process::id(), pi_types::now_ms())
    }
}

/// A response (the faux provider estimates its token counts).
fn reply(text: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(text)], StopReason::Stop))
}

fn options(faux: &FauxProvider) -> AgentOptions {
    AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_system_prompt("Be brief.")
}

fn roles(messages: &[AgentMessage]) -> Vec<&str> {
    messages.iter().map(AgentMessage::role).collect()
}

fn last_text(messages: &[AgentMessage]) -> String {
    messages.last().and_then(AgentMessage::as_assistant).map(|a| a.text()).unwrap_or_default()
}

async fn append_resume_reset(kind: Kind) {
    let Some(place) = Place::new(kind, "resume") else { return };
    let id = place.id("chat");
    let faux = FauxProvider::default();
    faux.set_responses([reply("One."), reply("Two."), reply("Three.")]);

    let (session, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
    assert!(saved.messages.is_empty());
    let agent = saved.resume(options(&faux)).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    agent.prompt("First").await.unwrap();
    let first = agent.usage().total;
    assert!(first.usage.total_tokens > 0, "{first:?}");

    // Another worker resumes: the transcript and the lifetime totals.
    let (session, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
    assert_eq!(roles(&saved.messages), ["system", "user", "assistant"]);
    let agent = saved.resume(options(&faux)).unwrap();
    assert_eq!(agent.usage().total, first);
    let _recording = session.attach(&agent).await.unwrap();
    agent.prompt("Second").await.unwrap();
    agent.reset().unwrap();
    agent.prompt("Third").await.unwrap();
    assert!(session.error().is_none(), "{:?}", session.error());

    let (_, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
    assert_eq!(roles(&saved.messages), ["system", "user", "assistant"], "rewritten on reset");
    assert_eq!(last_text(&saved.messages), "Three.");
    assert_eq!(saved.usage.responses, 3, "lifetime totals survive a reset");
    assert_eq!(saved.usage, agent.usage().total);
    assert_eq!(saved.messages, agent.messages().to_vec());

    let store = place.store().await;
    let listed = store.list().await.unwrap();
    let line = listed.iter().find(|s| s.id == id).unwrap();
    assert_eq!((line.messages, line.cost), (3, saved.usage.usage.cost.total));
    store.delete(&id).await.unwrap();
    assert!(store.load(&id).await.unwrap().messages.is_empty());
    assert!(store.list().await.unwrap().iter().all(|s| s.id != id));
}

async fn two_workers_race(kind: Kind) {
    let Some(place) = Place::new(kind, "race") else { return };
    let id = place.id("race");
    let faux = FauxProvider::default();
    faux.set_responses([reply("Hello."), reply("A."), reply("B.")]);
    let (session, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
    let agent = saved.resume(options(&faux)).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    agent.prompt("Hi").await.unwrap();

    // Two workers resume the same session and take a message each, at once.
    let mut workers = Vec::new();
    for _ in 0..2 {
        let (session, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
        let agent = saved.resume(options(&faux)).unwrap();
        let recording = session.attach(&agent).await.unwrap();
        workers.push((session, agent, recording));
    }
    let (first, second) = (&workers[0].1, &workers[1].1);
    let (a, b) = tokio::join!(first.prompt("From worker A"), second.prompt("From worker B"));
    a.unwrap();
    b.unwrap();

    let conflicts: Vec<&(Session, Agent, _)> =
        workers.iter().filter(|(session, _, _)| session.error().is_some()).collect();
    assert_eq!(conflicts.len(), 1, "exactly one worker loses");
    let (loser_session, loser, _) = conflicts[0];
    assert!(
        matches!(loser_session.error(), Some(AgentError::SessionConflict { ref session }) if session.contains(&id)),
        "{:?}",
        loser_session.error()
    );
    // The loser's run stopped at its first write: its failure message names the conflict.
    let failure = loser.messages().last().and_then(|m| m.as_assistant().cloned()).unwrap();
    assert_eq!(failure.stop_reason, StopReason::Error);
    assert!(failure.error_message.as_deref().unwrap_or("").contains("changed by another writer"), "{failure:?}");
    let (_, winner, _) = workers.iter().find(|(session, _, _)| session.error().is_none()).unwrap();

    // Nothing lost, nothing interleaved: the store holds the winner's transcript.
    let (_, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
    assert_eq!(saved.messages, winner.messages().to_vec());
    assert_eq!(roles(&saved.messages), ["system", "user", "assistant", "user", "assistant"]);
    assert_eq!(saved.usage.responses, 2);
}

/// The messages of [`ten_thousand_messages`] and [`store_child`]: a user message each.
fn numbered(range: std::ops::Range<usize>, padding: usize) -> Vec<AgentMessage> {
    range.map(|n| AgentMessage::from(format!("message {n} {}", "x".repeat(padding)))).collect()
}

fn text_of(message: &AgentMessage) -> String {
    match message {
        AgentMessage::User(user) => user.content.text(),
        other => other.role().to_owned(),
    }
}

async fn append_all(store: &dyn SessionStore, id: &str, messages: &MessageList, batch: usize) -> u64 {
    let (mut version, mut prefix) = (0, MessageList::new());
    let usage = UsageTotal::default();
    for chunk in messages.to_vec().chunks(batch) {
        let from = prefix.len();
        chunk.iter().for_each(|message| prefix.push(message.clone()));
        version = store.append(id, SessionWrite { version, messages: &prefix, from, usage: &usage }).await.unwrap();
    }
    version
}

async fn ten_thousand_messages(kind: Kind) {
    let Some(place) = Place::new(kind, "10k") else { return };
    let id = place.id("long");
    let store = place.store().await;
    let messages: MessageList = numbered(0..10_000, 0).into_iter().collect();
    let version = append_all(&*store, &id, &messages, 1_000).await;

    let loaded = place.store().await.load(&id).await.unwrap();
    assert_eq!(loaded.version, version);
    assert_eq!(loaded.messages, messages.to_vec());
    // Resumed, one more message each way (append, then a rewrite of all 10,001).
    let (session, saved) = Session::load(place.store().await, id.clone()).await.unwrap();
    let faux = FauxProvider::default();
    faux.set_responses([reply("Done.")]);
    let agent = saved.resume(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model())).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    agent.continue_run().await.unwrap();
    agent.set_messages(agent.messages().iter().skip(1).cloned().collect::<Vec<_>>());
    agent.steer("again");
    faux.set_responses([reply("Again.")]);
    agent.continue_run().await.unwrap();
    assert!(session.error().is_none(), "{:?}", session.error());
    let loaded = place.store().await.load(&id).await.unwrap();
    assert_eq!(loaded.messages.len(), 10_002);
    assert_eq!(loaded.messages, agent.messages().to_vec());
}

/// The process `kill_9_mid_append_keeps_the_last_complete_message` kills: appends 64 KiB
/// messages one at a time until killed. A no-op in a normal test run.
#[test]
fn store_child() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let (kind, rest) = spec.split_once('|').unwrap();
    let (dir, rest) = rest.split_once('|').unwrap();
    let (id, postgres) = rest.split_once('|').unwrap();
    let kind = match kind {
        "File" => Kind::File,
        "Sqlite" => Kind::Sqlite,
        _ => Kind::Postgres,
    };
    let place = Place { kind, dir: dir.into(), postgres: Some(postgres.to_owned()).filter(|p| !p.is_empty()) };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store = place.store().await;
        let usage = UsageTotal::default();
        let mut messages = MessageList::new();
        let mut version = 0;
        for from in 0.. {
            messages.push(numbered(from..from + 1, 64 * 1024).remove(0));
            version =
                store.append(id, SessionWrite { version, messages: &messages, from, usage: &usage }).await.unwrap();
        }
    });
}

async fn kill_9_mid_append(kind: Kind) {
    let Some(place) = Place::new(kind, "kill9") else { return };
    let id = place.id("killed");
    let spec = format!("{kind:?}|{}|{id}|{}", place.dir.display(), place.postgres.clone().unwrap_or_default());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "store_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, spec)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let store = place.store().await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let saved = store.load(&id).await.unwrap().messages.len();
        if saved >= 20 {
            break;
        }
        assert!(Instant::now() < deadline, "the child saved {saved} messages");
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap(); // SIGKILL, mid-append (one is always in progress)
    child.wait().unwrap();

    let loaded = place.store().await.load(&id).await.unwrap();
    let count = loaded.messages.len();
    assert!(count >= 20);
    let texts: Vec<String> = loaded.messages.iter().map(text_of).collect();
    let expected: Vec<String> = numbered(0..count, 64 * 1024).iter().map(text_of).collect();
    assert!(texts == expected, "every message complete, in order ({count} messages)");
    // The session goes on from there.
    let messages: MessageList = numbered(0..count + 1, 0).into_iter().collect();
    let write =
        SessionWrite { version: loaded.version, messages: &messages, from: count, usage: &UsageTotal::default() };
    place.store().await.append(&id, write).await.unwrap();
    assert_eq!(place.store().await.load(&id).await.unwrap().messages.len(), count + 1);
}

macro_rules! every_store {
    ($($test:ident),*) => {
        mod file { $(#[tokio::test(flavor = "multi_thread")] async fn $test() { super::$test(super::Kind::File).await })* }
        mod sqlite { $(#[tokio::test(flavor = "multi_thread")] async fn $test() { super::$test(super::Kind::Sqlite).await })* }
        mod postgres { $(#[tokio::test(flavor = "multi_thread")] async fn $test() { super::$test(super::Kind::Postgres).await })* }
    };
}

every_store!(append_resume_reset, two_workers_race, ten_thousand_messages, kill_9_mid_append);
