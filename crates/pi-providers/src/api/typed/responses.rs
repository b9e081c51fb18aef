//! The typed decode of a Responses API delta event, and the head its events repeat.
//!
//! # Protocol
//! The delta events of one output item are alike up to their `delta` value
//! (`{"type":"response.output_text.delta","sequence_number":17,"item_id":"msg_…",
//! "output_index":0,"content_index":0,"delta":`) but for `sequence_number`, which counts every
//! event of the stream. [`decode_event`] keeps that head ([`EventHeads`]): the bytes of the last
//! event up to its `delta` value, the `sequence_number` value among them as a hole, and what the
//! decode had read there. An event that has the head's bytes before and after the hole, and any
//! value in it, is read from its `delta` value on: the decode passes over `sequence_number`
//! like any member it does not keep, so the value in the hole changes nothing it holds, and
//! equal bytes elsewhere are read alike. A property test holds this to the whole decode.

use std::ops::Range;

use super::head::{range_in, Head};
use super::reader::Reader;
use super::{read_once, Declines, Int, Object, Str};

/// `{"type": "response.output_text.delta", "output_index": N, "delta": "..."}` and the other
/// delta events (the generic path takes one with an error).
#[derive(Default)]
pub(crate) struct ResponsesDelta<'a> {
    pub kind: Str<'a>,
    pub output_index: Int,
    pub delta: Option<Str<'a>>,
    pub error: Declines,
}

/// Which members were read so far, so that a duplicate declines the text.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    kind: bool,
    output_index: bool,
    delta: bool,
    error: bool,
}

/// What the whole decode notes for the head: where the first `sequence_number` value lies,
/// and where the `delta` value starts with what was read before it.
#[derive(Default)]
struct Marks {
    hole: Option<Range<usize>>,
    delta: Option<(usize, Seen)>,
}

/// One member of the event: its value read into `out`. Inlined into each decode (a handful of
/// members per event, each read through this match).
#[inline(always)]
fn member<'a>(
    reader: &mut Reader<'a>,
    name: &str,
    out: &mut ResponsesDelta<'a>,
    seen: &mut Seen,
    marks: &mut Marks,
) -> Option<()> {
    match name {
        "type" => read_once(reader, &mut seen.kind, &mut out.kind),
        "output_index" => read_once(reader, &mut seen.output_index, &mut out.output_index),
        "delta" => {
            if marks.delta.is_none() {
                marks.delta = Some((reader.position(), *seen));
            }
            read_once(reader, &mut seen.delta, &mut out.delta)
        }
        "error" => read_once(reader, &mut seen.error, &mut out.error),
        "sequence_number" if marks.hole.is_none() => {
            let start = reader.position();
            reader.skip()?;
            marks.hole = Some(start..reader.position());
            Some(())
        }
        _ => reader.skip(),
    }
}

/// Whether the required members were read.
fn complete(seen: &Seen) -> bool {
    seen.kind && seen.output_index
}

impl<'a> Object<'a> for ResponsesDelta<'a> {
    fn read_fields(reader: &mut Reader<'a>, out: &mut Self) -> Option<()> {
        let mut seen = Seen::default();
        reader.object(|reader, name| member(reader, name, out, &mut seen, &mut Marks::default()))?;
        complete(&seen).then_some(())
    }
}

/// The head of the last event a stream's decode read whole: see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct EventHeads {
    /// The event's bytes up to its `delta` value, its `sequence_number` value a hole.
    head: Head,
    /// What was read before the `delta` value.
    seen: Seen,
    kind: Option<Range<usize>>,
    output_index: Int,
}

/// The typed decode of an event's data (as [`super::decode`]), from its `delta` value on when it
/// has the head of the event before.
pub(crate) fn decode_event<'a>(data: &'a str, heads: &mut EventHeads) -> Option<ResponsesDelta<'a>> {
    let mut out = ResponsesDelta::default();
    let mut seen = Seen::default();
    let mut marks = Marks::default();
    if let Some(found) = heads.head.find(data) {
        seen = heads.seen;
        out.kind = found.value(data, &heads.kind)?.unwrap_or_default();
        out.output_index = heads.output_index;
        let mut reader = Reader::resume(data, found.at, 1);
        reader.members_from("delta", |reader, name| member(reader, name, &mut out, &mut seen, &mut marks))?;
        reader.end()?;
    } else {
        let mut reader = Reader::new(data);
        reader.object(|reader, name| member(reader, name, &mut out, &mut seen, &mut marks))?;
        reader.end()?;
        heads.remember(data, marks, &out);
    }
    complete(&seen).then_some(out)
}

