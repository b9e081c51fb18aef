//! The head an event stream's events repeat, shared by the decodes that read an event from it on.
//!
//! # Protocol
//! A decode that reads an event whole notes where the value it reads events from starts (the
//! completions chunk's `choices`, the Anthropic delta's payload, the Responses delta's
//! `delta`) and keeps the event's bytes before it ([`Head::keep`]), with the state it had
//! there (its own type). The next event is read from that value on if it has the same bytes
//! ([`Head::find`]): a reader of equal bytes ends in the same state. A head may have one hole:
//! the value of a member the decode passes over (the Responses `sequence_number`), which may
//! hold any value the decode would pass over; places after it move with its length.

use std::borrow::Cow;
use std::ops::Range;

use super::reader::Reader;
use super::Str;

/// The bytes of the last event read whole, up to the value events are read from; see the
/// [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Head {
    /// Empty when there is none to read after.
    bytes: Vec<u8>,
    /// A value among `bytes` that may differ, and the depth it is read at.
    hole: Option<(Range<usize>, u32)>,
}

/// An event that has the head's bytes: where it goes on after them.
pub(crate) struct Found {
    pub at: usize,
    /// Where the hole ended in the head and where it ends in the event.
    moved: Option<(usize, usize)>,
}

impl Head {
    /// Keep `data`'s bytes up to `end` (with `hole`, which must lie before it); or none, when
    /// `end` is `None`.
    pub(crate) fn keep(&mut self, data: &str, end: Option<usize>, hole: Option<(Range<usize>, u32)>) {
        self.bytes.clear();
        self.hole = None;
        if let Some(bytes) = end.and_then(|end| data.as_bytes().get(..end)) {
            self.bytes.extend_from_slice(bytes);
            self.hole = hole.filter(|(hole, _)| hole.end <= bytes.len());
        }
    }

    /// Where `data` goes on after the head, if it has the head's bytes (and in the hole, a value
    /// the decode passes over).
    #[inline]
    pub(crate) fn find(&self, data: &str) -> Option<Found> {
        if self.bytes.is_empty() {
            return None;
        }
        let bytes = data.as_bytes();
        let Some((hole, depth)) = &self.hole else {
            return bytes.starts_with(&self.bytes).then_some(Found { at: self.bytes.len(), moved: None });
        };
        if !bytes.starts_with(self.bytes.get(..hole.start)?) {
            return None;
        }
        let mut reader = Reader::resume(data, hole.start, *depth);
        reader.skip()?;
        let end = reader.position();
        let rest = self.bytes.get(hole.end..)?;
        bytes.get(end..)?.starts_with(rest).then_some(Found { at: end + rest.len(), moved: Some((hole.end, end)) })
    }
}

impl Found {
    /// The string at `range` of the head (see [`range_in`]), in the event: `Some(None)` for no
    /// value.
    #[inline]
    pub(crate) fn value<'a>(&self, data: &'a str, range: &Option<Range<usize>>) -> Option<Option<Str<'a>>> {
        let Some(range) = range else { return Some(None) };
        let range = match self.moved {
            // A place after the hole moves by the difference of the two values' lengths.
            Some((old, new)) if range.start >= old => range.start - old + new..range.end - old + new,
            _ => range.clone(),
        };
        data.get(range).map(|value| Some(Str(Cow::Borrowed(value))))
    }
}

/// Where a string value decoded from `data` lies in it, for a head that ends at `head` to
/// find it again in the next event: `Some(None)` for no value, `None` for one that is not
/// borrowed from `data` (it had escapes) or ends beyond the head.
pub(crate) fn range_in(data: &str, head: usize, value: Option<&Str<'_>>) -> Option<Option<Range<usize>>> {
    let Some(Str(value)) = value else { return Some(None) };
    let Cow::Borrowed(value) = value else { return None };
    let start = (value.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
    let end = start.checked_add(value.len())?;
    (end <= head).then_some(Some(start..end))
}
