//! Listener lifetime: a listener stays until `Subscription::unsubscribe` or until the agent is
//! dropped, as the reference's `subscribe` (which returns an unsubscribe function); dropping
//! the `Subscription` value never silences it.

use std::sync::{Arc, Mutex};

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, StopReason};

fn agent(replies: &[&str]) -> Agent {
    let faux = FauxProvider::default();
    faux.set_responses(
        replies
            .iter()
            .map(|reply| FauxResponse::Message(faux_assistant_message(vec![faux_text(*reply)], StopReason::Stop))),
    );
    Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()))
}

type Log = Arc<Mutex<Vec<&'static str>>>;

fn recorder(log: &Log) -> impl Fn(&AgentEvent) + Send + Sync + 'static {
    let log = Arc::clone(log);
    move |event| log.lock().unwrap_or_else(|p| p.into_inner()).push(event.type_name())
}

fn taken(log: &Log) -> Vec<&'static str> {
    std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()))
}

#[tokio::test]
async fn a_dropped_subscription_keeps_listening() {
    let agent = agent(&["one"]);
    let ignored: Log = Arc::default();
    let statement: Log = Arc::default();
    let _ = agent.subscribe_fn(recorder(&ignored));
    agent.subscribe_fn(recorder(&statement));
    agent.prompt("go").await.expect("run");
    let expected = ["agent_start", "turn_start", "message_start", "message_end", "message_start"];
    for log in [&ignored, &statement] {
        let events = taken(log);
        assert_eq!(events[..5], expected, "{events:?}");
        assert_eq!(events.last(), Some(&"agent_end"));
    }
}

#[tokio::test]
async fn unsubscribe_removes_the_listener_for_later_runs() {
    let agent = agent(&["one", "two"]);
    let kept: Log = Arc::default();
    let removed: Log = Arc::default();
    let _kept = agent.subscribe_fn(recorder(&kept));
    let subscription = agent.subscribe_fn(recorder(&removed));
    agent.prompt("first").await.expect("first run");
    assert_eq!(taken(&removed).last(), Some(&"agent_end"));
    subscription.unsubscribe();
    agent.prompt("second").await.expect("second run");
    assert!(taken(&removed).is_empty(), "an unsubscribed listener heard the second run");
    assert_eq!(taken(&kept).iter().filter(|e| **e == "agent_end").count(), 2);
}

#[tokio::test]
async fn a_subscription_does_not_keep_the_agent_alive() {
    let agent = agent(&[]);
    let weak = agent.downgrade();
    let log: Log = Arc::default();
    let subscription = agent.subscribe_fn(recorder(&log));
    drop(agent);
    assert!(weak.upgrade().is_none(), "the subscription kept the agent alive");
    subscription.unsubscribe(); // a no-op once the agent is gone
}
