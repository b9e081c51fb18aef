//! The run's future is what every waiting agent keeps in memory: its size is held down here,
//! so that a large value held across an `await` (an event stored twice, a moved-from local
//! whose place lives on) shows up as a failing test rather than as kilobytes per agent.

use std::sync::Arc;

use pi_loop::{run_agent_loop, AgentContext, LoopConfig, NullSink};
use pi_types::CancellationToken;
use pi_types::{AgentMessage, AssistantMessageEventStream, Model, StreamOptions, TranscriptContext, UserMessage};

fn never(_model: &Model, _ctx: TranscriptContext, _options: StreamOptions) -> AssistantMessageEventStream {
    AssistantMessageEventStream::from_events([])
}

#[test]
fn the_run_future_stays_small() {
    let config = LoopConfig::new(Arc::new(Model::new("m").with_api("api").with_provider("p")), Arc::new(never));
    let prompts = vec![AgentMessage::from(UserMessage::text("hi"))];
    let run = run_agent_loop(prompts, AgentContext::default(), config, Arc::new(NullSink), CancellationToken::new());
    // 1,072 bytes before events were stored once per emit and the run's inputs lived only in
    // its box; 784 after; 696 once a turn's own events (its start and end, the prompts) were
    // emitted from boxed futures and `AgentEvent` halved (its tool arguments boxed); 552 once
    // a turn's hook calls were boxed and the run's inputs came in one box; 272 once the run's
    // box also kept its emitter and new messages, and the hooks' contexts and the new messages'
    // events moved into boxed helpers; 176 once a completed turn was built in place and each
    // turn's own values were scoped to the block that uses them.
    let size = std::mem::size_of_val(&run);
    assert!(size <= 176, "the run's future is {size} bytes");
}
