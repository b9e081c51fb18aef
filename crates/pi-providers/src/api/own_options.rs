//! How an adapter finds the options of its own API in [`StreamOptions::api_options`].
//!
//! An options struct found as is (`AnthropicOptions`, ...) is applied over what the adapter
//! derives from the neutral options, as the reference's `streamSimple` would pass them on. Found
//! wrapped in [`Own`] (the API modules' `stream` functions put it there), it is the whole of the
//! API-specific options, as in a call of the reference's own `stream()`: nothing is derived from
//! `reasoning`, and `max_tokens` is sent as given.

use std::any::Any;

use pi_types::{AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};
use serde_json::Value;

/// API options a request passes the reference's own `stream()` way.
#[derive(Clone, Debug)]
pub(crate) struct Own<T>(pub T);

/// The API options of a request.
#[derive(Debug)]
pub(crate) enum ApiOptionsOf<'a, T> {
    /// None: everything comes from the neutral options (`streamSimple`).
    Simple,
    /// Applied over the mapping of the neutral options.
    Over(&'a T),
    /// The reference's own `stream()`: these options alone.
    Own(&'a T),
}

impl<T> Clone for ApiOptionsOf<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ApiOptionsOf<'_, T> {}

impl<'a, T> ApiOptionsOf<'a, T> {
    /// The options, however they were given.
    pub(crate) fn get(self) -> Option<&'a T> {
        match self {
            Self::Simple => None,
            Self::Over(options) | Self::Own(options) => Some(options),
        }
    }

    /// Whether these are the whole options of a `stream()` call.
    pub(crate) fn is_own(self) -> bool {
        matches!(self, Self::Own(_))
    }

    /// A field of the options, if set.
    pub(crate) fn field<F: Clone + 'a>(self, field: impl FnOnce(&'a T) -> &'a Option<F>) -> Option<F> {
        self.get().and_then(|options| field(options).clone())
    }
}

/// The options of type `T` for `model` in `options`.
pub(crate) fn lookup<'a, T: Any>(model: &Model, options: &'a StreamOptions) -> ApiOptionsOf<'a, T> {
    if options.api_options.is_empty() {
        return ApiOptionsOf::Simple;
    }
    if let Some(Own(own)) = options.api_options.get::<Own<T>>(model) {
        return ApiOptionsOf::Own(own);
    }
    options.api_options.get::<T>(model).map_or(ApiOptionsOf::Simple, ApiOptionsOf::Over)
}

/// `options` for a call of an API's own `stream()`: `api` (`AnthropicOptions`, ...) becomes
/// the whole of the request's API-specific options, as in the reference, instead of being
/// applied over what the adapter derives from `options.reasoning`; the API modules' `stream`
/// functions are this and the adapter's `stream`.
pub fn with_own_options<T: Any + Send + Sync>(mut options: StreamOptions, api: T) -> StreamOptions {
    options.api_options.insert(Own(api));
    options
}

/// Stream through `adapter` with `api` as the request's own API options.
pub(crate) fn stream_own<T: Any + Send + Sync>(
    adapter: &dyn StreamFn,
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: T,
) -> AssistantMessageEventStream {
    adapter.stream(model, context, with_own_options(options, api))
}

/// The mode of a tool choice given as a string or as an object with a `type`.
pub(crate) fn choice_mode(value: &Value) -> Option<&str> {
    match value {
        Value::String(mode) => Some(mode),
        _ => value.get("type").and_then(Value::as_str),
    }
}

/// A function forced by name in the Chat Completions shape (Completions, Mistral, pi-messages):
/// `{"type": "function", "function": {"name"}}`.
pub(crate) fn function_choice(name: &str) -> Value {
    serde_json::json!({"type": "function", "function": {"name": name}})
}

/// The function name of a [`function_choice`].
pub(crate) fn function_choice_name(value: &Value) -> Option<&str> {
    value.get("function").and_then(|f| f.get("name")).and_then(Value::as_str)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use crate::api::anthropic::{AnthropicOptions, AnthropicToolChoice};
    use crate::api::openai::responses::{OpenAIResponsesOptions, ResponsesToolChoice, ServiceTier};

    use super::*;

    #[test]
    fn options_read_and_print_the_references_json() {
        let options: AnthropicOptions =
            serde_json::from_value(json!({"toolChoice": {"type": "tool", "name": "x"}, "effort": "xhigh"})).unwrap();
        assert_eq!(options.tool_choice, Some(AnthropicToolChoice::Tool("x".into())));
        assert_eq!(
            serde_json::to_value(&options).unwrap(),
            json!({"effort": "xhigh", "toolChoice": {"type": "tool", "name": "x"}})
        );
        let any: AnthropicToolChoice = serde_json::from_value(json!("any")).unwrap();
        assert_eq!((any.to_wire(), serde_json::to_value(&any).unwrap()), (json!({"type": "any"}), json!("any")));
        assert!(serde_json::from_value::<AnthropicToolChoice>(json!("required")).is_err());
        assert!(serde_json::from_value::<AnthropicToolChoice>(json!({"type": "tool"})).is_err());

        let hosted = json!({"type": "file_search"});
        let options: OpenAIResponsesOptions =
            serde_json::from_value(json!({"toolChoice": hosted, "serviceTier": "flex"})).unwrap();
        assert_eq!(options.tool_choice, Some(ResponsesToolChoice::Other(hosted.clone())));
        assert_eq!(options.service_tier, Some(ServiceTier::Flex));
        let function: ResponsesToolChoice = serde_json::from_value(json!({"type": "function", "name": "f"})).unwrap();
        assert_eq!(function, ResponsesToolChoice::Function("f".into()));
    }

    #[test]
    fn own_options_win_over_options_applied_over_the_mapping() {
        let model = Model { provider: "anthropic".into(), id: "m".into(), ..Default::default() };
        let mut options = StreamOptions::default();
        assert!(matches!(lookup::<AnthropicOptions>(&model, &options), ApiOptionsOf::Simple));
        options.api_options.insert(AnthropicOptions { thinking_enabled: Some(true), ..Default::default() });
        assert!(
            matches!(lookup::<AnthropicOptions>(&model, &options), ApiOptionsOf::Over(o) if o.thinking_enabled == Some(true))
        );
        let options = with_own_options(options, AnthropicOptions::default());
        let api = lookup::<AnthropicOptions>(&model, &options);
        assert!(api.is_own() && api.field(|o| &o.thinking_enabled).is_none());
        assert!(matches!(lookup::<OpenAIResponsesOptions>(&model, &options), ApiOptionsOf::Simple));
    }
}
