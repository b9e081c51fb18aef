//! The opt-in retry policy (pi-ai's `retryAssistantCall` semantics on a run) and the agent's
//! usage and cost totals.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_agent::{Agent, AgentOptions, RetryEvent, RetryPolicy};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
use pi_types::{AgentMessage, StopReason, Usage};

fn failure(text: &str) -> FauxResponse {
    let mut message = faux_assistant_message(Vec::new(), StopReason::Error);
    message.error_message = Some(text.into());
    FauxResponse::Message(message)
}

fn answer(text: &str) -> FauxResponse {
    FauxResponse::Message(faux_assistant_message(vec![faux_text(text)], StopReason::Stop))
}

/// An agent on `responses` with a fast retry policy whose events are recorded.
fn retrying(responses: Vec<FauxResponse>, max_retries: u32) -> (Agent, Arc<Mutex<Vec<RetryEvent>>>) {
    let faux = FauxProvider::default();
    faux.set_responses(responses);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let policy = RetryPolicy::new(pi_providers::is_retryable_error)
        .max_retries(max_retries)
        .base_delay(Duration::from_millis(1))
        .on_retry(move |event| record.lock().unwrap().push(event.clone()));
    let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_retry(policy));
    (agent, seen)
}

fn texts(agent: &Agent) -> Vec<(String, StopReason)> {
    agent
        .messages()
        .iter()
        .filter_map(AgentMessage::as_assistant)
        .map(|m| (m.error_message.as_deref().map_or_else(|| m.text(), str::to_owned), m.stop_reason))
        .collect()
}

#[tokio::test]
async fn a_transient_failure_is_retried_and_leaves_the_transcript() {
    let (agent, seen) =
        retrying(vec![failure("503 Service Unavailable"), failure("overloaded_error"), answer("Done.")], 3);
    agent.prompt("Go").await.unwrap();
    assert_eq!(texts(&agent), [("Done.".to_owned(), StopReason::Stop)]);
    assert_eq!(agent.messages().len(), 2);
    assert_eq!(agent.error_message(), None);
    let ms = Duration::from_millis;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            RetryEvent::Scheduled {
                attempt: 1,
                max_attempts: 3,
                delay: ms(1),
                error_message: "503 Service Unavailable".into()
            },
            RetryEvent::AttemptStart { attempt: 1 },
            RetryEvent::Scheduled {
                attempt: 2,
                max_attempts: 3,
                delay: ms(2),
                error_message: "overloaded_error".into()
            },
            RetryEvent::AttemptStart { attempt: 2 },
            RetryEvent::Finished { success: true, attempt: 2, final_error: None },
        ]
    );
}

#[tokio::test]
async fn quota_errors_fail_fast_and_the_budget_is_kept() {
    let (agent, seen) = retrying(vec![failure("429 insufficient_quota")], 3);
    agent.prompt("Go").await.unwrap();
    assert_eq!(texts(&agent), [("429 insufficient_quota".to_owned(), StopReason::Error)]);
    assert!(seen.lock().unwrap().is_empty());

    let (agent, seen) = retrying(vec![failure("502 Bad Gateway"), failure("502 Bad Gateway")], 1);
    agent.prompt("Go").await.unwrap();
    assert_eq!(texts(&agent), [("502 Bad Gateway".to_owned(), StopReason::Error)]);
    assert_eq!(agent.error_message().as_deref(), Some("502 Bad Gateway"));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[2],
        RetryEvent::Finished { success: false, attempt: 1, final_error: Some("502 Bad Gateway".into()) }
    );
}

#[tokio::test]
async fn an_abort_during_the_backoff_ends_the_run_with_the_failure() {
    let faux = FauxProvider::default();
    faux.set_responses([failure("connection reset by peer"), answer("never")]);
    let policy = RetryPolicy::new(pi_providers::is_retryable_error).base_delay(Duration::from_secs(3600));
    let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_retry(policy));
    let run = agent.prompt("Go");
    while faux.pending_response_count() == 2 || agent.messages().len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    agent.abort();
    tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap();
    assert_eq!(texts(&agent), [("connection reset by peer".to_owned(), StopReason::Error)]);
    assert_eq!(faux.pending_response_count(), 1);
}

#[tokio::test]
async fn usage_is_totalled_per_run_and_for_the_agent() {
    let faux = FauxProvider::default();
    faux.set_responses([answer("A short answer."), answer("A somewhat longer answer than the first one.")]);
    let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()));
    agent.prompt("one").await.unwrap();
    agent.prompt("two").await.unwrap();
    let answers: Vec<Usage> =
        agent.messages().iter().filter_map(AgentMessage::as_assistant).map(|m| m.usage.clone()).collect();
    let (first, second) = (&answers[0], &answers[1]);
    assert!(first.output > 0 && second.output > first.output);
    let usage = agent.usage();
    assert_eq!((usage.run.responses, &usage.run.usage), (1, second));
    assert_eq!(usage.total.responses, 2);
    assert_eq!(usage.total.usage.input, first.input + second.input);
    assert_eq!(usage.total.usage.output, first.output + second.output);
    assert_eq!(usage.total.usage.total_tokens, first.total_tokens + second.total_tokens);
    assert_eq!(usage.total.cost().total, first.cost.total + second.cost.total);
    assert_eq!(agent.state().usage, usage);
}
