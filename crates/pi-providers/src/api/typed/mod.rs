//! Typed, borrowed decodes of the events that carry deltas, the hot path of every stream.
//!
//! Each adapter decodes the few fields a delta event needs into a struct that borrows its
//! strings from the event's data (no `serde_json::Value`, no allocation for a delta without
//! escapes), with the strict pull [`reader`]. The decode is strict so that it can only agree
//! with the generic path: a JSON text the typed decode accepts is one `JSON.parse` accepts,
//! every member the generic path reads is a field here with the one JSON type it handles
//! (objects only as objects, arrays with exactly the expected length, integers only as
//! integers), and a duplicate member fails. Whatever the typed decode declines (another shape,
//! another type, a float, an escape in a name) goes the generic way, `js_json::parse` into a
//! `Value`, with the reference's semantics.
//!
//! Nested objects are read in place ([`Object`], [`Field`]): the decode starts from the
//! struct's default and writes each member where it stays, so a decoded event is not moved out
//! of each level of its nesting (a `memcpy` call per move, for structs of a few hundred bytes).

mod anthropic;
mod completions;
mod head;
mod reader;
mod responses;

pub(crate) use anthropic::{decode_delta, AnthropicDelta, AnthropicPayload, DeltaHeads};
pub(crate) use completions::{decode_chunk, ChunkHeads, CompletionsChunk};
pub(crate) use responses::{decode_event, EventHeads, ResponsesDelta};

use std::borrow::Cow;

use reader::Reader;

/// The typed decode of an event's data, or `None` (take the generic path).
pub(crate) fn decode<'a, T: Object<'a>>(data: &'a str) -> Option<T> {
    let mut reader = Reader::new(data);
    // Read where it is returned from: each move of a decoded event is a `memcpy` call.
    let mut value = T::default();
    T::read_fields(&mut reader, &mut value)?;
    reader.end()?;
    Some(value)
}

/// A value the typed decode reads; `None` declines the text.
pub(crate) trait Decode<'a>: Sized {
    fn read(reader: &mut Reader<'a>) -> Option<Self>;

    /// What a member of this type that is missing from its object is: by default nothing, which
    /// declines the text (a required member).
    fn missing() -> Option<Self> {
        None
    }
}

/// The members of a JSON object, read into a struct in place.
pub(crate) trait Object<'a>: Default {
    /// Reads an object into `out` (which holds the default).
    fn read_fields(reader: &mut Reader<'a>, out: &mut Self) -> Option<()>;
}

/// How a struct's member is read: into its place in the struct, so that a nested object is
/// never moved out of the decode of its parent (each move of a decoded struct of a few hundred
/// bytes is a `memcpy` call).
pub(crate) trait Field<'a>: Default {
    /// Reads the member's value into `slot` (which holds the default).
    fn read_field(reader: &mut Reader<'a>, slot: &mut Self) -> Option<()>;

    /// Whether a missing member declines the text.
    fn required() -> bool;
}

/// A value member: read whole. Missing, it is its type's [`Decode::missing`], which is its
/// default (`None`, for the optional members here) or declines.
impl<'a, T: Decode<'a> + Default> Field<'a> for T {
    #[inline]
    fn read_field(reader: &mut Reader<'a>, slot: &mut Self) -> Option<()> {
        *slot = T::read(reader)?;
        Some(())
    }

    fn required() -> bool {
        T::missing().is_none()
    }
}

/// A JSON object decoded as `T`, a member that must be there.
#[derive(Default)]
pub(crate) struct Obj<T>(pub T);

impl<'a, T: Object<'a>> Field<'a> for Obj<T> {
    #[inline]
    fn read_field(reader: &mut Reader<'a>, slot: &mut Self) -> Option<()> {
        T::read_fields(reader, &mut slot.0)
    }

    fn required() -> bool {
        true
    }
}

/// An object member that may be `null` or missing.
impl<'a, T: Object<'a>> Field<'a> for Option<Obj<T>> {
    #[inline]
    fn read_field(reader: &mut Reader<'a>, slot: &mut Self) -> Option<()> {
        reader.nullable(|reader| T::read_fields(reader, &mut slot.insert(Obj::default()).0)).map(drop)
    }

    fn required() -> bool {
        false
    }
}

