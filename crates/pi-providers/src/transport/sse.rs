//! Byte-level server-sent-event decoding.
//!
//! Network chunks are never decoded on their own: bytes are buffered until a line (or, for
//! Gemini, an event delimiter) is complete, and only complete lines are decoded as UTF-8,
//! with invalid sequences replaced by U+FFFD the way `TextDecoder` does. Line breaks are
//! `\n`, `\r` and `\r\n`, also when `\r` and `\n` arrive in different chunks, as in pi-ai's
//! shared decoder (`utils/sse.js`, which reads Anthropic, Codex, Mistral and pi-messages
//! streams) and the OpenAI SDK. A byte-order mark at the start of the stream is dropped, as `TextDecoder` drops it.

use std::borrow::Cow;

/// Longest event-stream line accepted, in bytes.
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// Longest event (all its lines, up to the blank line that ends it) accepted, in bytes.
pub const MAX_EVENT_BYTES: usize = 32 << 20;
/// Buffer capacity an [`SseDecoder`] keeps between chunks, in bytes.
pub const RETAINED_BYTES: usize = 4 << 10;

/// The most of a network chunk an adapter hands its decoder at once (see [`piece_len`]).
const PIECE_BYTES: usize = RETAINED_BYTES / 2;

/// How many bytes of `input`, the rest of a network chunk, to hand an [`SseDecoder`] before
/// taking its events: up to [`PIECE_BYTES`], ending just after a `\n` (the first one past the
/// limit when there is none before it), or all of it. A decoder fed a chunk whole holds the
/// whole chunk (HTTP reads grow to hundreds of kilobytes), and growing its buffer to that size
/// after each shrink back to [`RETAINED_BYTES`] took fresh pages from the kernel for every chunk
/// (a tenth of a completions stream's time in page faults). A piece ends after a line break,
/// where neither a `\r\n` nor a UTF-8 sequence can be cut, so the decoder sees the lines and
/// characters it would see in the whole chunk.
pub(crate) fn piece_len(input: &[u8]) -> usize {
    piece_len_within(input, PIECE_BYTES)
}

fn piece_len_within(input: &[u8], limit: usize) -> usize {
    if input.len() <= limit {
        return input.len();
    }
    match memchr::memrchr(b'\n', &input[..limit]) {
        Some(at) => at + 1,
        None => memchr::memchr(b'\n', &input[limit..]).map_or(input.len(), |at| limit + at + 1),
    }
}

/// Caps on one line and one event of an event stream, checked on raw network chunks before
/// any framing, so a server cannot make a decoder buffer without bound.
///
/// An event ends at `\n\n`, `\r\r` or `\r\n\r\n` (the delimiters every framer here
/// honours); a line ends at `\n` or `\r`. Linear in the input.
#[derive(Debug)]
pub struct FrameGuard {
    max_line: usize,
    max_event: usize,
    line: usize,
    event: usize,
    /// The current run of consecutive line-break bytes (at most the last four).
    breaks: [u8; 4],
    run: usize,
}

impl Default for FrameGuard {
    fn default() -> Self {
        Self::new(MAX_LINE_BYTES, MAX_EVENT_BYTES)
    }
}

impl FrameGuard {
    /// A guard with the given caps in bytes.
    pub fn new(max_line: usize, max_event: usize) -> Self {
        Self { max_line, max_event, line: 0, event: 0, breaks: [0; 4], run: 0 }
    }

    /// Account for one chunk; `Err` with the error text once a cap is exceeded.
    ///
    /// The caps are checked as each byte counts, so the verdict does not depend on how the
    /// network split the bytes.
    pub fn check(&mut self, chunk: &[u8]) -> Result<(), String> {
        // A chunk too short to reach either cap from where the counts stand cannot exceed one
        // at any byte (the counts only grow by its bytes, or restart), so only the state at its
        // end is needed, and that depends on its last line break and last event end alone:
        // found from the end, they are a few bytes away in an event stream, where the walk
        // through every line break would cost work per line.
        let fits = |count: usize, cap: usize| count.checked_add(chunk.len()).is_some_and(|end| end <= cap);
        if chunk.is_empty() {
            return Ok(());
        }
        if fits(self.line, self.max_line) && fits(self.event, self.max_event) {
            self.skip(chunk);
            return Ok(());
        }
        self.check_each(chunk)
    }

