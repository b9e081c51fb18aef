//! The typed decode of a chat-completions chunk, and the head a stream's chunks repeat.
//!
//! # Protocol
//! Every chunk of a chat-completions stream starts with the same members (`id`, `object`,
//! `created`, `model`, `system_fingerprint`, ...) before its `choices`: two thirds of a short
//! chunk's bytes, and most of its decode. [`decode_chunk`] keeps that head ([`ChunkHeads`]):
//! the bytes of the last chunk up to its `choices` value, with where its `id` and `model`
//! values lie. A chunk whose data starts with those bytes is read from its `choices` value on,
//! as a reader of the whole text would be there: inside the top-level object, with `id` and
//! `model` read (at the same places, so borrowed from this chunk) and no other member the
//! decode keeps. Equal bytes are read alike, so the result is the whole decode's; a property
//! test holds the two to each other.

use std::ops::Range;

use super::head::{range_in, Head};
use super::reader::Reader;
use super::{read_once, CompletionsChoice, Declines, Obj, Object, Str};

/// A chat-completions chunk (the generic path takes one with usage or an error).
#[derive(Default)]
pub(crate) struct CompletionsChunk<'a> {
    pub id: Option<Str<'a>>,
    pub model: Option<Str<'a>>,
    pub usage: Declines,
    pub error: Declines,
    pub choices: Option<(Obj<CompletionsChoice<'a>>,)>,
}

/// Which members of a chunk were read, so that a duplicate declines the text.
#[derive(Clone, Copy, Default)]
struct Seen {
    id: bool,
    model: bool,
    usage: bool,
    error: bool,
    choices: bool,
}

/// One member of a chunk: its value read into `out`.
fn member<'a>(reader: &mut Reader<'a>, name: &str, out: &mut CompletionsChunk<'a>, seen: &mut Seen) -> Option<()> {
    match name {
        "id" => read_once(reader, &mut seen.id, &mut out.id),
        "model" => read_once(reader, &mut seen.model, &mut out.model),
        "usage" => read_once(reader, &mut seen.usage, &mut out.usage),
        "error" => read_once(reader, &mut seen.error, &mut out.error),
        "choices" => read_once(reader, &mut seen.choices, &mut out.choices),
        _ => reader.skip(),
    }
}

impl<'a> Object<'a> for CompletionsChunk<'a> {
    fn read_fields(reader: &mut Reader<'a>, out: &mut Self) -> Option<()> {
        let mut seen = Seen::default();
        reader.object(|reader, name| member(reader, name, out, &mut seen))
    }
}

/// The head of the last chunk a stream's decode read whole: see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct ChunkHeads {
    /// The chunk's bytes up to its `choices` value.
    head: Head,
    id: Option<Range<usize>>,
    model: Option<Range<usize>>,
}

/// The typed decode of a chunk's data (as [`super::decode`]), from its `choices` value on when
/// it starts with the head of the chunk before.
pub(crate) fn decode_chunk<'a>(data: &'a str, heads: &mut ChunkHeads) -> Option<CompletionsChunk<'a>> {
    let mut out = CompletionsChunk::default();
    if let Some(found) = heads.head.find(data) {
        out.id = found.value(data, &heads.id)?;
        out.model = found.value(data, &heads.model)?;
        let mut seen = Seen { id: heads.id.is_some(), model: heads.model.is_some(), ..Seen::default() };
        let mut reader = Reader::resume(data, found.at, 1);
        reader.members_from("choices", |reader, name| member(reader, name, &mut out, &mut seen))?;
        reader.end()?;
        return Some(out);
    }
    // The whole text, noting where its `choices` value starts.
    let mut reader = Reader::new(data);
    let mut seen = Seen::default();
    let mut head = None;
    reader.object(|reader, name| {
        if name == "choices" && !seen.choices && !seen.usage && !seen.error {
            head = Some(reader.position());
        }
        member(reader, name, &mut out, &mut seen)
    })?;
    reader.end()?;
    heads.remember(data, head, &out);
    Some(out)
}

