//! 500 concurrent streams through the server, a seeded third of them abandoned by their
//! client (dropped, or cancelled through the token) part-way: every completed stream has all
//! its events in order, and every abandoned one is cancelled at the upstream stream function.
//!
//! The upstream streams the first part of each answer, then waits at a gate the test opens
//! only once every abandoned stream was seen cancelled upstream: an abandoned stream cannot
//! finish by itself, so its upstream must be cancelled, and the completed ones must wait for
//! nothing but the gate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use pi_providers::Provider;
use pi_proxy::ProxyStreamFn;
use pi_types::CancellationToken;
use pi_types::{
    AssistantMessageEvent, AssistantMessageEventStream, Message, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext, UserMessage,
};
use tokio::sync::watch;

use crate::support::{config_with, Rng, TestServer, TOKEN};

const STREAMS: usize = 500;
const SEED: u64 = 0x10ad_0500;
/// Longest wait for any phase before the test calls it a hang.
const GUARD: Duration = Duration::from_secs(120);

/// What the upstream saw of one stream, once its cancellation token fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Cancelled after the terminal event was handed over (the server cancels on every end).
    Completed,
    /// Cancelled before the answer was complete.
    Cancelled,
}

/// Deltas before and after the gate, for stream `id`.
fn deltas(id: usize) -> (usize, usize) {
    (3 + id % 7, 2 + id % 5)
}

fn delta(id: usize, k: usize) -> String {
    format!("s{id}-d{k} ")
}

fn text(id: usize) -> String {
    let (before, after) = deltas(id);
    (0..before + after).map(|k| delta(id, k)).collect()
}

/// An upstream that streams `text(id)` for the request whose prompt is `stream <id>`.
#[derive(Clone)]
struct Paced {
    gate: watch::Receiver<bool>,
    seen: Arc<Mutex<HashMap<usize, Seen>>>,
}

impl Paced {
    fn model() -> Model {
        Model {
            base_url: "http://paced.invalid".into(),
            ..Model::new("paced-1").with_api("paced").with_provider("paced")
        }
    }

    fn provider(&self) -> Provider {
        Provider::new("paced").with_model(Self::model()).with_api("paced", Arc::new(self.clone()))
    }
}

impl StreamFn for Paced {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let id = match context.messages().last() {
            Some(Message::User(user)) => {
                user.content.text().trim_start_matches("stream ").parse().unwrap_or(usize::MAX)
            }
            _ => usize::MAX,
        };
        let token = options.cancel.clone().unwrap_or_default();
        let finished = Arc::new(AtomicBool::new(false));
        // The producer only runs while the server pulls; a watcher sees the cancellation.
        let (seen, done) = (Arc::clone(&self.seen), Arc::clone(&finished));
        let watched = token.clone();
        tokio::spawn(async move {
            watched.cancelled().await;
            let outcome = if done.load(Ordering::SeqCst) { Seen::Completed } else { Seen::Cancelled };
            seen.lock().expect("lock").insert(id, outcome);
        });
        let mut gate = self.gate.clone();
        let model = model.clone();
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out = pi_types::AssistantMessageBuilder::for_model(tx, &model);
            out.start().await;
            let index = out.start_text().await;
            let (before, after) = deltas(id);
            for k in 0..before + after {
                if k == before && gate.wait_for(|open| *open).await.is_err() {
                    return;
                }
                if out.text_delta(index, delta(id, k)).await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
            if out.end_text(index).await.is_err() {
                return;
            }
            finished.store(true, Ordering::SeqCst);
            out.done(StopReason::Stop).await;
        })
    }
}

/// How a client treats its stream.
#[derive(Clone, Copy, Debug)]
enum Plan {
    Complete,
    /// Drop the stream after this many events.
    Drop(usize),
    /// Cancel through the token after this many events.
    Cancel(usize),
}

fn context(id: usize) -> TranscriptContext {
    TranscriptContext::from_messages(vec![Message::from(UserMessage::text(format!("stream {id}")))])
}