/// An array of exactly one object, a member that must be there.
impl<'a, T: Object<'a>> Field<'a> for (Obj<T>,) {
    #[inline]
    fn read_field(reader: &mut Reader<'a>, slot: &mut Self) -> Option<()> {
        reader.single(|reader| T::read_fields(reader, &mut slot.0 .0))
    }

    fn required() -> bool {
        true
    }
}

/// An array of exactly one object that may be `null` or missing.
impl<'a, T: Object<'a>> Field<'a> for Option<(Obj<T>,)> {
    #[inline]
    fn read_field(reader: &mut Reader<'a>, slot: &mut Self) -> Option<()> {
        let read = |reader: &mut Reader<'a>| {
            reader.single(|reader| T::read_fields(reader, &mut slot.insert(Default::default()).0 .0))
        };
        reader.nullable(read).map(drop)
    }

    fn required() -> bool {
        false
    }
}

/// `null` or the value; a missing member is `None` too.
impl<'a, T: Decode<'a>> Decode<'a> for Option<T> {
    #[inline]
    fn read(reader: &mut Reader<'a>) -> Option<Self> {
        reader.nullable(T::read)
    }

    fn missing() -> Option<Self> {
        Some(None)
    }
}

impl Decode<'_> for bool {
    fn read(reader: &mut Reader<'_>) -> Option<Self> {
        reader.boolean()
    }
}

/// A struct of the members of a JSON object and its [`Object`]: each member
/// is read by name into its place with its type's [`Field`], a duplicate declines the text,
/// others are checked and passed over. A missing member keeps its default, or declines the
/// text when its type is [`Field::required`].
macro_rules! json_object {
    (
        $(#[$attr:meta])*
        struct $name:ident $(<$lt:lifetime>)? { $($field:ident: $field_ty:ty = $key:literal),* $(,)? }
    ) => {
        $(#[$attr])*
        #[derive(Default)]
        pub(crate) struct $name $(<$lt>)? {
            $(pub $field: $field_ty,)*
        }

        impl<'a> Object<'a> for $name $(<$lt>)? {
            fn read_fields(reader: &mut Reader<'a>, out: &mut Self) -> Option<()> {
                // Whether each member was read (a local per member, named as the member).
                $(let mut $field = false;)*
                reader.object(|reader, name| {
                    match name {
                        $($key => read_once(reader, &mut $field, &mut out.$field)?,)*
                        _ => reader.skip()?,
                    }
                    Some(())
                })?;
                $(if !$field && <$field_ty as Field<'a>>::required() {
                    return None;
                })*
                Some(())
            }
        }

    };
}

/// An integer that a JavaScript number holds exactly (|n| ≤ 2^53); a float, a larger integer
/// or another type fails the typed decode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Int(pub i64);

impl Decode<'_> for Int {
    #[inline]
    fn read(reader: &mut Reader<'_>) -> Option<Self> {
        reader.int().map(Int)
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

/// A string borrowed from the data (owned when it has escapes).
#[derive(Debug, Default)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'a> Decode<'a> for Str<'a> {
    #[inline]
    fn read(reader: &mut Reader<'a>) -> Option<Self> {
        reader.string().map(Str)
    }
}

/// A member whose events the generic path handles (usage, an error, a finish reason, a
/// function call): missing or `null`, it is nothing; any other value declines the text where
/// it starts, before it is read (a Gemini function call's arguments would otherwise be read
/// twice, here and by the generic parse).
#[derive(Default)]
pub(crate) struct Declines;

impl Decode<'_> for Declines {
    #[inline]
    fn read(reader: &mut Reader<'_>) -> Option<Self> {
        // `nullable` passes anything but `null` to the closure, which declines it.
        reader.nullable(|_| None::<()>).map(|_| Declines)
    }

    fn missing() -> Option<Self> {
        Some(Declines)
    }
}

