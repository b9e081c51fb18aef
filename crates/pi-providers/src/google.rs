//! placeholder
use std::sync::Arc;
use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};
/// stub
pub trait ToolCallIds: Send + Sync { /// stub
fn next_id(&self, name: &str) -> String; }
/// stub
#[derive(Clone, Default)]
pub struct GoogleGenerativeAi;
impl GoogleGenerativeAi { /// stub
pub fn with_ids(_i: Arc<dyn ToolCallIds>) -> Self { Self } }
impl StreamFn for GoogleGenerativeAi {
    fn stream(&self, _m: &Model, _c: TranscriptContext, _o: StreamOptions) -> AssistantMessageEventStream {
        AssistantMessageEventStream::from_events([])
    }
}