/// Run one client; `Err` says what was wrong.
async fn client(url: String, id: usize, plan: Plan) -> Result<(), String> {
    let proxy = ProxyStreamFn::new(&url, TOKEN);
    let cancel = CancellationToken::new();
    let options = StreamOptions { cancel: Some(cancel.clone()), ..Default::default() };
    let mut stream = proxy.stream(&Paced::model(), context(id), options);
    let mut events: Vec<AssistantMessageEvent> = Vec::new();
    let stop_after = match plan {
        Plan::Complete => usize::MAX,
        Plan::Drop(n) | Plan::Cancel(n) => n,
    };
    while events.len() < stop_after {
        match stream.next().await {
            Some(event) => events.push(event),
            None => break,
        }
    }
    let names: Vec<&str> = events.iter().map(AssistantMessageEvent::type_name).collect();
    match plan {
        Plan::Drop(n) => {
            drop(stream);
            if names.len() != n || names.iter().any(|name| *name == "done" || *name == "error") {
                return Err(format!("stream {id}: {names:?} before the drop"));
            }
            Ok(())
        }
        Plan::Cancel(_) => {
            cancel.cancel();
            let mut rest = Vec::new();
            while let Some(event) = stream.next().await {
                rest.push(event);
            }
            let terminals = rest.iter().filter(|e| e.is_terminal()).count();
            let last = rest.last().and_then(AssistantMessageEvent::final_message);
            match last {
                Some(message)
                    if terminals == 1
                        && message.stop_reason == StopReason::Aborted
                        && message.error_message.as_deref() == Some("Request aborted by user") =>
                {
                    Ok(())
                }
                _ => Err(format!(
                    "stream {id}: cancelled, then {:?}",
                    rest.iter().map(|e| e.type_name()).collect::<Vec<_>>()
                )),
            }
        }
        Plan::Complete => {
            let (before, after) = deltas(id);
            let mut expected = vec!["start", "text_start"];
            expected.extend(std::iter::repeat_n("text_delta", before + after));
            expected.extend(["text_end", "done"]);
            if names != expected {
                return Err(format!("stream {id}: {names:?}"));
            }
            let streamed: String = events
                .iter()
                .filter_map(|e| match e {
                    AssistantMessageEvent::TextDelta { delta, .. } => Some(delta.as_str()),
                    _ => None,
                })
                .collect();
            let final_text = events.last().and_then(AssistantMessageEvent::final_message).map(|m| m.text());
            if streamed != text(id) || final_text.as_deref() != Some(text(id).as_str()) {
                return Err(format!("stream {id}: text {streamed:?}, final {final_text:?}"));
            }
            Ok(())
        }
    }
}

/// Wait (bounded) until `ready` holds.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let wait = async {
        while !ready() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(GUARD, wait).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_with_random_disconnects() {
    let (open, gate) = watch::channel(false);
    let paced = Paced { gate, seen: Arc::default() };
    let mut config = config_with(vec![paced.provider()]);
    config.limits.max_streams = STREAMS * 2;
    config.limits.max_streams_per_token = STREAMS * 2;
    let server = TestServer::start(config).await;

    let mut rng = Rng(SEED);
    let plans: Vec<Plan> = (0..STREAMS)
        .map(|id| {
            // At most the events before the gate: start, text_start and the first deltas.
            let available = 2 + deltas(id).0;
            match rng.below(6) {
                0 => Plan::Drop(1 + rng.below(available)),
                1 => Plan::Cancel(1 + rng.below(available)),
                _ => Plan::Complete,
            }
        })
        .collect();
    let abandoned: Vec<usize> = (0..STREAMS).filter(|id| !matches!(plans[*id], Plan::Complete)).collect();
    let started = std::time::Instant::now();
    let mut completing = Vec::new();
    let mut leaving = Vec::new();
    for (id, plan) in plans.iter().enumerate() {
        let task = tokio::spawn(client(server.url.clone(), id, *plan));
        match plan {
            Plan::Complete => completing.push(task),
            _ => leaving.push(task),
        }
    }
    let mut failures = Vec::new();
    for task in leaving {
        if let Err(error) = tokio::time::timeout(GUARD, task).await.expect("hang").expect("client task") {
            failures.push(error);
        }
    }
    // Every abandoned stream is cancelled at its upstream, which is held at the gate.
    let seen = Arc::clone(&paced.seen);
    until("the abandoned streams to be cancelled upstream", || {
        let seen = seen.lock().expect("lock");
        abandoned.iter().all(|id| seen.get(id) == Some(&Seen::Cancelled))
    })
    .await;
    let cancelled_after = started.elapsed();
    open.send(true).expect("gate");
    for task in completing {
        if let Err(error) = tokio::time::timeout(GUARD, task).await.expect("hang").expect("client task") {
            failures.push(error);
        }
    }
    until("every stream to end upstream", || seen.lock().expect("lock").len() == STREAMS).await;
    let seen = seen.lock().expect("lock").clone();
    for id in 0..STREAMS {
        let expected = if abandoned.contains(&id) { Seen::Cancelled } else { Seen::Completed };
        if seen.get(&id) != Some(&expected) {
            failures.push(format!("stream {id}: upstream saw {:?}, expected {expected:?}", seen.get(&id)));
        }
    }
    println!(
        "{STREAMS} streams, {} abandoned ({} dropped, {} cancelled): all abandoned cancelled upstream after {:.1} s, \
         all done after {:.1} s",
        abandoned.len(),
        plans.iter().filter(|p| matches!(p, Plan::Drop(_))).count(),
        plans.iter().filter(|p| matches!(p, Plan::Cancel(_))).count(),
        cancelled_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{} failures: {:#?}", failures.len(), &failures[..failures.len().min(10)]);
}