    /// [`FrameGuard::check`] of a chunk that exceeds no cap: the state after it, from its end.
    fn skip(&mut self, chunk: &[u8]) {
        let is_break = |byte: &u8| matches!(byte, b'\n' | b'\r');
        let Some(last) = memchr::memrchr2(b'\n', b'\r', chunk) else {
            self.run = 0;
            self.line += chunk.len();
            self.event += chunk.len();
            return;
        };
        self.line = chunk.len() - last - 1;
        let before = (self.breaks, self.run);
        // Runs of line breaks from the last one back: the state after a run follows from the
        // run's bytes and, for a run that starts the chunk, the run before the chunk (after
        // text a run starts empty). The last run that ends an event sets the event count.
        let mut end = last + 1;
        let mut trailing = true;
        loop {
            let start = chunk[..end].iter().rposition(|b| !is_break(b)).map_or(0, |text| text + 1);
            let (mut breaks, mut run) = if start == 0 { before } else { ([0; 4], 0) };
            let mut event_end = None;
            for (offset, &byte) in chunk[start..end].iter().enumerate() {
                if step(&mut breaks, &mut run, byte) {
                    event_end = Some(start + offset + 1);
                }
            }
            if trailing {
                // The chunk's last run is the guard's run from now on (`run` is 0 after text
                // that follows it).
                (self.breaks, self.run) = if end == chunk.len() { (breaks, run) } else { ([0; 4], 0) };
                trailing = false;
            }
            if let Some(event_end) = event_end {
                self.event = chunk.len() - event_end;
                return;
            }
            match memchr::memrchr2(b'\n', b'\r', &chunk[..start]) {
                Some(previous) if start > 0 => end = previous + 1,
                _ => break,
            }
        }
        self.event += chunk.len();
    }

    /// [`FrameGuard::check`] byte by byte (each line break in turn).
    fn check_each(&mut self, chunk: &[u8]) -> Result<(), String> {
        let mut from = 0;
        for index in memchr::memchr2_iter(b'\n', b'\r', chunk) {
            self.text(index - from)?;
            self.grow_event(1)?;
            self.line_break(chunk[index]);
            from = index + 1;
        }
        self.text(chunk.len() - from)
    }

    fn text(&mut self, len: usize) -> Result<(), String> {
        if len == 0 {
            return Ok(());
        }
        self.run = 0;
        self.line = self.line.saturating_add(len);
        if self.line > self.max_line {
            return Err(format!(
                "Server-sent event line longer than {} bytes without a line break (pi caps lines at {} MiB)",
                self.max_line,
                self.max_line >> 20
            ));
        }
        self.grow_event(len)
    }

    fn grow_event(&mut self, len: usize) -> Result<(), String> {
        self.event = self.event.saturating_add(len);
        if self.event > self.max_event {
            return Err(format!(
                "Server-sent event larger than {} bytes (pi caps events at {} MiB)",
                self.max_event,
                self.max_event >> 20
            ));
        }
        Ok(())
    }

    fn line_break(&mut self, byte: u8) {
        self.line = 0;
        if step(&mut self.breaks, &mut self.run, byte) {
            self.event = 0;
        }
    }
}

/// One line-break byte added to a run of them (the last four kept in `breaks`); whether it
/// ends an event, which also ends the run.
fn step(breaks: &mut [u8; 4], run: &mut usize, byte: u8) -> bool {
    if *run == breaks.len() {
        breaks.copy_within(1.., 0);
        *run -= 1;
    }
    breaks[*run] = byte;
    *run += 1;
    let current = &breaks[..*run];
    let ends = current.ends_with(b"\n\n") || current.ends_with(b"\r\r") || current.ends_with(b"\r\n\r\n");
    if ends {
        *run = 0;
    }
    ends
}

/// One dispatched server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// Every non-empty line of the event as received (comments included).
    pub raw: Vec<String>,
}

/// What one line of an event holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    /// `event:`; the value starts at the offset.
    Event(usize),
    /// `data:`; the value starts at the offset.
    Data(usize),
    /// A comment or another field (kept for [`SseEventRef::raw`] only).
    Other,
}

/// One non-empty line of a pending event: its bytes in the decoder's buffer.
#[derive(Clone, Copy, Debug)]
struct Line {
    start: usize,
    end: usize,
    field: Field,
}

/// Incremental SSE decoder: feed bytes, get complete events.
///
/// Each chunk is decoded from UTF-8 once, as it arrives, into the decoder's text buffer (a
/// sequence cut by the chunk's end waits for the next one; invalid bytes become U+FFFD, as
/// decoding each line would make them: a line break is never part of a sequence). Lines are
/// split there, but not copied: an event is a run of line ranges in the buffer until it is
/// handed out as an [`SseEventRef`] that borrows its `event` and (single-line) `data` values
/// from there. [`SseDecoder::push`] and [`SseDecoder::finish`] hand out owned [`SseEvent`]s
/// instead.
#[derive(Debug, Default)]
pub struct SseDecoder {
    utf8: Utf8Stream,
    buffer: String,
    /// Search resumes here (everything before has no line break left to find).
    scan: usize,
    /// Where the line being read starts.
    line_start: usize,
    skip_leading_lf: bool,
    /// Lines of the events ready to be handed out, then of the event being read.
    lines: Vec<Line>,
    /// Ends (in `lines`) of the events ready to be handed out, in order; the first starts at
    /// `delivered`, each next one where the previous ended.
    ready: std::collections::VecDeque<usize>,
    /// Lines before this index belong to events already handed out.
    delivered: usize,
    /// The event being read starts at this line.
    event_start: usize,
    /// The event being read has a `data:` line.
    has_data: bool,
    /// Text was decoded (a byte-order mark is dropped only before the first).
    started: bool,
}

