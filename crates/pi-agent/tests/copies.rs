//! The agent's streaming paths stay linear in the response: guards that count copies of the
//! provider's partial message (never timings).
//!
//! The provider grows its partial in place while nobody else holds it. The agent keeps a copy
//! of its own, which equals the event's partial while the event's listeners run (for a
//! `toolcall_delta` it shows the partial itself then, and drops it afterwards). Growing a text in place moves its
//! buffer only when the capacity doubles; a copy per delta gives every delta a buffer of its
//! own. So the number of distinct text buffers seen counts the copies. (The agent's own copy
//! of a streamed tool call's arguments is guarded by a unit test in `state.rs`.)
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use pi_agent::{Agent, AgentOptions, SetHooks, StreamingMessage};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, AgentToolResult, AssistantContent, FnTool, StopReason, Tool, ToolSpec};
use serde_json::{json, Map, Value};

fn body(chars: usize) -> String {
    "abcdefghijklmnopqrstuvwxyz".chars().cycle().take(chars).collect()
}

fn write_tool() -> Arc<dyn pi_types::AgentTool> {
    let spec = ToolSpec::new(Tool {
        name: "write".into(),
        description: "Write a file".into(),
        parameters: json!({"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]})
            .into(),
        constrained_sampling: None,
    })
    .unwrap();
    Arc::new(FnTool::new(spec, |_args: Value, _ctx| async { Ok(AgentToolResult::text("ok")) }))
}

#[derive(Default)]
struct Seen {
    /// Per update: the partial's first text buffer (0 for other blocks).
    partials: Vec<usize>,
    /// Updates whose listener saw a streaming message unequal to the event's partial.
    foreign: usize,
}

/// Notes an update's partial, and whether the agent's streaming message is it right now.
fn observe(agent: &pi_agent::WeakAgent, seen: &Mutex<Seen>, event: &AgentEvent) {
    if let AgentEvent::MessageUpdate { message, .. } = event {
        let agent = agent.upgrade().unwrap();
        let mut seen = seen.lock().unwrap();
        let buffer = match message.content.first() {
            Some(AssistantContent::Text(text)) => text.text.as_ptr() as usize,
            _ => 0,
        };
        seen.partials.push(buffer);
        match agent.streaming_message() {
            Some(StreamingMessage::Assistant(own)) if *own == **message => {}
            _ => seen.foreign += 1,
        }
    }
}

/// Run one prompt; every update's partial, and whether the agent's streaming message was it.
async fn stream(responses: Vec<FauxResponse>) -> Seen {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    faux.set_responses(responses);
    let agent =
        Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_tools([write_tool()]));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let weak = agent.downgrade();
    let record = Arc::clone(&seen);
    let listener = agent.subscribe_fn(move |event| observe(&weak, &record, event));
    agent.prompt("go").await.unwrap();
    listener.unsubscribe();
    Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap()
}

fn distinct(partials: &[usize]) -> usize {
    partials.iter().collect::<HashSet<_>>().len()
}

#[tokio::test]
async fn a_long_text_streams_into_one_partial() {
    let text = FauxResponse::Message(faux_assistant_message(vec![faux_text(body(20_000))], StopReason::Stop));
    let seen = stream(vec![text]).await;
    assert_eq!(seen.partials.len(), 5_000 + 2);
    assert_eq!(seen.foreign, 0);
    // About 13 buffer growths for 20,000 characters; a copy per delta would give 5,000.
    assert!(distinct(&seen.partials) <= 32, "{} text buffers", distinct(&seen.partials));
}

/// An asynchronous listener holds the provider (the updates are pushed to the agent from inside
/// the provider's sends, and an update whose listener yields makes the provider wait): it sees
/// the agent's streaming message equal to its event's partial after its own yield too, and the
/// partial is still grown in place.
#[tokio::test]
async fn an_asynchronous_listener_sees_its_update_and_the_text_still_grows_in_place() {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    faux.set_responses(vec![FauxResponse::Message(faux_assistant_message(
        vec![faux_text(body(4_000))],
        StopReason::Stop,
    ))]);
    let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let weak = agent.downgrade();
    let record = Arc::clone(&seen);
    let listener = agent.subscribe(move |event, _cancel| {
        let weak = weak.clone();
        let record = Arc::clone(&record);
        Box::pin(async move {
            tokio::task::yield_now().await;
            observe(&weak, &record, event);
            Ok(())
        })
    });
    agent.prompt("go").await.unwrap();
    listener.unsubscribe();
    let seen = Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap();
    assert_eq!(seen.partials.len(), 1_000 + 2);
    assert_eq!(seen.foreign, 0);
    assert!(distinct(&seen.partials) <= 24, "{} text buffers", distinct(&seen.partials));
    match agent.state().messages.last() {
        Some(pi_types::AgentMessage::Assistant(last)) => assert_eq!(last.text(), body(4_000)),
        other => panic!("the last message is {other:?}"),
    }
}

#[tokio::test]
async fn a_long_tool_argument_streams_into_one_partial() {
    let mut arguments = Map::new();
    arguments.insert("content".into(), json!(body(20_000)));
    let call = faux_assistant_message(vec![faux_tool_call("call_write", "write", arguments)], StopReason::ToolUse);
    let done = faux_assistant_message(vec![faux_text("done")], StopReason::Stop);
    let seen = stream(vec![FauxResponse::Message(call), FauxResponse::Message(done)]).await;
    // {"content":"…"} is 20,014 characters: 5,004 deltas, plus start and end; then "done".
    assert_eq!(seen.partials.len(), (5_004 + 2) + 3);
    // While the listeners run, the agent's streaming message equals the event's partial.
    assert_eq!(seen.foreign, 0);
}

/// Per prompt, the run's context and the events share the transcript's messages (pointer
/// copies): after ten prompts every message of the first prompt is still the one allocation
/// the transcript, the runs' contexts and the events all held.
#[tokio::test]
async fn prompts_share_the_history_instead_of_copying_it() {
    let faux = FauxProvider::new(FauxOptions::default().with_token_size(1));
    faux.set_responses(
        (0..10).map(|_| FauxResponse::Message(faux_assistant_message(vec![faux_text("done")], StopReason::Stop))),
    );
    let agent =
        Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_system_prompt("Be brief."));
    // Every request: is each context message the transcript's own (shared, not copied)?
    let copied = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&copied);
    let weak = agent.downgrade();
    agent.update_options(|options| {
        options.prepare_request(move |request, _cancel| {
            let transcript = weak.upgrade().unwrap().messages();
            let context = &request.context.messages;
            let shared = context.iter().zip(transcript.iter()).filter(|(a, b)| a.ptr_eq(b)).count();
            record.lock().unwrap().push(context.len() - shared);
            async { Ok(None) }
        })
    });
    let ends = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&ends);
    let _listener = agent.subscribe_fn(move |event| {
        if let AgentEvent::MessageEnd { message } = event {
            record.lock().unwrap().push(message.clone());
        }
    });
    agent.prompt("first").await.unwrap();
    let first: Vec<_> = agent.messages().iter().cloned().collect();
    for _ in 0..9 {
        agent.prompt("again").await.unwrap();
    }
    let transcript = agent.messages();
    assert_eq!(transcript.len(), 1 + 2 * 10);
    assert!(first.iter().zip(transcript.iter()).all(|(a, b)| a.ptr_eq(b)));
    // The context of each request holds the transcript's messages (the new prompt included).
    assert_eq!(*copied.lock().unwrap(), vec![0; 10]);
    // The events carried the very messages the transcript holds.
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 20);
    assert!(ends.iter().zip(transcript.iter().skip(1)).all(|(a, b)| a.ptr_eq(b)));
}