/// A member's value read into `slot` the first time the member comes (`seen` says whether it
/// came before): a second one declines the text.
fn read_once<'a, T: Field<'a>>(reader: &mut Reader<'a>, seen: &mut bool, slot: &mut T) -> Option<()> {
    if std::mem::replace(seen, true) {
        return None;
    }
    T::read_field(reader, slot)
}

// --- anthropic-messages: `content_block_delta` (and the head its deltas repeat): `anthropic.rs`

// --- openai-completions: a chunk with one choice whose delta carries content ------------------

// The chunk itself, and the head its stream repeats: `completions.rs`.

json_object! {
    /// Its one choice.
    struct CompletionsChoice<'a> {
        usage: Declines = "usage",
        finish_reason: Declines = "finish_reason",
        native_finish_reason: Declines = "native_finish_reason",
        delta: Option<Obj<CompletionsDelta<'a>>> = "delta",
    }
}

json_object! {
    /// The choice's delta.
    struct CompletionsDelta<'a> {
        reasoning_content: Option<Str<'a>> = "reasoning_content",
        reasoning: Option<Str<'a>> = "reasoning",
        reasoning_text: Option<Str<'a>> = "reasoning_text",
        reasoning_details: Declines = "reasoning_details",
        content: Option<Str<'a>> = "content",
        tool_calls: Option<(Obj<CompletionsToolCall<'a>>,)> = "tool_calls",
    }
}

json_object! {
    /// One tool call of a delta.
    struct CompletionsToolCall<'a> {
        index: Option<Int> = "index",
        id: Option<Str<'a>> = "id",
        function: Option<Obj<CompletionsFunction<'a>>> = "function",
        // A custom (grammar) tool call goes the general way.
        custom: Declines = "custom",
    }
}

json_object! {
    /// Its function.
    struct CompletionsFunction<'a> {
        name: Option<Str<'a>> = "name",
        arguments: Option<Str<'a>> = "arguments",
    }
}

// --- openai-responses: `response.*.delta` -------------------------------------------------------

// The delta event and the head its events repeat: `responses.rs`.

// --- google-generative-ai: a chunk with one candidate of one part -------------------------------

json_object! {
    /// A Gemini chunk without an error.
    struct GeminiChunk<'a> {
        response_id: Option<Str<'a>> = "responseId",
        error: Declines = "error",
        prompt_feedback: Declines = "promptFeedback",
        candidates: (Obj<GeminiCandidate<'a>>,) = "candidates",
        usage_metadata: Option<Obj<GeminiUsage>> = "usageMetadata",
    }
}

json_object! {
    /// Its candidate, without a finish reason.
    struct GeminiCandidate<'a> {
        content: Obj<GeminiContent<'a>> = "content",
        finish_reason: Declines = "finishReason",
    }
}

json_object! {
    /// The candidate's content: one part.
    struct GeminiContent<'a> {
        parts: (Obj<GeminiPart<'a>>,) = "parts",
    }
}

json_object! {
    /// A text or thought part.
    struct GeminiPart<'a> {
        text: Option<Str<'a>> = "text",
        thought: Option<bool> = "thought",
        thought_signature: Option<Str<'a>> = "thoughtSignature",
        function_call: Declines = "functionCall",
    }
}