impl EventHeads {
    /// Keep the head of `data` (read whole into `event`) up to its `delta` value, with the state
    /// the decode had there (its `type` borrowed from the head); else keep none.
    fn remember(&mut self, data: &str, marks: Marks, event: &ResponsesDelta<'_>) {
        let state = marks.delta.filter(|(_, seen)| !seen.error).and_then(|(at, seen)| {
            let kind = if seen.kind { range_in(data, at, Some(&event.kind))? } else { None };
            Some((at, seen, kind))
        });
        let end = state.map(|(at, seen, kind)| {
            (self.seen, self.kind) = (seen, kind);
            self.output_index = if seen.output_index { event.output_index } else { Int::default() };
            at
        });
        self.head.keep(data, end, marks.hole.map(|hole| (hole, 1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::typed::decode;
    use crate::api::typed::tests::Texts;

    /// Everything a decoded event holds, as text.
    fn render(event: &ResponsesDelta<'_>) -> String {
        format!("{:?} {:?} {:?}", &*event.kind, event.output_index, event.delta.as_deref())
    }

    /// Heads an item's events may share, `{}` where the sequence number goes: members in any
    /// order, missing, escaped, duplicated, an error, the number after the delta or twice.
    const HEADS: [&str; 9] = [
        r#"{"type":"response.output_text.delta","sequence_number":{},"item_id":"msg_1","output_index":0,"content_index":0,"delta":"#,
        r#"{ "type" : "response.reasoning_summary_text.delta" , "sequence_number" : {} , "output_index" : 2 , "delta" : "#,
        r#"{"sequence_number":{},"output_index":1,"type":"response.function_call_arguments.delta","delta":"#,
        r#"{"type":"response.output_text.delta","output_index":0,"delta":"#,
        r#"{"type":"response.output_text.d\u0065lta","sequence_number":{},"output_index":0,"delta":"#,
        r#"{"type":"response.output_text.delta","sequence_number":{},"output_index":0,"output_index":1,"delta":"#,
        r#"{"type":"response.output_text.delta","sequence_number":{},"error":null,"output_index":0,"delta":"#,
        r#"{"type":"response.output_text.delta","sequence_number":{},"x":{},"output_index":0,"delta":"#,
        r#"{"sequence_number":{},"delta":"#,
    ];

    /// What follows a head: the delta's value and the rest, with members after it (another
    /// `delta`, a `sequence_number`, the required members, others).
    const TAILS: [&str; 7] = [
        "}",
        ",\"logprobs\":[]}",
        ",\"sequence_number\":5}",
        ",\"delta\":\"b\"}",
        ",\"output_index\":3,\"type\":\"x\"}",
        ",\"obfuscation\":\"q\"}",
        "} x",
    ];

    /// Sequence numbers, valid JSON values or not.
    const NUMBERS: [&str; 9] = ["7", "8", "19", "123456", "-1", "0.5", "\"s\"", "01", ""];

    /// An item's events decoded with the head of the event before read as the whole decode
    /// reads them (see `Texts::check_heads`): a head with any sequence number, a generated
    /// delta, one of `TAILS`.
    #[test]
    fn an_event_read_after_the_head_decodes_as_the_whole_event() {
        let (reused, accepted) = Texts(0x2e59_0ae5_2026_1204).check_heads(
            &HEADS,
            |texts, head| {
                let head = head.replacen("{}", NUMBERS[texts.next(NUMBERS.len())], 1);
                let value = match texts.next(8) {
                    0 => "null".to_owned(),
                    1 => "[1]".to_owned(),
                    _ => texts.string(),
                };
                format!("{head}{value}{}", TAILS[texts.next(TAILS.len())])
            },
            |heads: &EventHeads, text| heads.head.find(text).is_some(),
            |text, heads| decode_event(text, heads).as_ref().map(render),
            |text| decode::<ResponsesDelta<'_>>(text).as_ref().map(render),
        );
        assert!(reused > 5_000 && accepted > 2_000, "{reused} read after a head, {accepted} of them accepted");
    }
}
