//! Streaming stays linear in the response: guards that count copies of the provider's partial
//! message (never timings).
//!
//! The provider grows its partial in place while nobody else holds it, and copies the whole
//! message when someone does. Every `message_update` event carries the partial. Growing a
//! text in place moves its buffer only when the capacity doubles (a logarithmic number of
//! times); a copy per delta gives every delta a buffer of its own. So the number of distinct
//! text buffers seen counts the copies.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use pi_loop::{agent_loop, run_agent_loop, AgentContext, FnSink, LoopConfig};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxOptions, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, AgentMessage, AssistantContent, StopReason, UserMessage};

const CHARS: usize = 20_000;

fn config(chars: usize) -> LoopConfig {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    let body: String = "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(chars).collect();
    faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text(body)], StopReason::Stop))]);
    LoopConfig::new(faux.model(), Arc::new(faux))
}

fn prompt() -> Vec<AgentMessage> {
    vec![UserMessage::text("Run the benchmark.").into()]
}

/// The text buffer of every update's partial.
#[derive(Default)]
struct Partials {
    seen: Vec<usize>,
}

impl Partials {
    fn record(&mut self, event: &AgentEvent) {
        if let AgentEvent::MessageUpdate { message, .. } = event {
            let buffer = match message.content.first() {
                Some(AssistantContent::Text(text)) => text.text.as_ptr() as usize,
                _ => 0,
            };
            self.seen.push(buffer);
        }
    }

    fn distinct(&self) -> usize {
        self.seen.iter().collect::<HashSet<_>>().len()
    }
}

/// A linear stream of 20,000 characters grows its buffer about 13 times; a copy per delta
/// would give 5,000 buffers.
const LINEAR_BUFFERS: usize = 32;

#[tokio::test]
async fn the_stream_form_hands_over_events_without_keeping_them() {
    let mut stream = agent_loop(prompt(), AgentContext::default(), config(CHARS), Default::default());
    let mut partials = Partials::default();
    while let Some(event) = stream.next().await {
        partials.record(&event);
    }
    assert_eq!(partials.seen.len(), CHARS / 4 + 2);
    // The stream never held an event the consumer had dropped, so no delta made the provider
    // copy the message.
    assert!(partials.distinct() <= LINEAR_BUFFERS, "{} text buffers", partials.distinct());
    let messages = stream.result().await.unwrap();
    assert_eq!(messages.len(), 2);
}

#[tokio::test]
async fn the_stream_form_does_not_run_ahead_of_its_consumer() {
    let mut stream = agent_loop(prompt(), AgentContext::default(), config(CHARS), Default::default());
    let mut kept = Vec::new();
    // Keep a few updates: each kept one costs one copy, and nothing more is produced meanwhile.
    while let Some(event) = stream.next().await {
        let update = matches!(event, AgentEvent::MessageUpdate { .. });
        kept.push(event);
        if update && kept.len() == 8 {
            break;
        }
    }
    let taken = kept.len();
    let partials: HashSet<usize> = kept
        .iter()
        .filter_map(|event| match event {
            AgentEvent::MessageUpdate { message, .. } => Some(Arc::as_ptr(message) as usize),
            _ => None,
        })
        .collect();
    // agent_start, turn_start, user start/end, message_start, then 3 updates, each kept one a
    // snapshot of its own (copy on write).
    assert_eq!(taken, 8);
    assert_eq!(partials.len(), 3);
    drop(kept);
    let mut rest = 0;
    while stream.next().await.is_some() {
        rest += 1;
    }
    assert_eq!(taken + rest, CHARS / 4 + 10);
}

#[tokio::test]
async fn the_callback_form_streams_one_partial() {
    let partials = Arc::new(std::sync::Mutex::new(Partials::default()));
    let recorded = Arc::clone(&partials);
    let sink = Arc::new(FnSink(move |event: &AgentEvent| recorded.lock().unwrap().record(event)));
    run_agent_loop(prompt(), AgentContext::default(), config(CHARS), sink, Default::default()).await.unwrap();
    let partials = std::mem::take(&mut *partials.lock().unwrap());
    assert_eq!(partials.seen.len(), CHARS / 4 + 2);
    assert!(partials.distinct() <= LINEAR_BUFFERS, "{} text buffers", partials.distinct());
}

/// A transcript cache carries the provider messages from run to run: the second run's request
/// holds the very messages the first run converted (not copies), so a prompt converts only
/// its new messages.
#[tokio::test]
async fn a_transcript_cache_converts_each_message_once() {
    use pi_loop::TranscriptCache;
    use pi_types::{Message, StreamFn};

    /// Records the first message's text buffer of each request.
    struct FirstBuffer(Arc<dyn StreamFn>, Arc<std::sync::Mutex<Vec<usize>>>);
    impl StreamFn for FirstBuffer {
        fn stream(
            &self,
            model: &pi_types::Model,
            context: pi_types::TranscriptContext,
            options: pi_types::StreamOptions,
        ) -> pi_types::AssistantMessageEventStream {
            let buffer = match context.messages().first() {
                Some(Message::User(user)) => user_text_ptr(user),
                _ => 0,
            };
            self.1.lock().unwrap().push(buffer);
            self.0.stream(model, context, options)
        }
    }
    fn user_text_ptr(user: &UserMessage) -> usize {
        match &user.content {
            pi_types::UserMessageContent::Text(text) => text.as_ptr() as usize,
            pi_types::UserMessageContent::Blocks(blocks) => match blocks.first() {
                Some(pi_types::UserContent::Text(text)) => text.text.as_ptr() as usize,
                _ => 0,
            },
        }
    }

    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    let done = || FauxResponse::Message(faux_assistant_message(vec![faux_text("done")], StopReason::Stop));
    faux.set_responses([done(), done()]);
    let buffers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let cache = TranscriptCache::new();
    let mut config = LoopConfig::new(faux.model(), Arc::new(FirstBuffer(Arc::new(faux.clone()), Arc::clone(&buffers))));
    config.transcript_cache = Some(cache.clone());
    let sink = Arc::new(FnSink(|_: &AgentEvent| {}));
    let mut messages =
        run_agent_loop(prompt(), AgentContext::default(), config.clone(), sink.clone(), Default::default())
            .await
            .unwrap();
    assert_eq!(cache.converted(), 1);
    let second = vec![UserMessage::text("again").into()];
    let context = AgentContext::new(messages.clone(), Vec::new());
    messages.extend(run_agent_loop(second, context, config, sink, Default::default()).await.unwrap());
    assert_eq!(messages.len(), 4);
    assert_eq!(cache.converted(), 3);
    let buffers = buffers.lock().unwrap();
    assert_eq!(buffers.len(), 2);
    assert_ne!(buffers[0], 0);
    assert_eq!(buffers[0], buffers[1], "the first prompt was converted again");
}