/// One dispatched server-sent event, borrowed from the decoder's buffer.
#[derive(Debug)]
pub struct SseEventRef<'a> {
    /// The `event:` field, if any.
    pub event: Option<Cow<'a, str>>,
    /// The `data:` lines joined by `\n` (borrowed when there is one).
    pub data: Cow<'a, str>,
    buffer: &'a str,
    lines: &'a [Line],
}

impl<'a> SseEventRef<'a> {
    /// Every non-empty line of the event as received (comments included).
    pub fn raw(&self) -> impl Iterator<Item = Cow<'a, str>> + 'a {
        let buffer = self.buffer;
        self.lines.iter().map(move |line| Cow::Borrowed(text_at(buffer, line.start, line.end)))
    }

    /// The owned event.
    pub fn to_owned_event(&self) -> SseEvent {
        SseEvent {
            event: self.event.as_ref().map(|e| e.clone().into_owned()),
            data: self.data.clone().into_owned(),
            raw: self.raw().map(Cow::into_owned).collect(),
        }
    }
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one network chunk; complete events are appended to `out`.
    ///
    /// The chunk goes in a piece at a time (at most 2 KiB, ending after a line break), each
    /// piece's events taken before the next, so the decoder's buffer stays small however large
    /// the chunk.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = chunk;
        loop {
            let (piece, after) = rest.split_at(piece_len(rest));
            self.push_bytes(piece);
            self.drain_into(out);
            if after.is_empty() {
                return;
            }
            rest = after;
        }
    }

    /// The stream ended: the unterminated last line and a pending event.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        self.finish_bytes();
        self.drain_into(out);
    }

    fn drain_into(&mut self, out: &mut Vec<SseEvent>) {
        while let Some(event) = self.next_event() {
            out.push(event.to_owned_event());
        }
    }

    /// Feed one network chunk; the events it completes are then taken with
    /// [`SseDecoder::next_event`] (take them all before the next chunk: events not taken yet
    /// are kept, and their bytes with them).
    pub fn push_bytes(&mut self, chunk: &[u8]) {
        let mut chunk = chunk;
        if self.skip_leading_lf {
            self.skip_leading_lf = false;
            if chunk.first() == Some(&b'\n') {
                chunk = &chunk[1..];
            }
        }
        if chunk.is_empty() {
            return;
        }
        self.compact();
        let before = self.buffer.len();
        self.utf8.push_to(chunk, &mut self.buffer);
        if !self.started && self.buffer.len() > before {
            self.started = true;
            if self.buffer[before..].starts_with('\u{feff}') {
                self.buffer.replace_range(before..before + '\u{feff}'.len_utf8(), "");
            }
        }
        // Whether the buffer ends where the chunk does (no sequence waits for the next one): a
        // `\r` is the chunk's last byte only then.
        let at_chunk_end = self.utf8.pending.is_empty();
        let mut search = self.scan;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buffer.as_bytes()[search..]) {
            let index = search + offset;
            let mut next = index + 1;
            let bytes = self.buffer.as_bytes();
            if bytes[index] == b'\r' {
                if next < bytes.len() {
                    if bytes[next] == b'\n' {
                        next += 1;
                    }
                } else if at_chunk_end {
                    self.skip_leading_lf = true;
                }
            }
            self.line(self.line_start, index);
            self.line_start = next;
            search = next;
        }
        self.scan = self.buffer.len();
    }

    /// The stream ended: the unterminated last line and a pending event become available to
    /// [`SseDecoder::next_event`].
    pub fn finish_bytes(&mut self) {
        let rest = self.utf8.finish();
        self.buffer.push_str(&rest);
        if self.line_start < self.buffer.len() {
            self.line(self.line_start, self.buffer.len());
            self.line_start = self.buffer.len();
        }
        self.scan = self.buffer.len();
        self.skip_leading_lf = false;
        self.dispatch();
    }

    /// The next complete event, if any.
    ///
    /// Once every complete event is taken, the bytes they came from are dropped and the buffers
    /// shrink back to [`RETAINED_BYTES`]: a stream that waits for its next chunk then holds only
    /// the start of an unfinished event, not the last chunk (with many streams at once, chunk
    /// sized buffers per stream were most of the memory).
    pub fn next_event(&mut self) -> Option<SseEventRef<'_>> {
        let Some(end) = self.ready.pop_front() else {
            self.release();
            return None;
        };
        let lines = &self.lines[self.delivered..end];
        self.delivered = end;
        let buffer = &self.buffer[..];
        let value = |line: &Line, from: usize| Cow::Borrowed(text_at(buffer, from, line.end));
        let event = lines.iter().rev().find_map(|line| match line.field {
            Field::Event(from) => Some(value(line, from)),
            _ => None,
        });
        let mut data_lines = lines.iter().filter_map(|line| match line.field {
            Field::Data(from) => Some(value(line, from)),
            _ => None,
        });
        let data = match data_lines.next() {
            None => Cow::Borrowed(""),
            Some(first) => match data_lines.next() {
                None => first,
                Some(second) => {
                    let mut joined = first.into_owned();
                    for line in std::iter::once(second).chain(data_lines) {
                        joined.push('\n');
                        joined.push_str(&line);
                    }
                    Cow::Owned(joined)
                }
            },
        };
        Some(SseEventRef { event, data, buffer, lines })
    }

    /// Drop what the events handed out used and give back capacity beyond [`RETAINED_BYTES`].
    fn release(&mut self) {
        self.compact();
        if self.buffer.capacity() > RETAINED_BYTES {
            self.buffer.shrink_to(RETAINED_BYTES);
        }
        let entries = RETAINED_BYTES / std::mem::size_of::<Line>();
        if self.lines.capacity() > entries {
            self.lines.shrink_to(entries);
        }
        if self.ready.capacity() > entries {
            self.ready.shrink_to(entries);
        }
    }

    /// Drop the bytes and lines of the events handed out (once per chunk, so that a chunk of
    /// many events moves the rest of the buffer once).
    fn compact(&mut self) {
        let keep_line = self.delivered.min(self.event_start);
        let keep = self.lines.get(keep_line).map_or(self.line_start, |line| line.start.min(self.line_start));
        if keep_line > 0 {
            self.lines.drain(..keep_line);
            self.ready.iter_mut().for_each(|end| *end -= keep_line);
            self.delivered -= keep_line;
            self.event_start -= keep_line;
        }
        if keep > 0 {
            self.buffer.drain(..keep);
            for line in &mut self.lines {
                line.start -= keep;
                line.end -= keep;
                if let Field::Event(from) | Field::Data(from) = &mut line.field {
                    *from -= keep;
                }
            }
            self.scan -= keep;
            self.line_start -= keep;
        }
    }

    /// The line `buffer[start..end]` (without its line break).
    fn line(&mut self, start: usize, end: usize) {
        if start == end {
            self.dispatch();
            return;
        }
        let bytes = &self.buffer.as_bytes()[start..end];
        let field = if bytes[0] == b':' {
            Field::Other
        } else {
            // The two fields of nearly every line are told apart first: a search for the colon
            // costs more than the line's other work.
            let colon = if bytes.starts_with(b"data:") {
                Some(4)
            } else if bytes.starts_with(b"event:") {
                Some(5)
            } else {
                memchr::memchr(b':', bytes)
            };
            let (name, value) = match colon {
                Some(i) => (&bytes[..i], start + i + 1),
                None => (bytes, end),
            };
            let value = if self.buffer.as_bytes().get(value) == Some(&b' ') && value < end { value + 1 } else { value };
            match name {
                b"event" => Field::Event(value),
                b"data" => {
                    self.has_data = true;
                    Field::Data(value)
                }
                _ => Field::Other,
            }
        };
        self.lines.push(Line { start, end, field });
    }

    /// A blank line: the event being read is handed out if it has data or a non-empty event
    /// name (an empty `event:` value and no data is not dispatched, JS `!""`); a block that is
    /// not dispatched is forgotten, its lines with it.
    fn dispatch(&mut self) {
        let event = &self.lines[self.event_start..];
        let named = event.iter().rev().find_map(|line| match line.field {
            Field::Event(from) => Some(from < line.end),
            _ => None,
        });
        if !self.has_data && named != Some(true) {
            self.lines.truncate(self.event_start);
            return;
        }
        self.ready.push_back(self.lines.len());
        self.event_start = self.lines.len();
        self.has_data = false;
    }
}

