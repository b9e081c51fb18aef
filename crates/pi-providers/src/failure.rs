//! What the registry and the endpoint wrappers share below them: a key resolver's type and
//! the stream of a request that fails before it is sent.

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::{AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, BoxError, Model, StopReason};

/// Resolves a key for a model at request time (e.g. from a credential store).
pub type KeyResolver = Arc<dyn Fn(&Model) -> BoxFuture<'static, Result<Option<String>, BoxError>> + Send + Sync>;

/// A stream that ends at once with an `error` event carrying `message`.
pub(crate) fn failed_stream(model: &Model, message: String) -> AssistantMessageEventStream {
    let error = AssistantMessage {
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        stop_reason: StopReason::Error,
        error_message: Some(message.into()),
        timestamp: pi_types::now_ms(),
        ..Default::default()
    };
    AssistantMessageEventStream::from_events([AssistantMessageEvent::Error {
        reason: StopReason::Error,
        error: Arc::new(error),
    }])
}
