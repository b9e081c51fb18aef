//! placeholder
use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};
/// stub
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAIResponses;
impl StreamFn for OpenAIResponses {
    fn stream(&self, _m: &Model, _c: TranscriptContext, _o: StreamOptions) -> AssistantMessageEventStream {
        AssistantMessageEventStream::from_events([])
    }
}
