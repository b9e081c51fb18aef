//! Typed, borrowed decodes of the events that carry deltas, the hot path of every stream.
//!
//! Each adapter decodes the few fields a delta event needs into a struct that borrows its
//! strings from the event's data (no `serde_json::Value`, no allocation for a delta without
//! escapes). The decode is strict so that it can only agree with the generic path: a JSON text
//! the typed decode accepts is one `JSON.parse` accepts, every member the generic path reads is
//! a field here with the one JSON type it handles (objects only as objects, arrays with exactly
//! the expected length, integers only as integers), and a duplicate member fails. Whatever the
//! typed decode rejects (another shape, another type, a float, an escape in a name) goes the
//! generic way, `js_json::parse` into a `Value`, with the reference's semantics.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The typed decode of an event's data, or `None` (take the generic path).
pub(crate) fn decode<'a, T: Deserialize<'a>>(data: &'a str) -> Option<T> {
    serde_json::from_str::<Obj<T>>(data).ok().map(|Obj(value)| value)
}

/// A JSON object decoded as `T` (a derived struct would also accept an array of its fields).
pub(crate) struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        deserializer.deserialize_map(ObjVisitor(PhantomData))
    }
}

/// An integer that a JavaScript number holds exactly (|n| ≤ 2^53); a float, a larger integer
/// or another type fails the typed decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Int(pub i64);

const MAX_SAFE: u64 = 1 << 53;

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl Visitor<'_> for IntVisitor {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a safe integer")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Int, E> {
                if n <= MAX_SAFE {
                    Ok(Int(n as i64))
                } else {
                    Err(E::custom("not a safe integer"))
                }
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Int, E> {
                if n.unsigned_abs() <= MAX_SAFE {
                    Ok(Int(n))
                } else {
                    Err(E::custom("not a safe integer"))
                }
            }
        }
        deserializer.deserialize_any(IntVisitor)
    }
}

impl Int {
    /// The count pi-ai reads from a usage field: positive values, else 0.
    pub(crate) fn count(value: Option<Int>) -> u64 {
        value.map_or(0, |Int(n)| n.max(0) as u64)
    }

    /// `JSON.stringify` of the number, written into `buffer`.
    pub(crate) fn text(self, buffer: &mut [u8; 24]) -> &str {
        let mut n = self.0.unsigned_abs();
        let mut at = buffer.len();
        loop {
            at -= 1;
            buffer[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if self.0 < 0 {
            at -= 1;
            buffer[at] = b'-';
        }
        std::str::from_utf8(&buffer[at..]).unwrap_or_default()
    }
}

/// A string borrowed from the data (owned when it has escapes). Serde borrows a bare
/// `Cow<str>` field only, not one inside an `Option`.
#[derive(Debug)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// A member that is only looked at for being present and not `null`.
pub(crate) type Present = Option<IgnoredAny>;

// --- anthropic-messages: `content_block_delta` -------------------------------------------------

/// `{"type": "content_block_delta", "index": N, "delta": {...}}`.
#[derive(serde::Deserialize)]
pub(crate) struct AnthropicDelta<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Str<'a>,
    pub index: Option<Int>,
    #[serde(borrow)]
    pub delta: Option<Obj<AnthropicDeltaBody<'a>>>,
}

/// The `delta` of a `content_block_delta`.
#[derive(serde::Deserialize)]
pub(crate) struct AnthropicDeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub text: Option<Str<'a>>,
    #[serde(borrow)]
    pub thinking: Option<Str<'a>>,
    #[serde(borrow)]
    pub partial_json: Option<Str<'a>>,
    #[serde(borrow)]
    pub signature: Option<Str<'a>>,
}

// --- openai-completions: a chunk with one choice whose delta carries content ------------------

/// A chat-completions chunk without usage or error.
#[derive(serde::Deserialize)]
pub(crate) struct CompletionsChunk<'a> {
    #[serde(borrow)]
    pub id: Option<Str<'a>>,
    #[serde(borrow)]
    pub model: Option<Str<'a>>,
    pub usage: Present,
    pub error: Present,
    #[serde(borrow)]
    pub choices: Option<(Obj<CompletionsChoice<'a>>,)>,
}

/// Its one choice.
#[derive(serde::Deserialize)]
pub(crate) struct CompletionsChoice<'a> {
    pub usage: Present,
    pub finish_reason: Present,
    #[serde(borrow)]
    pub delta: Option<Obj<CompletionsDelta<'a>>>,
}

/// The choice's delta.
#[derive(serde::Deserialize)]
pub(crate) struct CompletionsDelta<'a> {
    #[serde(borrow)]
    pub reasoning_content: Option<Str<'a>>,
    #[serde(borrow)]
    pub reasoning: Option<Str<'a>>,
    #[serde(borrow)]
    pub reasoning_text: Option<Str<'a>>,
    pub reasoning_details: Present,
    #[serde(borrow)]
    pub content: Option<Str<'a>>,
    #[serde(borrow)]
    pub tool_calls: Option<(Obj<CompletionsToolCall<'a>>,)>,
}