json_object! {
    /// The usage counts pi-ai reads.
    struct GeminiUsage {
        prompt_token_count: Option<Int> = "promptTokenCount",
        cached_content_token_count: Option<Int> = "cachedContentTokenCount",
        thoughts_token_count: Option<Int> = "thoughtsTokenCount",
        candidates_token_count: Option<Int> = "candidatesTokenCount",
        total_token_count: Option<Int> = "totalTokenCount",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_only_as_objects_and_integers_only_as_integers() {
        let ok: Option<AnthropicDelta<'_>> =
            decode(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcd"}}"#);
        let ok = ok.expect("a delta");
        assert!(matches!(
            ok.delta.as_ref().and_then(|d| d.0.payload.as_ref()),
            Some((_, Some(Str(Cow::Borrowed("abcd")))))
        ));
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
        let text = escaped.and_then(|d| d.delta).and_then(|d| d.0.payload).and_then(|(_, text)| text).expect("a text");
        assert!(matches!(&text.0, Cow::Owned(t) if t == "a\nb\u{e9}"));
        // Two payload members: the generic path picks the one the type names.
        assert!(decode::<AnthropicDelta<'_>>(r#"{"type":"content_block_delta","delta":{"text":"a","thinking":"b"}}"#)
            .is_none());
    }

    #[test]
    fn single_element_arrays_only() {
        let two = r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#;
        assert!(decode::<CompletionsChunk<'_>>(two).is_none());
        let one = r#"{"choices":[{"delta":{"content":"a"}}],"usage":null}"#;
        assert!(decode::<CompletionsChunk<'_>>(one).is_some(), "a null usage is no usage");
        // Usage (like an error, a finish reason, a function call) is the generic path's: the
        // decode declines where its value starts.
        let with_usage = r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}"#;
        assert!(decode::<CompletionsChunk<'_>>(with_usage).is_none());
        let malformed_after = r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1} x"#;
        assert!(decode::<CompletionsChunk<'_>>(malformed_after).is_none());
    }

    /// A deterministic generator of texts near the events' shape: members the decode reads and
    /// others, values of every JSON type (and of none), escapes, odd numbers, whitespace, and
    /// random edits of the result.
    pub(super) struct Texts(pub(super) u64);

    impl Texts {
        pub(super) fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % below as u64) as usize
        }

        fn pick<'s>(&mut self, from: &[&'s str]) -> &'s str {
            from[self.next(from.len())]
        }

        fn space(&mut self) -> &'static str {
            self.pick(&["", "", "", " ", "\n", "\t ", "\r\n", "\u{a0}", "\u{feff}"])
        }

        pub(super) fn string(&mut self) -> String {
            let valid = [
                "a",
                "text_delta",
                "content_block_delta",
                "é",
                "\\n",
                "\\\"",
                "\\u00e9",
                "\\ud83d\\ude00",
                "\\/",
                "ab\\\\",
                "\\u0000",
                "😀",
            ];
            let invalid = ["\\ud83d", "\\ude00", "\\x", "\\u12", "\u{1}", "\t"];
            let mut text = String::from("\"");
            for _ in 0..self.next(4) {
                let piece = if self.next(12) > 0 { self.pick(&valid) } else { self.pick(&invalid) };
                text.push_str(piece);
            }
            text.push('"');
            text
        }

        fn value(&mut self, depth: usize) -> String {
            match self.next(if depth > 2 { 4 } else { 6 }) {
                0 => self.string(),
                1 => self
                    .pick(&[
                        "0",
                        "-0",
                        "7",
                        "-3",
                        "0.5",
                        "1e2",
                        "1E+2",
                        "01",
                        "1.",
                        "-",
                        "9007199254740992",
                        "9007199254740993",
                        "-9007199254740992",
                        "12345678901234567890",
                        ".5",
                    ])
                    .to_owned(),
                2 => self.pick(&["true", "false", "null", "nul", "tru", "NaN"]).to_owned(),
                3 => String::new(),
                4 => {
                    let items: Vec<String> = (0..self.next(3)).map(|_| self.value(depth + 1)).collect();
                    format!("[{}]", items.join(","))
                }
                _ => self.object(depth + 1),
            }
        }

        fn object(&mut self, depth: usize) -> String {
            let names = [
                "type",
                "index",
                "delta",
                "text",
                "thinking",
                "partial_json",
                "signature",
                "x",
                "t\\u0079pe",
                "choices",
                "content",
            ];
            let mut members = Vec::new();
            for _ in 0..self.next(5) {
                let name = self.pick(&names);
                let (a, b) = (self.space(), self.space());
                members.push(format!("{a}\"{name}\"{b}:{}{}", self.space(), self.value(depth)));
            }
            format!("{{{}}}", members.join(","))
        }

        /// An event: mostly the members the decode reads, with values of their type.
        fn event(&mut self) -> String {
            let mut members = Vec::new();
            if self.next(8) > 0 {
                members.push(format!("\"type\":{}", self.string()));
            }
            if self.next(2) > 0 {
                members.push(format!("\"index\":{}", self.value(3)));
            }
            if self.next(3) > 0 {
                let mut body = Vec::new();
                for name in ["type", "text", "thinking", "partial_json", "signature", "x"] {
                    if self.next(3) == 0 {
                        let value = if self.next(4) > 0 { self.string() } else { self.value(2) };
                        body.push(format!("{}\"{name}\":{value}", self.space()));
                    }
                }
                members.push(format!("\"delta\":{{{}}}", body.join(",")));
            }
            if self.next(3) == 0 {
                let other = self.object(1);
                members.push(format!("\"x\":{other}"));
            }
            self.join(members)
        }

        /// A member `name` with a value of `kind` most of the time, else any value; or none.
        fn member(&mut self, members: &mut Vec<String>, name: &str, kind: String) {
            match self.next(16) {
                0 => {}
                1 => {
                    let other = self.value(2);
                    members.push(format!("\"{name}\":{other}"));
                }
                _ => members.push(format!("\"{name}\":{kind}")),
            }
        }

        /// `[item]` mostly, sometimes with none or two, or `null`.
        fn array_of(&mut self, item: impl Fn(&mut Self) -> String) -> String {
            match self.next(16) {
                0 => "[]".to_owned(),
                1 => format!("[{},{}]", item(self), item(self)),
                2 => "null".to_owned(),
                _ => format!("[{}]", item(self)),
            }
        }

        /// The object of `members`, maybe with one more, in a rotated order.
        fn close(&mut self, mut members: Vec<String>) -> String {
            if self.next(4) == 0 {
                let other = self.value(1);
                members.push(format!("\"x\":{other}"));
            }
            self.join(members)
        }

        /// The object of `members`, in a rotated order, with random whitespace between them.
        fn join(&mut self, mut members: Vec<String>) -> String {
            let first = self.next(members.len() + 1).min(members.len());
            members.rotate_left(first);
            format!("{{{}}}", members.join(&format!(",{}", self.space())))
        }

        /// A chat-completions chunk.
        pub(super) fn completions(&mut self) -> String {
            let mut members = Vec::new();
            let (id, model) = (self.string(), self.string());
            self.member(&mut members, "id", id);
            self.member(&mut members, "model", model);
            if self.next(4) == 0 {
                let usage = self.value(1);
                members.push(format!("\"usage\":{usage}"));
            }
            let choices = self.array_of(|texts| {
                let mut choice = Vec::new();
                if texts.next(4) == 0 {
                    let finish = texts.value(2);
                    choice.push(format!("\"finish_reason\":{finish}"));
                }
                let delta = {
                    let mut delta = Vec::new();
                    for name in ["content", "reasoning", "reasoning_content", "reasoning_text"] {
                        let text = texts.string();
                        texts.member(&mut delta, name, text);
                    }
                    let calls = texts.array_of(|texts| {
                        let mut call = Vec::new();
                        let (index, id) = (texts.pick(&["0", "1", "-3", "0.5"]).to_owned(), texts.string());
                        texts.member(&mut call, "index", index);
                        texts.member(&mut call, "id", id);
                        let mut function = Vec::new();
                        let (name, arguments) = (texts.string(), texts.string());
                        texts.member(&mut function, "name", name);
                        texts.member(&mut function, "arguments", arguments);
                        let function = texts.close(function);
                        texts.member(&mut call, "function", function);
                        texts.close(call)
                    });
                    texts.member(&mut delta, "tool_calls", calls);
                    texts.close(delta)
                };
                texts.member(&mut choice, "delta", delta);
                texts.close(choice)
            });
            self.member(&mut members, "choices", choices);
            self.close(members)
        }

        /// A Gemini chunk.
        fn gemini(&mut self) -> String {
            let mut members = Vec::new();
            let id = self.string();
            self.member(&mut members, "responseId", id);
            let candidates = self.array_of(|texts| {
                let parts = texts.array_of(|texts| {
                    let mut part = Vec::new();
                    let (text, thought, signature) = (
                        texts.string(),
                        texts.pick(&["true", "false", "null", "true", "1"]).to_owned(),
                        texts.string(),
                    );
                    texts.member(&mut part, "text", text);
                    texts.member(&mut part, "thought", thought);
                    texts.member(&mut part, "thoughtSignature", signature);
                    texts.close(part)
                });
                let mut content = Vec::new();
                texts.member(&mut content, "parts", parts);
                let content = texts.close(content);
                let mut candidate = Vec::new();
                texts.member(&mut candidate, "content", content);
                texts.close(candidate)
            });
            self.member(&mut members, "candidates", candidates);
            let mut usage = Vec::new();
            for name in [
                "promptTokenCount",
                "cachedContentTokenCount",
                "thoughtsTokenCount",
                "candidatesTokenCount",
                "totalTokenCount",
            ] {
                let count = match self.next(12) {
                    0 => self.pick(&["1.5", "9007199254740993", "\"1\""]),
                    _ => self.pick(&["0", "100", "-1", "9007199254740992"]),
                }
                .to_owned();
                self.member(&mut usage, name, count);
            }
            let usage = self.close(usage);
            self.member(&mut members, "usageMetadata", usage);
            self.close(members)
        }

        /// `text` with `next(rolls) - keep` random edits (none most of the time).
        pub(super) fn edited(&mut self, mut text: String, rolls: usize, keep: usize) -> String {
            for _ in 0..self.next(rolls).saturating_sub(keep) {
                let at = self.next(text.len() + 1);
                if !text.is_char_boundary(at) {
                    continue;
                }
                match self.next(3) {
                    0 => text.insert_str(at, self.pick(&["\"", ",", "}", "]", "{", ":", "\\", " ", "0"])),
                    _ => {
                        if let Some(end) = (at + 1..=text.len()).find(|&i| text.is_char_boundary(i)) {
                            text.replace_range(at..end, "");
                        }
                    }
                }
            }
            text
        }

        /// Streams of events through a decode that keeps a head between them (`with_heads`,
        /// which renders what it decoded), each held to the whole decode (`whole`): 3,000
        /// streams of ten events, each stream on one of `heads`. `event` makes an event of the
        /// stream's head; it is used as it is, edited, or cut anywhere into the event before.
        /// Returns how many events were read after a head (`reusing`, asked before each
        /// decode) and how many of those the whole decode accepted.
        pub(super) fn check_heads<H: Default>(
            &mut self,
            heads: &[&str],
            mut event: impl FnMut(&mut Self, &str) -> String,
            reusing: impl Fn(&H, &str) -> bool,
            with_heads: impl Fn(&str, &mut H) -> Option<String>,
            whole: impl Fn(&str) -> Option<String>,
        ) -> (usize, usize) {
            let (mut reused, mut accepted) = (0, 0);
            for _ in 0..3_000 {
                let mut kept = H::default();
                let head = heads[self.next(heads.len())];
                let mut previous = String::new();
                for _ in 0..10 {
                    let new = event(self, head);
                    let text = match self.next(4) {
                        0 => {
                            let cut = self.next(previous.len() + 1);
                            match (previous.get(..cut), new.get(cut.min(new.len())..)) {
                                (Some(start), Some(rest)) => format!("{start}{rest}"),
                                _ => new,
                            }
                        }
                        1 => self.edited(new, 4, 3),
                        _ => new,
                    };
                    let reading_after_head = reusing(&kept, &text);
                    let expected = whole(&text);
                    assert_eq!(with_heads(&text, &mut kept), expected, "{text:?}");
                    reused += usize::from(reading_after_head);
                    accepted += usize::from(reading_after_head && expected.is_some());
                    previous = text;
                }
            }
            (reused, accepted)
        }

        fn text(&mut self) -> String {
            let body = if self.next(4) > 0 { self.event() } else { self.object(0) };
            let text = format!("{}{}{}", self.space(), body, self.space());
            self.edited(text, 6, 4)
        }
    }

    /// A string member of a `JSON.parse` value as the typed decode reads it.
    fn member_str<'v>(value: &'v serde_json::Value, name: &str) -> Option<&'v str> {
        value.get(name).and_then(serde_json::Value::as_str)
    }

    #[test]
    fn what_the_typed_decode_accepts_json_parse_reads_alike() {
        let mut texts = Texts(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for _ in 0..40_000 {
            let text = texts.text();
            let Some(delta) = decode::<AnthropicDelta<'_>>(&text) else { continue };
            accepted += 1;
            let value = crate::js_json::parse(&text).unwrap_or_else(|e| panic!("{text:?} accepted, JSON.parse: {e}"));
            assert!(value.is_object(), "{text:?}");
            assert_eq!(Some(&*delta.kind), member_str(&value, "type"), "{text:?}");
            let index = value.get("index").filter(|i| !i.is_null());
            assert_eq!(delta.index.map(|Int(i)| i), index.map(|i| i.as_i64().unwrap_or(i64::MIN)), "{text:?}");
            let body = value.get("delta").filter(|d| !d.is_null());
            assert_eq!(delta.delta.is_some(), body.is_some(), "{text:?}");
            if let (Some(Obj(mine)), Some(body)) = (&delta.delta, body) {
                assert_eq!(mine.kind.as_deref(), member_str(body, "type"), "{text:?}");
                for (member, name) in [
                    (AnthropicPayload::Text, "text"),
                    (AnthropicPayload::Thinking, "thinking"),
                    (AnthropicPayload::PartialJson, "partial_json"),
                    (AnthropicPayload::Signature, "signature"),
                ] {
                    assert_eq!(mine.member(member), member_str(body, name), "{text:?}: {name}");
                }
            }
        }
        // The generator reaches both ways.
        assert!((2_000..38_000).contains(&accepted), "{accepted} accepted");
    }

    /// An optional string member as the typed decode reads it: `Some(None)` for one that is
    /// missing or `null`, `None` for any other type (the decode must then have declined).
    fn optional_str<'v>(value: &'v serde_json::Value, name: &str) -> Option<Option<&'v str>> {
        match value.get(name) {
            None | Some(serde_json::Value::Null) => Some(None),
            Some(serde_json::Value::String(s)) => Some(Some(s)),
            Some(_) => None,
        }
    }

    /// The one element of an optional one-element array member.
    fn optional_single<'v>(value: &'v serde_json::Value, name: &str) -> Option<&'v serde_json::Value> {
        value.get(name).and_then(serde_json::Value::as_array).map(|items| {
            assert_eq!(items.len(), 1, "{name}: exactly one element");
            &items[0]
        })
    }

    fn is_set(value: &serde_json::Value, name: &str) -> bool {
        value.get(name).is_some_and(|v| !v.is_null())
    }

    #[test]
    fn completions_and_gemini_decodes_read_what_json_parse_reads() {
        let mut texts = Texts(0x1234_5678_9abc_def1);
        let (mut completions, mut gemini) = (0, 0);
        for _ in 0..60_000 {
            let text = texts.completions();
            let text = texts.edited(text, 8, 6);
            if let Some(chunk) = decode::<CompletionsChunk<'_>>(&text) {
                completions += 1;
                let value = crate::js_json::parse(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
                assert_eq!(optional_str(&value, "id"), Some(chunk.id.as_deref()), "{text:?}");
                assert_eq!(optional_str(&value, "model"), Some(chunk.model.as_deref()), "{text:?}");
                // Usage, an error, a finish reason: the decode declines them.
                assert!(!is_set(&value, "usage") && !is_set(&value, "error"), "{text:?}");
                let choice = optional_single(&value, "choices");
                assert_eq!(choice.is_some(), chunk.choices.is_some(), "{text:?}");
                if let (Some(choice), Some((Obj(mine),))) = (choice, &chunk.choices) {
                    assert!(!is_set(choice, "finish_reason"), "{text:?}");
                    let delta = choice.get("delta").filter(|d| !d.is_null());
                    assert_eq!(delta.is_some(), mine.delta.is_some(), "{text:?}");
                    if let (Some(delta), Some(Obj(d))) = (delta, &mine.delta) {
                        assert_eq!(optional_str(delta, "content"), Some(d.content.as_deref()), "{text:?}");
                        assert_eq!(optional_str(delta, "reasoning"), Some(d.reasoning.as_deref()), "{text:?}");
                        let call = optional_single(delta, "tool_calls");
                        assert_eq!(call.is_some(), d.tool_calls.is_some(), "{text:?}");
                        if let (Some(call), Some((Obj(c),))) = (call, &d.tool_calls) {
                            let index = call.get("index").filter(|i| !i.is_null()).map(|i| i.as_i64());
                            assert_eq!(index, c.index.map(|Int(i)| Some(i)), "{text:?}");
                            assert_eq!(optional_str(call, "id"), Some(c.id.as_deref()), "{text:?}");
                            let function = call.get("function").filter(|f| !f.is_null());
                            assert_eq!(function.is_some(), c.function.is_some(), "{text:?}");
                            if let (Some(function), Some(Obj(f))) = (function, &c.function) {
                                assert_eq!(optional_str(function, "name"), Some(f.name.as_deref()), "{text:?}");
                                assert_eq!(
                                    optional_str(function, "arguments"),
                                    Some(f.arguments.as_deref()),
                                    "{text:?}"
                                );
                            }
                        }
                    }
                }
            }
            let text = texts.gemini();
            let text = texts.edited(text, 8, 6);
            if let Some(chunk) = decode::<GeminiChunk<'_>>(&text) {
                gemini += 1;
                let value = crate::js_json::parse(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
                assert_eq!(optional_str(&value, "responseId"), Some(chunk.response_id.as_deref()), "{text:?}");
                let candidate = optional_single(&value, "candidates").expect("a candidate");
                let (Obj(mine),) = &chunk.candidates;
                let part = optional_single(&candidate["content"], "parts").expect("a part");
                let (Obj(p),) = &mine.content.0.parts;
                let declined = [(&value, "error"), (candidate, "finishReason"), (part, "functionCall")];
                assert!(declined.iter().all(|(v, name)| !is_set(v, name)), "{text:?}");
                assert_eq!(optional_str(part, "text"), Some(p.text.as_deref()), "{text:?}");
                assert_eq!(optional_str(part, "thoughtSignature"), Some(p.thought_signature.as_deref()), "{text:?}");
                assert_eq!(part.get("thought").and_then(serde_json::Value::as_bool), p.thought, "{text:?}");
                let usage = value.get("usageMetadata").filter(|u| !u.is_null());
                assert_eq!(usage.is_some(), chunk.usage_metadata.is_some(), "{text:?}");
                if let (Some(usage), Some(Obj(u))) = (usage, &chunk.usage_metadata) {
                    let count =
                        |name: &str| usage.get(name).filter(|c| !c.is_null()).map(|c| c.as_i64().expect("an integer"));
                    assert_eq!(count("promptTokenCount"), u.prompt_token_count.map(|Int(i)| i), "{text:?}");
                    assert_eq!(count("totalTokenCount"), u.total_token_count.map(|Int(i)| i), "{text:?}");
                }
            }
        }
        assert!(completions > 3_000 && gemini > 1_000, "{completions} completions, {gemini} gemini chunks read");
    }

    #[test]
    fn the_reader_accepts_exactly_the_json_that_json_parse_does() {
        let mut texts = Texts(0x2545_f491_4f6c_dd1d);
        let (mut both, mut declined) = (0, 0);
        for _ in 0..40_000 {
            let text = texts.text();
            let mut reader = Reader::new(&text);
            let read = reader.skip().is_some() && reader.end().is_some();
            let parsed = crate::js_json::parse(&text).is_ok();
            assert!(!read || parsed, "{text:?} read, but JSON.parse rejects it");
            if parsed && !read {
                // Only what the reader declines on purpose: a `\u` escape in a name, or a lone
                // surrogate.
                assert!(text.contains("\\u"), "{text:?} parsed, but the reader declined it");
                declined += 1;
            }
            both += usize::from(read);
        }
        assert!(both > 5_000 && declined > 100, "{both} read, {declined} declined");
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
