//! Pieces every adapter shares: starting and ending the response builder, request headers,
//! the reference's short hash, strict JSON-schema conversion and the raw-event hook.

use pi_types::{
    AssistantMessage, AssistantMessageBuilder, ConstrainedSampling, EventSender, Model, StopReason, StreamOptions,
    Strictness, Tool, TypesError,
};
use serde_json::{Map, Value};

/// A JSON object of `members`, in order, moving each value in. `json!` would serialize a
/// `Value` it is given into a copy of it (the whole history of a request, once per level it
/// is nested in).
pub(crate) fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(members.into_iter().map(|(name, value)| (name.to_owned(), value)).collect())
}

/// A builder for one response of `model` through `api` (stamped now, stop reason `pending`).
pub(crate) fn builder(tx: EventSender, model: &Model, api: &str) -> AssistantMessageBuilder {
    let message = AssistantMessage {
        api: api.into(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        stop_reason: StopReason::Pending,
        timestamp: pi_types::now_ms(),
        ..Default::default()
    };
    AssistantMessageBuilder::new(tx, message)
}

/// End the response: `done` with the stop reason the stream set, or `error` for a [`Stop`]
/// (stop reason `aborted` when cancelled, else `error`).
pub(crate) async fn finish(out: AssistantMessageBuilder, result: Result<(), Stop>) {
    match result {
        Ok(()) => {
            let reason = out.message().stop_reason;
            out.done(reason).await;
        }
        Err(stop) if stop.aborted => out.aborted(crate::transport::http::bound_error_message(stop.message)).await,
        Err(stop) => out.error(crate::transport::http::bound_error_message(stop.message)).await,
    }
}

/// The tail every stream's read ends with: a stream that set no stop reason fails with
/// `pending`; one whose message recorded an error or an abort fails with its error message
/// (or the reference's generic text); any other stop reason ends it normally.
pub(crate) fn stop_reason_tail(message: &pi_types::AssistantMessage, pending: &str) -> Result<(), Stop> {
    match message.stop_reason {
        StopReason::Pending => Err(Stop::error(pending)),
        StopReason::Aborted | StopReason::Error => Err(Stop::error(
            message.error_message.as_deref().filter(|m| !m.is_empty()).unwrap_or("An unknown error occurred"),
        )),
        _ => Ok(()),
    }
}

/// Why an adapter stopped early: the message and whether the request was cancelled.
#[derive(Debug)]
pub struct Stop {
    /// The `errorMessage`.
    pub message: String,
    /// Whether the request was cancelled (the stream ends `aborted`, else `error`).
    pub aborted: bool,
}

impl Stop {
    /// A failure: the stream ends with `error`.
    pub fn error(message: impl Into<String>) -> Self {
        Self { message: message.into(), aborted: false }
    }

    /// A cancellation: the stream ends with `aborted`.
    pub fn aborted(message: impl Into<String>) -> Self {
        Self { message: message.into(), aborted: true }
    }
}

/// The builder refused a block operation: the adapter lost track of its blocks.
impl From<TypesError> for Stop {
    fn from(error: TypesError) -> Self {
        Self::error(error.to_string())
    }
}

impl From<crate::transport::http::Failure> for Stop {
    fn from(failure: crate::transport::http::Failure) -> Self {
        Self { message: failure.message, aborted: failure.aborted }
    }
}

/// Whether `headers` has a non-blank value for `name` (case-insensitive).
pub(crate) fn has_header(options: &StreamOptions, name: &str) -> bool {
    options
        .headers
        .iter()
        .any(|(key, value)| key.eq_ignore_ascii_case(name) && value.as_deref().is_some_and(|v| !v.trim().is_empty()))
}

/// Merge header sources in order (later wins, case-insensitive); `None` removes a header.
pub(crate) fn merge_headers(sources: &[Vec<(String, Option<String>)>]) -> Vec<(String, String)> {
    let mut merged: Vec<(String, Option<String>)> = Vec::new();
    for source in sources {
        for (name, value) in source {
            merged.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            merged.push((name.clone(), value.clone()));
        }
    }
    merged.into_iter().filter_map(|(name, value)| value.map(|v| (name, v))).collect()
}

/// The identity headers (`User-Agent`, attribution): the lowest-priority source.
pub(crate) fn identity_headers(model: &Model, options: &StreamOptions) -> Vec<(String, Option<String>)> {
    crate::transport::identity::identity_headers(model, options.identity.as_deref())
}

/// Headers of the model (`model.headers`).
pub(crate) fn model_headers(model: &Model) -> Vec<(String, Option<String>)> {
    model.headers.iter().flatten().map(|(k, v)| (k.clone(), Some(v.clone()))).collect()
}

/// GitHub Copilot's per-request headers (none for other providers): `X-Initiator` says whether
/// the user (last message from the user) or the agent (a follow-up after assistant or tool
/// messages) started the request, `Openai-Intent` is fixed, and `Copilot-Vision-Request` marks
/// requests that carry images in user or tool-result messages.
pub(crate) fn copilot_headers(model: &Model, messages: &[pi_types::Message]) -> Vec<(String, Option<String>)> {
    use pi_types::{Message, UserContent, UserMessageContent};
    if model.provider != "github-copilot" {
        return Vec::new();
    }
    let initiator = match messages.last() {
        Some(Message::User(_)) | None => "user",
        Some(_) => "agent",
    };
    let mut headers = vec![
        ("X-Initiator".to_owned(), Some(initiator.to_owned())),
        ("Openai-Intent".to_owned(), Some("conversation-edits".to_owned())),
    ];
    let has_images = messages.iter().any(|message| match message {
        Message::User(user) => match &user.content {
            UserMessageContent::Blocks(blocks) => blocks.iter().any(|b| matches!(b, UserContent::Image(_))),
            UserMessageContent::Text(_) => false,
        },
        Message::ToolResult(result) => result.content.iter().any(|b| matches!(b, UserContent::Image(_))),
        _ => false,
    });
    if has_images {
        headers.push(("Copilot-Vision-Request".to_owned(), Some("true".to_owned())));
    }
    headers
}

/// `application/x-www-form-urlencoded` as `URLSearchParams` writes it (OAuth token requests).
pub(crate) fn form_encode(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// Headers of the request options.
pub(crate) fn option_headers(options: &StreamOptions) -> Vec<(String, Option<String>)> {
    options.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Apply the `on_payload` hook.
pub(crate) async fn apply_on_payload(options: &StreamOptions, model: &Model, params: Value) -> Value {
    match &options.on_payload {
        Some(hook) => hook(&params, model).await.unwrap_or(params),
        None => params,
    }
}

/// Report one raw provider event.
pub(crate) async fn on_event(options: &StreamOptions, model: &Model, event: &Value) {
    if let Some(hook) = &options.on_provider_stream_event {
        hook(event, model).await;
    }
}

/// The reference's `shortHash` (two 32-bit multiply-xor lanes, base 36).
pub(crate) fn short_hash(text: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for unit in text.encode_utf16() {
        let ch = u32::from(unit);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507) ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507) ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", crate::js_json::base36(h2.into()), crate::js_json::base36(h1.into()))
}

// ---------------------------------------------------------------------------------------------
// Strict JSON-schema sampling (`constrained-sampling.js`)
// ---------------------------------------------------------------------------------------------

const UNSUPPORTED_STRICT_KEYS: [&str; 16] = [
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
];

/// A keyword predicate of a provider's strict mode: true when (key, value) is unsupported.
pub(crate) type UnsupportedKeyword = fn(&str, &Value) -> bool;

fn is_structured(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return false };
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    types.contains(&"object") || types.contains(&"array") || map.contains_key("properties") || map.contains_key("items")
}

fn allows_null(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return false };
    match map.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(items)) if items.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    if map.get("const") == Some(&Value::Null) {
        return true;
    }
    if map.get("enum").and_then(Value::as_array).is_some_and(|e| e.contains(&Value::Null)) {
        return true;
    }
    map.get("anyOf").and_then(Value::as_array).is_some_and(|v| v.iter().any(allows_null))
}