/// A provider that edits the message's metadata between deltas, through its builder, and then
/// hands over raw events of its own: the agent skips comparing metadata only for updates whose
/// builder reports no change, so its streaming message equals every update's partial.
fn metadata_editing(
    model: &pi_types::Model,
    _c: pi_types::TranscriptContext,
    _o: pi_types::StreamOptions,
) -> pi_types::AssistantMessageEventStream {
    let model = model.clone();
    pi_types::AssistantMessageEventStream::from_producer(move |tx| async move {
        let mut out = pi_types::AssistantMessageBuilder::for_model(tx, &model);
        out.start().await;
        let text = out.start_text().await;
        out.text_delta(text, "a").await.unwrap();
        out.metadata_mut().usage.output = 5;
        out.text_delta(text, "b").await.unwrap();
        out.text_delta(text, "c").await.unwrap();
        out.metadata_mut().response_id = Some("resp_1".into());
        out.text_delta(text, "d").await.unwrap();
        // From here the producer sends events of its own, with other metadata.
        let mut partial = Arc::new(out.message().clone());
        let tx = out.into_sender();
        Arc::make_mut(&mut partial).usage.output = 9;
        if let Some(AssistantContent::Text(block)) = Arc::make_mut(&mut partial).content.get_mut(0) {
            block.text.push('e');
        }
        let delta = pi_types::AssistantMessageEvent::TextDelta {
            content_index: 0,
            delta: "e".into(),
            partial: Arc::clone(&partial),
        };
        tx.send(delta).await;
        Arc::make_mut(&mut partial).stop_reason = StopReason::Stop;
        tx.send(pi_types::AssistantMessageEvent::Done { reason: StopReason::Stop, message: partial }).await;
    })
}

#[tokio::test]
async fn the_streaming_message_follows_metadata_edits_between_deltas() {
    let model = pi_types::Model::new("m").with_api("test").with_provider("test");
    let agent = Agent::new(AgentOptions::new(Arc::new(metadata_editing)).with_model(model));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let weak = agent.downgrade();
    let _listener = agent.subscribe_fn(move |event| {
        if let AgentEvent::MessageUpdate { message, .. } = event {
            let own = weak.upgrade().unwrap().streaming_message();
            let own = own.as_ref().and_then(StreamingMessage::as_assistant).cloned();
            record.lock().unwrap().push((
                own == Some((**message).clone()),
                message.usage.output,
                message.response_id.clone(),
            ));
        }
    });
    agent.prompt("go").await.unwrap();
    let seen = seen.lock().unwrap();
    // text_start, five deltas, text_end is never sent (the producer took over): six updates.
    assert!(seen.iter().all(|(equal, _, _)| *equal), "{seen:?}");
    let outputs: Vec<u64> = seen.iter().map(|(_, output, _)| *output).collect();
    assert_eq!(outputs, [0, 0, 5, 5, 5, 9]);
    assert_eq!(seen.last().and_then(|(_, _, id)| id.clone()).as_deref(), Some("resp_1"));
}
