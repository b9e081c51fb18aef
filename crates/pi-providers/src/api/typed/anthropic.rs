//! The typed decode of an Anthropic `content_block_delta`, and the head a block's deltas repeat.
//!
//! # Protocol
//! The deltas of one content block are alike up to their payload's value
//! (`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`): more than
//! half of a short delta's bytes and of its decode. [`decode_delta`] keeps that head
//! ([`DeltaHeads`]): the bytes of the last delta up to its payload value, with what the decode
//! had read there (which members, the index, where the two `type` values lie). A delta whose
//! data starts with those bytes is read from its payload value on, in the state a reader of the
//! whole text is in there; equal bytes are read alike, so the result is the whole decode's. A
//! property test holds the two to each other.

use std::ops::Range;

use super::head::{range_in, Head};
use super::reader::Reader;
use super::{read_once, Decode, Int, Obj, Object, Str};

/// `{"type": "content_block_delta", "index": N, "delta": {...}}`.
#[derive(Default)]
pub(crate) struct AnthropicDelta<'a> {
    pub kind: Str<'a>,
    pub index: Option<Int>,
    pub delta: Option<Obj<AnthropicDeltaBody<'a>>>,
}

/// The `delta` of a `content_block_delta`: its `type` and its one payload member (`text`,
/// `thinking`, `partial_json` or `signature`). A body with two payload members is declined
/// (the generic path then picks the member its type names). One slot instead of a field per
/// member keeps the decoded event small enough to move without a `memcpy` call.
#[derive(Default)]
pub(crate) struct AnthropicDeltaBody<'a> {
    pub kind: Option<Str<'a>>,
    pub(super) payload: Option<(AnthropicPayload, Option<Str<'a>>)>,
}

/// A payload member of an Anthropic delta body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnthropicPayload {
    Text,
    Thinking,
    PartialJson,
    Signature,
}

impl AnthropicPayload {
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            "text" => Self::Text,
            "thinking" => Self::Thinking,
            "partial_json" => Self::PartialJson,
            "signature" => Self::Signature,
            _ => return None,
        })
    }

    /// The payload member a delta of type `kind` carries (`text_delta` → `text`, ...).
    pub(crate) fn of_kind(kind: &str) -> Option<Self> {
        Some(match kind {
            "text_delta" => Self::Text,
            "thinking_delta" => Self::Thinking,
            "input_json_delta" => Self::PartialJson,
            "signature_delta" => Self::Signature,
            _ => return None,
        })
    }

    /// The member's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Thinking => "thinking",
            Self::PartialJson => "partial_json",
            Self::Signature => "signature",
        }
    }
}

impl AnthropicDeltaBody<'_> {
    /// The string of payload member `member` (`None` when it is missing or `null`).
    pub(crate) fn member(&self, member: AnthropicPayload) -> Option<&str> {
        match &self.payload {
            Some((found, value)) if *found == member => value.as_deref(),
            _ => None,
        }
    }
}

/// Which members were read so far, so that a duplicate declines the text (the body's
/// payload members share one slot: a second of any of them declines).
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    kind: bool,
    index: bool,
    delta: bool,
    body_kind: bool,
}

/// One member of the event: its value read into `out`. `payload_at` is told where the
/// body's first payload value starts, for the head.
fn member<'a>(
    reader: &mut Reader<'a>,
    name: &str,
    out: &mut AnthropicDelta<'a>,
    seen: &mut Seen,
    payload_at: &mut Option<(usize, Seen, AnthropicPayload)>,
) -> Option<()> {
    match name {
        "type" => read_once(reader, &mut seen.kind, &mut out.kind),
        "index" => read_once(reader, &mut seen.index, &mut out.index),
        "delta" => {
            if std::mem::replace(&mut seen.delta, true) {
                return None;
            }
            reader
                .nullable(|reader| {
                    let body = &mut out.delta.insert(Obj::default()).0;
                    reader.object(|reader, name| {
                        if let (Some(payload), None) = (AnthropicPayload::of(name), &body.payload) {
                            *payload_at = Some((reader.position(), *seen, payload));
                        }
                        body_member(reader, name, body, seen)
                    })
                })
                .map(drop)
        }
        _ => reader.skip(),
    }
}

/// One member of the body.
fn body_member<'a>(
    reader: &mut Reader<'a>,
    name: &str,
    body: &mut AnthropicDeltaBody<'a>,
    seen: &mut Seen,
) -> Option<()> {
    match AnthropicPayload::of(name) {
        Some(payload) if body.payload.is_none() => {
            body.payload = Some((payload, <Option<Str<'a>>>::read(reader)?));
            Some(())
        }
        Some(_) => None,
        None if name == "type" => read_once(reader, &mut seen.body_kind, &mut body.kind),
        None => reader.skip(),
    }
}

impl<'a> Object<'a> for AnthropicDelta<'a> {
    fn read_fields(reader: &mut Reader<'a>, out: &mut Self) -> Option<()> {
        let mut seen = Seen::default();
        reader.object(|reader, name| member(reader, name, out, &mut seen, &mut None))?;
        (seen.kind).then_some(())
    }
}

/// The head of the last delta a stream's decode read whole: see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct DeltaHeads {
    /// The delta's bytes up to its payload value.
    head: Head,
    /// What was read there.
    seen: Seen,
    payload: Option<AnthropicPayload>,
    kind: Option<Range<usize>>,
    index: Option<Int>,
    body_kind: Option<Range<usize>>,
}

