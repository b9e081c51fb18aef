//! OpenCode (`opencode`, `opencode-go`): every request of a conversation carries its session id
//! in `x-opencode-session`, which OpenCode routes by; a header of that name set by the caller
//! wins. The reference's `withOpenCodeSessionHeader`, around each of the provider's adapters.

use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamLayer, StreamOptions, TranscriptContext};

/// The routing header.
pub const SESSION_HEADER: &str = "x-opencode-session";

/// The layer that sends `StreamOptions::session_id` as [`SESSION_HEADER`].
#[derive(Clone, Copy, Debug)]
pub struct OpenCodeSession;

/// `options` with the session header added, unless there is no session or the caller set one.
pub fn with_session_header(mut options: StreamOptions) -> StreamOptions {
    let set = options.headers.names().any(|name| name.eq_ignore_ascii_case(SESSION_HEADER));
    if let Some(session) = options.session_id.clone().filter(|_| !set) {
        options.headers.insert(SESSION_HEADER, Some(session));
    }
    options
}

impl StreamLayer for OpenCodeSession {
    fn stream(
        &self,
        inner: &dyn StreamFn,
        model: &Model,
        context: TranscriptContext,
        options: StreamOptions,
    ) -> AssistantMessageEventStream {
        inner.stream(model, context, with_session_header(options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_travels_unless_the_caller_named_the_header() {
        let options = StreamOptions { session_id: Some("s-1".into()), ..Default::default() };
        let added = with_session_header(options.clone());
        assert_eq!(added.headers.get(SESSION_HEADER), Some(&Some("s-1".to_owned())));
        let mut own = options;
        own.headers.insert("X-OpenCode-Session", Some("mine".into()));
        let kept = with_session_header(own);
        assert_eq!(kept.headers.len(), 1);
        assert_eq!(kept.headers.get("X-OpenCode-Session"), Some(&Some("mine".to_owned())));
        assert!(with_session_header(StreamOptions::default()).headers.is_empty());
    }
}
