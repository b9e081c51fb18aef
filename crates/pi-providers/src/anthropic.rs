//! placeholder
use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};
/// stub
#[derive(Clone, Copy, Debug, Default)]
pub struct AnthropicMessages;
impl StreamFn for AnthropicMessages {
    fn stream(&self, _m: &Model, _c: TranscriptContext, _o: StreamOptions) -> AssistantMessageEventStream {
        AssistantMessageEventStream::from_events([])
    }
}