fn make_strict_node(schema: &mut Value, unsupported: Option<UnsupportedKeyword>) -> Result<(), String> {
    let Some(map) = schema.as_object_mut() else { return Err("boolean schemas are unsupported".into()) };
    for key in UNSUPPORTED_STRICT_KEYS {
        if map.contains_key(key) {
            return Err(format!("{key} schemas are unsupported"));
        }
    }
    if let Some(check) = unsupported {
        for (key, value) in map.iter() {
            if check(key, value) {
                return Err(format!("{key}: {} is unsupported", crate::js_json::stringify(value)));
            }
        }
    }
    if !map.contains_key("type") && !map.contains_key("anyOf") && !map.contains_key("enum") {
        return Err("schemas without a type are unsupported".into());
    }
    if let Some(any_of) = map.get_mut("anyOf") {
        let Some(variants) = any_of.as_array_mut().filter(|v| !v.is_empty()) else {
            return Err("anyOf must contain at least one schema".into());
        };
        for variant in variants {
            if is_structured(variant) {
                return Err("object and array unions are unsupported".into());
            }
            make_strict_node(variant, unsupported)?;
        }
    }
    if let Some(items) = map.get_mut("items") {
        if items.is_array() {
            return Err("tuple schemas are unsupported".into());
        }
        make_strict_node(items, unsupported)?;
    }
    let is_object = map.get("type").and_then(Value::as_str) == Some("object");
    if map.contains_key("properties") && !is_object {
        return Err("properties require type object".into());
    }
    if !is_object {
        return Ok(());
    }
    if map.get("additionalProperties").is_some_and(|v| v != &Value::Bool(false)) {
        return Err("schema-valued or true additionalProperties is unsupported".into());
    }
    if map.get("properties").is_some_and(|p| !p.is_object()) {
        return Err("object properties must be a schema map".into());
    }
    let required: Vec<String> = match map.get("required") {
        None => vec![],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        Some(_) => return Err("object required must be a string array".into()),
    };
    let mut empty = Map::new();
    let properties = match map.get_mut("properties") {
        Some(Value::Object(p)) => p,
        _ => &mut empty,
    };
    if required.iter().any(|key| !properties.contains_key(key)) {
        return Err("required contains an unknown property".into());
    }
    let names: Vec<String> = properties.keys().cloned().collect();
    for (key, property) in properties.iter_mut() {
        make_strict_node(property, unsupported)?;
        if !required.contains(key) && !allows_null(property) {
            let inner = std::mem::take(property);
            *property = serde_json::json!({"anyOf": [inner, {"type": "null"}]});
        }
    }
    map.insert("required".into(), Value::Array(names.into_iter().map(Value::String).collect()));
    map.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

/// The strict form of a tool schema, or why it cannot have one.
pub(crate) fn make_strict_json_schema(
    schema: &Value,
    unsupported: Option<UnsupportedKeyword>,
) -> Result<Value, String> {
    let mut cloned = schema.clone();
    if !cloned.is_object() {
        return Err("root schema must have type object".into());
    }
    make_strict_node(&mut cloned, unsupported)?;
    if cloned.get("type").and_then(Value::as_str) != Some("object") {
        return Err("root schema must have type object".into());
    }
    Ok(cloned)
}

/// Whether a tool is sent strict: `Ok(Some(true))` strict, `Ok(None)` not, `Err` when required
/// but impossible.
pub(crate) fn resolve_strict(
    tool: &Tool,
    supports_strict: bool,
    unsupported: Option<UnsupportedKeyword>,
) -> Result<Option<bool>, String> {
    let Some(ConstrainedSampling::JsonSchema { strict }) = &tool.constrained_sampling else { return Ok(None) };
    let require = matches!(strict, Strictness::Require);
    if supports_strict {
        return match make_strict_json_schema(&tool.parameters, unsupported) {
            Ok(_) => Ok(Some(true)),
            Err(_) if !require => Ok(None),
            Err(reason) => {
                Err(format!("Tool \"{}\" requires JSON-schema constrained sampling, but {reason}.", tool.name))
            }
        };
    }
    if require {
        return Err(format!(
            "Tool \"{}\" requires JSON-schema constrained sampling, but strict tools are unsupported.",
            tool.name
        ));
    }
    Ok(None)
}

/// The parameters to send: the strict form when strict.
pub(crate) fn tool_parameters(tool: &Tool, strict: Option<bool>) -> Value {
    if strict == Some(true) {
        make_strict_json_schema(&tool.parameters, None).unwrap_or_else(|_| (*tool.parameters).clone())
    } else {
        (*tool.parameters).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_hash_matches_reference() {
        // Values computed with the reference implementation.
        assert_eq!(short_hash(""), "k4n83c7h0j2b");
        assert_eq!(short_hash("abc"), "y0biex7f9bbh");
    }
}

#[cfg(test)]
mod copilot_tests {
    use super::*;
    use pi_types::{AssistantMessage, ImageContent, Message, ToolResultMessage, UserContent, UserMessage};

    fn names(headers: &[(String, Option<String>)]) -> Vec<(String, String)> {
        headers.iter().map(|(k, v)| (k.clone(), v.clone().unwrap_or_default())).collect()
    }

    #[test]
    fn copilot_requests_say_who_started_them_and_whether_they_carry_images() {
        let model = Model::new("gpt-4o").with_api("openai-completions").with_provider("github-copilot");
        let user = Message::from(UserMessage::text("Hi"));
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            names(&copilot_headers(&model, std::slice::from_ref(&user))),
            [pair("X-Initiator", "user"), pair("Openai-Intent", "conversation-edits")]
        );
        let image = UserContent::Image(ImageContent { data: "AA==".into(), mime_type: "image/png".into() });
        let result = ToolResultMessage { content: vec![image], ..Default::default() };
        let follow_up =
            [user, Message::Assistant(AssistantMessage::default().into()), Message::ToolResult(result.into())];
        assert_eq!(
            names(&copilot_headers(&model, &follow_up)),
            [
                pair("X-Initiator", "agent"),
                pair("Openai-Intent", "conversation-edits"),
                pair("Copilot-Vision-Request", "true")
            ]
        );
        let other = Model::new("gpt-4o").with_api("openai-completions").with_provider("openai");
        assert!(copilot_headers(&other, &follow_up).is_empty());
    }
}