/// The text of `buffer[start..end]`, a line or a field's value: both ends follow or precede an
/// ASCII byte (a line break, a field name, a colon, a space), so they are character boundaries.
fn text_at(buffer: &str, start: usize, end: usize) -> &str {
    buffer.get(start..end).unwrap_or_default()
}

/// UTF-8 decoding that replaces invalid sequences with U+FFFD (as `TextDecoder` does).
///
/// Valid input, the common case, is checked by `str::from_utf8`, which skips ASCII a word at
/// a time; `String::from_utf8_lossy` walks every byte and cost a fifth of a stream's CPU.
pub fn decode_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// A streaming UTF-8 decoder: incomplete trailing sequences wait for the next chunk.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decode one chunk (`stream: true`).
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut out = String::new();
        self.push_to(chunk, &mut out);
        out
    }

    /// [`push`](Self::push), appending the text to `out`.
    pub(crate) fn push_to(&mut self, chunk: &[u8], out: &mut String) {
        // With nothing pending (the common case) the chunk is decoded where it is: checked once
        // and copied once, into `out`.
        let joined;
        let mut rest: &[u8] = match self.pending.is_empty() {
            true => chunk,
            false => {
                self.pending.extend_from_slice(chunk);
                joined = std::mem::take(&mut self.pending);
                &joined
            }
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&rest[..valid]));
                    match error.error_len() {
                        Some(len) => {
                            out.push('\u{fffd}');
                            rest = &rest[valid + len..];
                        }
                        None => {
                            // An incomplete sequence at the end waits for the next chunk.
                            self.pending.extend_from_slice(&rest[valid..]);
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The end of the input: an incomplete sequence becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            "\u{fffd}".to_owned()
        }
    }
}