impl ChunkHeads {
    /// Keep the head of `data` (read whole into `chunk`) up to `head`, if its kept members are
    /// borrowed from it; else keep none.
    fn remember(&mut self, data: &str, head: Option<usize>, chunk: &CompletionsChunk<'_>) {
        let ranges = head.and_then(|head| {
            Some((range_in(data, head, chunk.id.as_ref())?, range_in(data, head, chunk.model.as_ref())?))
        });
        let end = ranges.and_then(|(id, model)| {
            (self.id, self.model) = (id, model);
            head
        });
        self.head.keep(data, end, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::typed::tests::Texts;
    use crate::api::typed::{decode, Int};

    /// Everything a decoded chunk holds, as text.
    fn render(chunk: &CompletionsChunk<'_>) -> String {
        let text = |value: &Option<Str<'_>>| format!("{:?}", value.as_deref());
        let mut out = format!("id {} model {}", text(&chunk.id), text(&chunk.model));
        if let Some((Obj(choice),)) = &chunk.choices {
            out += " choice";
            if let Some(Obj(delta)) = &choice.delta {
                out += &format!(
                    " delta {} {} {} {}",
                    text(&delta.content),
                    text(&delta.reasoning),
                    text(&delta.reasoning_content),
                    text(&delta.reasoning_text),
                );
                if let Some((Obj(call),)) = &delta.tool_calls {
                    let function = call.function.as_ref().map(|Obj(f)| (text(&f.name), text(&f.arguments)));
                    out += &format!(" call {:?} {} {:?}", call.index.map(|Int(i)| i), text(&call.id), function);
                }
            }
        }
        out
    }

    /// Heads a stream's chunks may share: ids and models plain, escaped or missing, other
    /// members, `usage` or `error` before `choices`, whitespace, a duplicate `id` to come.
    const HEADS: [&str; 8] = [
        r#"{"id":"chatcmpl-A","object":"chat.completion.chunk","created":1767225601,"model":"gpt-4o-mini","#,
        r#"{ "id" : "chatcmpl-B" , "model":"m1", "system_fingerprint":"fp_1" , "#,
        r#"{"object":"chat.completion.chunk","model":"m\u00e9","#,
        r#"{"id":"x","usage":null,"#,
        r#"{"created":1,"#,
        r#"{"id":"chatcmpl-C","model":"m2","id":"again","#,
        r#"{"model":null,"id":"chatcmpl-D","error":{"message":"x"},"#,
        r#"{"id":"chatcmpl-E","model":"m3","choices":[],"#,
    ];

    /// A stream's chunks decoded with the head of the chunk before read as the whole decode
    /// reads them (see `Texts::check_heads`): chunks of one head and members after it of the
    /// stream's usual shape (strings generated, with escapes and sometimes an invalid one) or
    /// of any shape (a generated chunk's members from its `choices` on).
    #[test]
    fn a_chunk_read_after_the_head_decodes_as_the_whole_chunk() {
        let (reused, accepted) = Texts(0x5eed_c0de_2026_1204).check_heads(
            &HEADS,
            |texts, head| {
                let members = match texts.next(3) {
                    0 => {
                        let generated = texts.completions();
                        generated.find("\"choices\"").map_or(generated.clone(), |at| generated[at..].to_owned())
                    }
                    _ => {
                        let field = ["content", "reasoning", "reasoning_content"][texts.next(3)];
                        // A finish reason declines the decode: one chunk in four has one.
                        let finish = ["null", "null", "null", "\"stop\""][texts.next(4)];
                        let more =
                            ["", ",\"usage\":null", ",\"usage\":{}", ",\"id\":\"z\"", ",\"x\":[1]"][texts.next(5)];
                        let value = texts.string();
                        format!(
                            "\"choices\":[{{\"index\":0,\"delta\":{{\"{field}\":{value}}},\"logprobs\":null,\"finish_reason\":{finish}}}]{more}}}"
                        )
                    }
                };
                format!("{head}{members}")
            },
            |heads: &ChunkHeads, text| heads.head.find(text).is_some(),
            |text, heads| decode_chunk(text, heads).as_ref().map(render),
            |text| decode::<CompletionsChunk<'_>>(text).as_ref().map(render),
        );
        assert!(reused > 5_000 && accepted > 2_000, "{reused} read after a head, {accepted} of them accepted");
    }
}