/// The typed decode of a delta's data (as [`super::decode`]), from its payload value on when it
/// starts with the head of the delta before.
pub(crate) fn decode_delta<'a>(data: &'a str, heads: &mut DeltaHeads) -> Option<AnthropicDelta<'a>> {
    let mut out = AnthropicDelta::default();
    if let (Some(found), Some(payload)) = (heads.head.find(data), heads.payload) {
        let mut seen = heads.seen;
        out.kind = found.value(data, &heads.kind)?.unwrap_or_default();
        out.index = heads.index;
        let mut reader = Reader::resume(data, found.at, 2);
        let body = &mut out.delta.insert(Obj::default()).0;
        body.kind = found.value(data, &heads.body_kind)?;
        reader.members_from(payload.name(), |reader, name| body_member(reader, name, body, &mut seen))?;
        reader.rest_of_object(|reader, name| member(reader, name, &mut out, &mut seen, &mut None))?;
        reader.end()?;
        return seen.kind.then_some(out);
    }
    let mut reader = Reader::new(data);
    let mut seen = Seen::default();
    let mut payload_at = None;
    reader.object(|reader, name| member(reader, name, &mut out, &mut seen, &mut payload_at))?;
    reader.end()?;
    if !seen.kind {
        return None;
    }
    heads.remember(data, payload_at, &out);
    Some(out)
}

impl DeltaHeads {
    /// Keep the head of `data` (read whole into `delta`) up to its payload value, with the
    /// state the decode had there (its strings borrowed from the head); else keep none.
    fn remember(
        &mut self,
        data: &str,
        payload_at: Option<(usize, Seen, AnthropicPayload)>,
        delta: &AnthropicDelta<'_>,
    ) {
        let state = payload_at.and_then(|(at, seen, payload)| {
            // The event's `type` if read by then, and the body's.
            let kind = if seen.kind { range_in(data, at, Some(&delta.kind))? } else { None };
            let body_kind = range_in(data, at, delta.delta.as_ref().and_then(|Obj(body)| body.kind.as_ref()))?;
            Some((at, seen, payload, kind, body_kind))
        });
        let end = state.map(|(at, seen, payload, kind, body_kind)| {
            (self.seen, self.payload, self.kind, self.body_kind) = (seen, Some(payload), kind, body_kind);
            self.index = delta.index.filter(|_| seen.index);
            at
        });
        self.head.keep(data, end, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::typed::decode;
    use crate::api::typed::tests::Texts;

    /// Everything a decoded delta holds, as text.
    fn render(delta: &AnthropicDelta<'_>) -> String {
        let body = delta.delta.as_ref().map(|Obj(body)| {
            let payload = body.payload.as_ref().map(|(member, value)| (member, value.as_deref()));
            format!("{:?} {:?}", body.kind.as_deref(), payload)
        });
        format!("{:?} {:?} {:?}", &*delta.kind, delta.index.map(|Int(i)| i), body)
    }

    /// Heads a block's deltas may share: members in any order, missing or `null`, escapes,
    /// whitespace, a duplicate to come.
    const HEADS: [&str; 9] = [
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"#,
        r#"{ "type" : "content_block_delta" , "index" : 3 , "delta" : { "type" : "thinking_delta" , "thinking" : "#,
        r#"{"index":1,"delta":{"type":"input_json_delta","partial_json":"#,
        r#"{"type":"content_block_delta","delta":{"signature":"#,
        r#"{"type":"content_block_d\u0065lta","index":0,"delta":{"type":"text_delta","text":"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"t\u0065xt_delta","text":"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":null,"text":"#,
        r#"{"type":"content_block_delta","index":0,"index":1,"delta":{"text":"#,
        r#"{"delta":{"x":[1,{"text":2}],"text":"#,
    ];

    /// What may follow a head: the payload's value and the rest of both objects, with members
    /// after the payload (another payload, a second `type` or `index`, others).
    const TAILS: [&str; 8] = [
        "}}",
        "}}",
        ",\"type\":\"text_delta\"}}",
        "},\"type\":\"content_block_delta\"}",
        ",\"thinking\":\"b\"}}",
        "},\"index\":2}",
        "}, \"x\" : null }",
        "}}x",
    ];

    /// A block's deltas decoded with the head of the delta before read as the whole decode
    /// reads them (see `Texts::check_heads`): a head, a generated value, one of `TAILS`.
    #[test]
    fn a_delta_read_after_the_head_decodes_as_the_whole_delta() {
        let (reused, accepted) = Texts(0xa17e_12d5_2026_1204).check_heads(
            &HEADS,
            |texts, head| {
                let value = match texts.next(8) {
                    0 => "null".to_owned(),
                    1 => "7".to_owned(),
                    _ => texts.string(),
                };
                format!("{head}{value}{}", TAILS[texts.next(TAILS.len())])
            },
            |heads: &DeltaHeads, text| heads.head.find(text).is_some(),
            |text, heads| decode_delta(text, heads).as_ref().map(render),
            |text| decode::<AnthropicDelta<'_>>(text).as_ref().map(render),
        );
        assert!(reused > 5_000 && accepted > 2_000, "{reused} read after a head, {accepted} of them accepted");
    }
}