/// Gemini's stream framing (`@google/genai`): events end at the first `\n\n`, `\r\r` or
/// `\r\n\r\n`; an event whose trimmed text starts with `data:` carries one JSON chunk.
#[derive(Debug, Default)]
pub struct GeminiFramer {
    utf8: Utf8Stream,
    buffer: String,
    /// Search resumes here (no delimiter starts before it).
    scan: usize,
    /// The events before this offset were handed out.
    start: usize,
    /// Bytes decoded, appended, searched, moved and copied so far (see [`GeminiFramer::work`]).
    work: u64,
}

/// One item of Gemini's framing.
#[derive(Debug, PartialEq, Eq)]
pub enum GeminiItem {
    /// The decoded text of a network chunk (the SDK checks it for a whole error object).
    Chunk(String),
    /// The JSON text of one `data:` event.
    Data(String),
}

impl GeminiFramer {
    /// Feed one network chunk.
    ///
    /// Linear in the input: the search resumes where the previous one stopped (less the
    /// length of a delimiter that may straddle chunks), and consumed events are removed from
    /// the buffer once per chunk.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<GeminiItem>) {
        let text = self.push_text(chunk);
        out.push(GeminiItem::Chunk(text));
        while let Some(data) = self.next_data() {
            let data = data.to_owned();
            // Copied into the item.
            self.work = self.work.saturating_add(data.len() as u64);
            out.push(GeminiItem::Data(data));
        }
    }

    /// Feed one network chunk and get its decoded text (the SDK checks it for a whole error
    /// object); then take the events it completes with [`GeminiFramer::next_data`].
    pub fn push_text(&mut self, chunk: &[u8]) -> String {
        let text = self.push_chunk(chunk).to_owned();
        // Copied out.
        self.work = self.work.saturating_add(text.len() as u64);
        text
    }

    /// [`push_text`](Self::push_text) with the decoded text borrowed from the buffer it was
    /// decoded into (no copy of its own).
    pub(crate) fn push_chunk(&mut self, chunk: &[u8]) -> &str {
        // The events handed out since the last chunk leave the buffer (the rest moves once).
        if self.start > 0 {
            let rest = self.buffer.len() - self.start;
            self.buffer.drain(..self.start);
            self.scan = self.scan.saturating_sub(self.start);
            self.start = 0;
            self.work = self.work.saturating_add(rest as u64);
        }
        let from = self.buffer.len();
        self.utf8.push_to(chunk, &mut self.buffer);
        // Decoded into the buffer.
        self.work = self.work.saturating_add(chunk.len() as u64);
        self.buffer.get(from..).unwrap_or_default()
    }

    /// The JSON text of the next complete `data:` event, borrowed from the buffer.
    pub fn next_data(&mut self) -> Option<&str> {
        loop {
            let bytes = self.buffer.as_bytes();
            let search = self.scan.max(self.start);
            let Some(offset) = memchr::memchr2(b'\n', b'\r', &bytes[search..]) else {
                // This search ran to the end.
                self.work = self.work.saturating_add((bytes.len() - search) as u64);
                // A delimiter (at most 4 bytes) not found yet starts within the last 3 bytes.
                self.scan = bytes.len().saturating_sub(3).max(self.start);
                return None;
            };
            self.work = self.work.saturating_add(offset as u64 + 1);
            let index = search + offset;
            let rest = &bytes[index..];
            let len = if rest.starts_with(b"\n\n") || rest.starts_with(b"\r\r") {
                2
            } else if rest.starts_with(b"\r\n\r\n") {
                4
            } else {
                self.scan = index + 1;
                continue;
            };
            let event = self.start..index;
            self.start = index + len;
            self.scan = self.start;
            let trimmed = crate::js_json::js_trim(&self.buffer[event]);
            if let Some(rest) = trimmed.strip_prefix("data:") {
                return Some(crate::js_json::js_trim(rest));
            }
        }
    }

    /// Bytes this framer has decoded, appended to its buffer, searched for delimiters, moved
    /// when removing consumed events and copied into items, so far. Linear in the input
    /// (a few times its size, however it is split); `tests/framing_work.rs` holds it there.
    /// Public for that test, which counts through it (an integration test reaches no private
    /// item); framing a stream does not need it.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// The end of the body: `Err` when an incomplete segment is left.
    pub fn finish(&mut self) -> Result<(), String> {
        let tail = self.utf8.finish();
        self.buffer.push_str(&tail);
        if crate::js_json::js_trim(&self.buffer[self.start..]).is_empty() {
            Ok(())
        } else {
            Err("Incomplete JSON segment at the end".to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The decoder before events were borrowed (every line copied into a string): the oracle of
    // `borrowed_events_match_the_copying_decoder`.
    /// Incremental SSE decoder: feed bytes, get complete events.
    #[derive(Debug, Default)]
    struct OldDecoder {
        buffer: Vec<u8>,
        /// Search resumes here (everything before has no line break).
        scan: usize,
        skip_leading_lf: bool,
        event: Option<String>,
        data: Vec<String>,
        has_data: bool,
        raw: Vec<String>,
    }

    impl OldDecoder {
        fn new() -> Self {
            Self::default()
        }

        /// Feed one network chunk; complete events are appended to `out`.
        fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
            let mut chunk = chunk;
            if self.skip_leading_lf {
                self.skip_leading_lf = false;
                if chunk.first() == Some(&b'\n') {
                    chunk = &chunk[1..];
                }
            }
            if chunk.is_empty() {
                return;
            }
            self.buffer.extend_from_slice(chunk);
            let mut start = 0;
            let mut search = self.scan;
            while let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buffer[search..]) {
                let index = search + offset;
                let mut next = index + 1;
                if self.buffer[index] == b'\r' {
                    if next < self.buffer.len() {
                        if self.buffer[next] == b'\n' {
                            next += 1;
                        }
                    } else {
                        self.skip_leading_lf = true;
                    }
                }
                let line = decode_lossy(&self.buffer[start..index]).into_owned();
                self.line(line, out);
                start = next;
                search = next;
            }
            self.buffer.drain(..start);
            self.scan = self.buffer.len();
        }

        /// The stream ended: the unterminated last line and a pending event.
        fn finish(&mut self, out: &mut Vec<SseEvent>) {
            if !self.buffer.is_empty() {
                let line = decode_lossy(&self.buffer).into_owned();
                self.buffer.clear();
                self.line(line, out);
            }
            self.scan = 0;
            self.skip_leading_lf = false;
            if let Some(event) = self.dispatch() {
                out.push(event);
            }
        }

        fn line(&mut self, line: String, out: &mut Vec<SseEvent>) {
            if line.is_empty() {
                if let Some(event) = self.dispatch() {
                    out.push(event);
                }
                return;
            }
            if !line.starts_with(':') {
                let (field, value) = match line.find(':') {
                    Some(i) => (&line[..i], &line[i + 1..]),
                    None => (line.as_str(), ""),
                };
                let value = value.strip_prefix(' ').unwrap_or(value);
                if field == "event" {
                    self.event = Some(value.to_owned());
                } else if field == "data" {
                    self.data.push(value.to_owned());
                    self.has_data = true;
                }
            }
            self.raw.push(line);
        }

        fn dispatch(&mut self) -> Option<SseEvent> {
            // An event with an empty `event:` value and no data is not dispatched (JS `!""`).
            let has_event = self.event.as_deref().is_some_and(|e| !e.is_empty());
            if !has_event && !self.has_data {
                self.event = None;
                self.raw.clear();
                return None;
            }
            let event = SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data).join("\n"),
                raw: std::mem::take(&mut self.raw),
            };
            self.has_data = false;
            Some(event)
        }
    }

    /// Random event streams, split at random, decode as the copying decoder decodes them.
    #[test]
    fn borrowed_events_match_the_copying_decoder() {
        let alphabet: [&[u8]; 14] = [
            b"data: x",
            b"data:",
            b"data",
            b"event: e",
            b"event:",
            b": c",
            b"id: 1",
            b"\n",
            b"\r",
            b"\r\n",
            b"\xff",
            b"\xc3\xa9",
            b"\xe2\x82",
            b"data: {\"a\":1}",
        ];
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for case in 0..3000 {
            let body: Vec<u8> = (0..next(40)).flat_map(|_| alphabet[next(alphabet.len())].iter().copied()).collect();
            let mut cuts: Vec<usize> = (0..next(6)).map(|_| next(body.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts {
                chunks.push(&body[from..cut]);
                from = cut;
            }
            chunks.push(&body[from..]);
            let mut old = OldDecoder::new();
            let mut expected = Vec::new();
            for chunk in &chunks {
                old.push(chunk, &mut expected);
            }
            old.finish(&mut expected);
            assert_eq!(decode_all(&chunks), expected, "case {case}: {:?}", String::from_utf8_lossy(&body));
        }
    }

    /// A deterministic generator: `next(n)` is in `0..n`.
    fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        }
    }

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn splits_anywhere() {
        let body = "event: a\ndata: h\u{e9}llo \u{1f600}\r\n\r\ndata: x\rdata: y\r\r: c\n\n";
        let bytes = body.as_bytes();
        let whole = decode_all(&[bytes]);
        for cut in 1..bytes.len() {
            let parts = decode_all(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(parts, whole, "cut at {cut}");
        }
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].data, "h\u{e9}llo \u{1f600}");
        assert_eq!(whole[1].data, "x\ny");
    }

    #[test]
    fn chunks_fed_in_pieces_decode_as_whole_chunks() {
        let alphabet: [&[u8]; 8] = [b"data: x", b"event: e", b"\n", b"\r", b"\r\n", b"\xe2\x82", b"\xc3\xa9", b": c"];
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for case in 0..2000 {
            let body: Vec<u8> = (0..next(60)).flat_map(|_| alphabet[next(alphabet.len())].iter().copied()).collect();
            let cut = next(body.len() + 1);
            let chunks = [&body[..cut], &body[cut..]];
            let limit = 1 + next(12);
            let mut decoder = SseDecoder::new();
            let mut pieces = Vec::new();
            for chunk in chunks {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let (piece, after) = rest.split_at(piece_len_within(rest, limit));
                    assert!(after.is_empty() || piece.ends_with(b"\n"), "case {case}");
                    decoder.push(piece, &mut pieces);
                    rest = after;
                }
            }
            decoder.finish(&mut pieces);
            assert_eq!(pieces, decode_all(&chunks), "case {case}, limit {limit}");
        }
    }

    #[test]
    fn a_large_chunk_pushed_whole_decodes_as_line_by_line() {
        // Far larger than a piece: `push` feeds it in pieces.
        let mut body = Vec::new();
        for i in 0..3_000 {
            body.extend_from_slice(format!("event: e{i}\r\ndata: {{\"text\":\"h\u{e9}llo {i}\"}}\n\r\n").as_bytes());
        }
        body.extend_from_slice(b"data: \xe2\x82\n: tail\r\r");
        let mut old = OldDecoder::new();
        let mut expected = Vec::new();
        old.push(&body, &mut expected);
        old.finish(&mut expected);
        assert_eq!(expected.len(), 3_001);
        assert_eq!(decode_all(&[&body]), expected);
    }

    #[test]
    fn a_carriage_return_before_a_cut_sequence_ends_its_line() {
        // The `\r` ends the buffer while `\xe2\x82` waits for the rest of its sequence: the `\n`
        // after them is a line break of its own, not the second half of a `\r\n`.
        let body = b"data: a\r\xe2\x82\ndata: b\n\r\xc3\n\n";
        for cut in 0..=body.len() {
            let chunks: [&[u8]; 2] = [&body[..cut], &body[cut..]];
            let mut old = OldDecoder::new();
            let mut expected = Vec::new();
            chunks.iter().for_each(|chunk| old.push(chunk, &mut expected));
            old.finish(&mut expected);
            assert_eq!(decode_all(&chunks), expected, "cut at {cut}");
        }
    }

    #[test]
    fn blocks_without_data_are_forgotten() {
        // A comment block and an empty event name are dropped with their lines: the next event
        // neither quotes them nor takes the earlier name.
        let events = decode_all(&[b": keep-alive\n\nevent: old\nevent:\n\ndata: x\n\n"]);
        assert_eq!(events, vec![SseEvent { event: None, data: "x".into(), raw: vec!["data: x".into()] }]);
    }

    #[test]
    fn a_leading_byte_order_mark_is_dropped() {
        let body = "\u{feff}data: a\n\ndata: \u{feff}b\n\n".as_bytes();
        for cut in 0..=body.len() {
            let events = decode_all(&[&body[..cut], &body[cut..]]);
            let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
            assert_eq!(data, ["a", "\u{feff}b"], "cut at {cut}");
        }
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_break() {
        let events = decode_all(&[b"data: a\r", b"\ndata: b\n\n"]);
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn invalid_utf8() {
        let events = decode_all(&[b"data: a\xff\xe2\x82b\n\n"]);
        assert_eq!(events[0].data, "a\u{fffd}\u{fffd}b");
        let mut utf8 = Utf8Stream::default();
        assert_eq!(utf8.push(b"a\xe2\x82"), "a");
        assert_eq!(utf8.push(b"\xacb"), "\u{20ac}b");
        assert_eq!(utf8.push(b"\xe2"), "");
        assert_eq!(utf8.finish(), "\u{fffd}");
        // An invalid byte inside a chunk and a sequence cut at its end, with nothing pending.
        assert_eq!(utf8.push(b"a\xffb\xe2"), "a\u{fffd}b");
        assert_eq!(utf8.push(b"\x82\xac"), "\u{20ac}");
        assert_eq!(utf8.push(b"\xf0\x9f"), "");
        assert_eq!(utf8.push(b"\x98\x80!"), "\u{1f600}!");
        let mut out = String::from(">");
        utf8.push_to(b"\xc3", &mut out);
        utf8.push_to(b"\xa9", &mut out);
        assert_eq!(out, ">\u{e9}");
    }

    fn gemini_all(chunks: &[&[u8]]) -> (Vec<GeminiItem>, Result<(), String>) {
        let mut framer = GeminiFramer::default();
        let mut out = Vec::new();
        for chunk in chunks {
            framer.push(chunk, &mut out);
        }
        let end = framer.finish();
        (out.into_iter().filter(|item| matches!(item, GeminiItem::Data(_))).collect(), end)
    }

    #[test]
    fn gemini_framing_splits_anywhere() {
        let body = "data: {\"a\":1}\r\n\r\ndata: {\"b\":\"\u{e9}\"}\n\n: x\r\rdata:  {\"c\":3}\r\n\n\ndata: {}\r\n\r";
        let bytes = body.as_bytes();
        let whole = gemini_all(&[bytes]);
        assert_eq!(
            whole.0,
            vec![
                GeminiItem::Data("{\"a\":1}".into()),
                GeminiItem::Data("{\"b\":\"\u{e9}\"}".into()),
                GeminiItem::Data("{\"c\":3}".into()),
            ]
        );
        assert!(whole.1.is_err(), "an unterminated last event is an incomplete segment");
        for cut in 1..bytes.len() {
            assert_eq!(gemini_all(&[&bytes[..cut], &bytes[cut..]]), whole, "cut at {cut}");
        }
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(gemini_all(&single), whole);
    }

    #[test]
    fn frame_guard_caps_lines_and_events() {
        let mut guard = FrameGuard::new(8, 20);
        assert!(guard.check(b"data: ab\n").is_ok());
        assert!(guard.check(b"data: a").is_ok());
        let error = guard.check(b"bc").expect_err("line cap");
        assert!(error.starts_with("Server-sent event line longer than 8 bytes"), "{error}");

        let mut guard = FrameGuard::new(8, 20);
        // Short lines, but one event of more than 20 bytes; `\r\n\r\n` split across chunks ends one.
        assert!(guard.check(b"a: 1\r\nb: 2\r\n\r").is_ok());
        assert!(guard.check(b"\nc: 3\nd: 4\ne: 5\n").is_ok());
        let error = guard.check(b"f: 66\n").expect_err("event cap");
        assert!(error.starts_with("Server-sent event larger than 20 bytes"), "{error}");
    }

    /// The state the guard keeps between chunks: counts and the run of line breaks.
    fn guard_state(guard: &FrameGuard) -> (usize, usize, Vec<u8>) {
        (guard.line, guard.event, guard.breaks[..guard.run].to_vec())
    }

    /// A chunk checked from its end (the caps out of reach) leaves the guard as the walk
    /// through each of its line breaks does, for bodies of text and every mix of `\r` and `\n`
    /// split anywhere, and the verdicts agree.
    #[test]
    fn frame_guard_from_the_end_matches_the_walk_through_each_break() {
        let mut rng = fastrand::Rng::with_seed(20_261_203);
        for _ in 0..20_000 {
            let len = rng.usize(0..48);
            let body: Vec<u8> = (0..len).map(|_| [b'a', b'\n', b'\r'][rng.usize(0..3)]).collect();
            let (max_line, max_event) = (rng.usize(1..12), rng.usize(1..40));
            let (mut fast, mut walk) = (FrameGuard::new(max_line, max_event), FrameGuard::new(max_line, max_event));
            let mut rest = &body[..];
            while !rest.is_empty() {
                let (chunk, tail) = rest.split_at(rng.usize(0..=rest.len()));
                rest = tail;
                let (verdict, expected) = (fast.check(chunk), walk.check_each(chunk));
                assert_eq!(verdict, expected, "{body:?} at {chunk:?}");
                if expected.is_err() {
                    break;
                }
                assert_eq!(guard_state(&fast), guard_state(&walk), "{body:?} after {chunk:?}");
            }
        }
    }

    /// Found by the `sse_framing` fuzz target: an event over the cap that ended later in the
    /// same chunk passed when it arrived whole and failed when split before its end. The caps
    /// now hold at every byte, whatever the split.
    #[test]
    fn frame_guard_verdict_does_not_depend_on_the_split() {
        let body = b"data: 0123456789abcdefghij\n\ndata: x\n\n";
        let whole = FrameGuard::new(64, 16).check(body).is_ok();
        for size in 1..body.len() {
            let mut guard = FrameGuard::new(64, 16);
            let split = body.chunks(size).all(|chunk| guard.check(chunk).is_ok());
            assert_eq!(split, whole, "split into {size}-byte pieces");
        }
        assert!(!whole);
    }
}