/// One tool call of a delta.
#[derive(serde::Deserialize)]
pub(crate) struct CompletionsToolCall<'a> {
    pub index: Option<Int>,
    #[serde(borrow)]
    pub id: Option<Str<'a>>,
    #[serde(borrow)]
    pub function: Option<Obj<CompletionsFunction<'a>>>,
}

/// Its function.
#[derive(serde::Deserialize)]
pub(crate) struct CompletionsFunction<'a> {
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    #[serde(borrow)]
    pub arguments: Option<Str<'a>>,
}

// --- openai-responses: `response.*.delta` -------------------------------------------------------

/// `{"type": "response.output_text.delta", "output_index": N, "delta": "..."}` and the other
/// delta events, without an error.
#[derive(serde::Deserialize)]
pub(crate) struct ResponsesDelta<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Str<'a>,
    pub output_index: Int,
    #[serde(borrow)]
    pub delta: Option<Str<'a>>,
    pub error: Present,
}

// --- google-generative-ai: a chunk with one candidate of one part -------------------------------

/// A Gemini chunk without an error.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GeminiChunk<'a> {
    #[serde(borrow)]
    pub response_id: Option<Str<'a>>,
    pub error: Present,
    #[serde(borrow)]
    pub candidates: (Obj<GeminiCandidate<'a>>,),
    pub usage_metadata: Option<Obj<GeminiUsage>>,
}

/// Its candidate, without a finish reason.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GeminiCandidate<'a> {
    #[serde(borrow)]
    pub content: Obj<GeminiContent<'a>>,
    pub finish_reason: Present,
}

/// The candidate's content: one part.
#[derive(serde::Deserialize)]
pub(crate) struct GeminiContent<'a> {
    #[serde(borrow)]
    pub parts: (Obj<GeminiPart<'a>>,),
}

/// A text or thought part.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GeminiPart<'a> {
    #[serde(borrow)]
    pub text: Option<Str<'a>>,
    pub thought: Option<bool>,
    #[serde(borrow)]
    pub thought_signature: Option<Str<'a>>,
    pub function_call: Present,
}

/// The usage counts pi-ai reads.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GeminiUsage {
    pub prompt_token_count: Option<Int>,
    pub cached_content_token_count: Option<Int>,
    pub thoughts_token_count: Option<Int>,
    pub candidates_token_count: Option<Int>,
    pub total_token_count: Option<Int>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_only_as_objects_and_integers_only_as_integers() {
        let ok: Option<AnthropicDelta<'_>> =
            decode(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcd"}}"#);
        let ok = ok.expect("a delta");
        assert!(matches!(ok.delta.as_ref().and_then(|d| d.0.text.as_ref()), Some(Str(Cow::Borrowed("abcd")))));
        // An array in place of an object, a float index, a duplicate member: the generic path.
        for data in [
            r#"["content_block_delta", 0, null]"#,
            r#"{"type":"content_block_delta","index":0,"delta":["text_delta","abcd"]}"#,
            r#"{"type":"content_block_delta","index":0.5,"delta":{"type":"text_delta","text":"abcd"}}"#,
            r#"{"type":"content_block_delta","index":9007199254740993,"delta":{}}"#,
            r#"{"type":"content_block_delta","type":"x","index":0}"#,
            r#"{"type":"content_block_delta","index":0} x"#,
        ] {
            assert!(decode::<AnthropicDelta<'_>>(data).is_none(), "{data}");
        }
        // Escapes are decoded (into an owned string).
        let escaped: Option<AnthropicDelta<'_>> =
            decode(r#"{"type":"content_block_delta","delta":{"text":"a\nb\u00e9"}}"#);
        let text = escaped.and_then(|d| d.delta).and_then(|d| d.0.text).expect("a text");
        assert!(matches!(&text.0, Cow::Owned(t) if t == "a\nb\u{e9}"));
    }

    #[test]
    fn single_element_arrays_only() {
        let two = r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#;
        assert!(decode::<CompletionsChunk<'_>>(two).is_none());
        let one = r#"{"choices":[{"delta":{"content":"a"}}],"usage":null}"#;
        let chunk = decode::<CompletionsChunk<'_>>(one).expect("one choice");
        assert!(chunk.usage.is_none());
        let with_usage = r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}"#;
        assert!(decode::<CompletionsChunk<'_>>(with_usage).is_some_and(|c| c.usage.is_some()));
    }

    #[test]
    fn integers_stringify_as_javascript() {
        let mut buffer = [0u8; 24];
        assert_eq!(Int(0).text(&mut buffer), "0");
        assert_eq!(Int(1234).text(&mut buffer), "1234");
        assert_eq!(Int(-7).text(&mut buffer), "-7");
        assert_eq!(Int(1 << 53).text(&mut buffer), "9007199254740992");
    }
}
