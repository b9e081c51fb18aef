//! Incremental, tolerant parsing of JSON text that arrives in pieces, such as streamed tool-call
//! arguments; a port of the reference runtime's streaming JSON parser.
//!
//! [`StreamingJsonParser::append`] reads each piece once and [`StreamingJsonParser::snapshot`]
//! gives the value of the text read so far. Incomplete text reads as follows:
//!
//! * an unterminated string shows the characters read so far; an unterminated escape is held back
//!   until it is complete;
//! * an unterminated container shows the members and elements read so far; a member whose key or
//!   value has not started is omitted;
//! * an unterminated literal shows its value once it is a prefix of `true`, `false` or `null`; an
//!   unterminated number shows its value when the characters read so far form a number (an
//!   exponent without digits is ignored), as long as it is at most 64 UTF-16 units long.
//!
//! Malformed text is read leniently: raw control characters in strings are kept, an invalid
//! escape such as `\d` stays literal text, missing commas and colons are tolerated, values in
//! invalid positions and unknown words are dropped, a stray closer is ignored, and text after the
//! root value is ignored. Nothing panics, whatever the input.
//!
//! `append` also returns the [`JsonChange`]s the piece made, for a writer that keeps its own copy
//! of the value: `Set` when a key, an array item or a finished value appears (a new string is set
//! once with its first text, a container empty), `Append` when the piece extended an open string.
//! Unterminated numbers and literals are not reported until they end. A container nested deeper
//! than 32 levels is reported as one `Set` of its whole value when it closes.
//!
//! # Cost and snapshot lag
//!
//! Exactly as in the reference, a fresh snapshot costs the number of members and elements of the
//! open containers (plus one per open container). Each `append` earns 256 units of copy credit
//! plus 8 per UTF-16 unit of its text; `snapshot` spends credit, and while the open path costs
//! more than the credit it returns the previous snapshot. So a document that keeps a very large
//! container open shows a snapshot that lags a little behind the text — identical, prefix by
//! prefix, to the reference's.
//!
//! # Ownership
//!
//! The parser owns one published [`Value`] and hands it out by reference. Publishing does not copy
//! it: the parser logs the edits that each piece makes (place a value, enter or leave a container,
//! extend a string) and replays them into the published value when a snapshot is due. Replaying
//! costs the log's length plus the depth of the open path, so the total work stays linear in the
//! text. Callers that keep a snapshot beyond the next `append` clone it; use
//! [`StreamingJsonParser::revision`] to clone only when it changed.
//!
//! # Differences from the reference
//!
//! * A `\uD800`–`\uDBFF` escape is held back, like an unterminated escape, until the next escape
//!   shows whether it completes a surrogate pair; a lone surrogate reads as `U+FFFD` (the
//!   reference shows the lone surrogate itself, which Rust strings cannot hold), so changes never
//!   carry half a pair.
//! * Numbers that overflow to `±Infinity` read as `null` (what `JSON.stringify` writes).
//! * Containers nested deeper than [`MAX_PARSE_DEPTH`] are read
//!   but not shown: the container at that depth stays empty in snapshots and changes.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::js::{number_value, utf16_len};
use super::parse::{combine_surrogates, parse_tool_call_arguments, ParsedArguments, MAX_PARSE_DEPTH};

/// Changes are reported at most this deep.
const MAX_REPORTED_DEPTH: usize = 32;
/// Copy credit earned by every `append`.
const CREDIT_PER_APPEND: u64 = 256;
/// Copy credit earned per UTF-16 unit of appended text.
const CREDIT_PER_CHARACTER: u64 = 8;
/// An unterminated number or literal longer than this (in UTF-16 units) is not shown.
const MAX_PENDING_SCALAR_LENGTH: usize = 64;

/// One step of a [`JsonPath`]: a member key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathSegment {
    /// A member of an object.
    Key(Arc<str>),
    /// An element of an array.
    Index(usize),
}

/// A path from the root value; shared, so cloning it is cheap.
pub type JsonPath = Arc<[PathSegment]>;

/// One change a piece of text made to the value; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonChange {
    /// The value at `path` is now `value`.
    Set {
        /// Where the value is.
        path: JsonPath,
        /// The new value.
        value: Value,
    },
    /// The string at `path` grew by `text`.
    Append {
        /// Where the string is.
        path: JsonPath,
        /// The added text.
        text: String,
    },
}

/// Where a value goes in the innermost open container.
#[derive(Debug, Clone)]
enum Slot {
    Root,
    Element(usize),
    /// `fresh`: the key was new when the value was placed, so the member is the last one.
    Member {
        key: Arc<str>,
        fresh: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Key,
    Colon,
    Value,
    Comma,
}

#[derive(Debug)]
struct Frame {
    is_array: bool,
    /// Where this container sits in its parent; `None` for an invalid position.
    slot: Option<Slot>,
    /// Whether the container appears in snapshots (it and all its ancestors have a slot).
    visible: bool,
    path: Option<JsonPath>,
    reports_inside: bool,
    /// Members or elements placed so far.
    size: usize,
    /// Keys placed so far (objects only), for JavaScript's `Object.hasOwn`.
    keys: HashSet<Arc<str>>,
    key: Option<Arc<str>>,
    phase: Phase,
}

#[derive(Debug)]
enum Escape {
    None,
    /// After a backslash.
    Backslash,
    /// After `\u` and the hex digits in the text (kept as typed, for the literal fallback).
    Unicode(String),
}

#[derive(Debug)]
struct OpenString {
    is_key: bool,
    slot: Option<Slot>,
    /// The text of a key string (value strings live in the published value and the log).
    key_text: String,
    escape: Escape,
    /// A decoded high-surrogate escape waiting for its low half.
    high_surrogate: Option<u16>,
    path: Option<JsonPath>,
    /// Index in `changes` of this string's newest change in the current piece.
    change: Option<usize>,
}

/// An edit of the value, relative to the innermost open container at the time.
#[derive(Debug)]
enum Op {
    Place(Slot, Value),
    Enter(Slot),
    Exit,
    Append(Slot, String),
    /// Undo the pending-scalar overlay of the last snapshot: put back what it displaced.
    Restore(Slot, Option<Value>),
}

/// The ops inside the container that will be reported whole when it closes.
#[derive(Debug)]
struct Capture {
    /// Stack index of the captured container.
    index: usize,
    ops: Vec<Op>,
}

/// Incremental, tolerant JSON parser; see the module documentation for its rules and costs.
#[derive(Debug)]
pub struct StreamingJsonParser {
    root_started: bool,
    done: bool,
    stack: Vec<Frame>,
    string: Option<OpenString>,
    scalar: String,
    scalar_units: usize,
    scalar_slot: Option<Slot>,
    /// Sum of `size + 1` over the open containers: what a fresh snapshot costs.
    path_cost: u64,
    credit: u64,
    dirty: bool,
    changes: Vec<JsonChange>,
    /// Whether `append` reports its changes (a caller that only publishes snapshots, such as
    /// the message builder, skips building them: an allocation per piece of a long string).
    reporting: bool,
    published: Option<Value>,
    revision: u64,
    /// Edits since the last snapshot, starting with the way down to the open container then.
    log: Vec<Op>,
    /// The buffer of the log's last `Append`, kept between snapshots: a string that grows one
    /// piece per snapshot reuses it instead of allocating a buffer per piece.
    spare: String,
    capture: Option<Capture>,
}

impl Default for StreamingJsonParser {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamingJsonParser {
    /// A parser that has read nothing.
    pub fn new() -> Self {
        Self {
            root_started: false,
            done: false,
            stack: Vec::new(),
            string: None,
            scalar: String::new(),
            scalar_units: 0,
            scalar_slot: None,
            path_cost: 0,
            credit: 0,
            dirty: false,
            changes: Vec::new(),
            reporting: true,
            published: None,
            revision: 0,
            log: Vec::new(),
            spare: String::new(),
            capture: None,
        }
    }

    /// A parser whose [`append`](Self::append) reports no changes (returns an empty list): for
    /// callers that only take snapshots.
    pub fn without_changes() -> Self {
        Self { reporting: false, ..Self::new() }
    }

    /// Reads the next piece of text; returns the changes it made, in order. Costs time linear in
    /// the length of `text`.
    pub fn append(&mut self, text: &str) -> &[JsonChange] {
        self.credit = self.credit.saturating_add(CREDIT_PER_APPEND + CREDIT_PER_CHARACTER * utf16_len(text) as u64);
        self.changes.clear();
        if let Some(open) = &mut self.string {
            open.change = None;
        }
        let mut index = 0;
        while index < text.len() && !self.done {
            if self.string.is_some() {
                index = self.read_string(text, index);
            } else if !self.scalar.is_empty() {
                index = self.read_scalar(text, index);
            } else {
                let Some(c) = text.get(index..).and_then(|rest| rest.chars().next()) else {
                    break;
                };
                index += c.len_utf8();
                self.structural(c);
            }
        }
        &self.changes
    }

    /// The value of the text read so far: `None` before a value starts.
    ///
    /// Returns the previous snapshot while the text read since did not change the value, or while
    /// a fresh snapshot is not yet paid for (see the module documentation).
    pub fn snapshot(&mut self) -> Option<&Value> {
        if self.dirty {
            let pending = self.pending_scalar();
            let cost = self.path_cost + u64::from(pending.is_some());
            if cost <= self.credit {
                self.credit -= cost;
                self.dirty = false;
                self.publish(pending);
            }
        }
        self.published.as_ref()
    }

    /// The last published snapshot, without publishing a new one.
    pub fn current(&self) -> Option<&Value> {
        self.published.as_ref()
    }

    /// How many snapshots have been published; changes exactly when `snapshot` returns a new
    /// value (the reference returns a new object then).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Publishes like [`snapshot`](Self::snapshot), but an object snapshot lives in `arguments`,
    /// which the caller owns (a tool-call block of a partial message), instead of in the parser.
    ///
    /// The parser borrows the map for the replay and hands it back, so the edits of each piece
    /// are applied to the caller's map in place: publishing costs the new text, never a copy of
    /// the whole value. `arguments` must hold what the previous call left in it. A new snapshot
    /// that is not an object empties it (tool arguments show as `{}` until an object appears);
    /// without a new snapshot it is left as it is ([`revision`](Self::revision) tells which).
    pub fn publish_object_into(&mut self, arguments: &mut Map<String, Value>) {
        let revision = self.revision;
        let lent = match &mut self.published {
            Some(Value::Object(members)) => {
                std::mem::swap(members, arguments);
                true
            }
            _ => false,
        };
        self.snapshot();
        let changed = self.revision != revision;
        match &mut self.published {
            Some(Value::Object(members)) if lent => std::mem::swap(members, arguments),
            // The first object snapshot: the caller takes it, the parser keeps an empty stand-in.
            Some(Value::Object(members)) => *arguments = std::mem::take(members),
            _ if changed => arguments.clear(),
            _ => {}
        }
    }

    /// [`append`](Self::append) then [`publish_object_into`](Self::publish_object_into), in
    /// one step when the piece only continues the open string value: the piece then goes
    /// straight into that string in `arguments`, without logging and replaying it. The result
    /// is the same either way.
    pub fn append_into(&mut self, text: &str, arguments: &mut Map<String, Value>) {
        if !self.continue_string_into(text, arguments) {
            self.append(text);
            self.publish_object_into(arguments);
        }
    }

    /// The fast path of [`append_into`](Self::append_into): only when nothing but the piece is
    /// left to publish (the last snapshot showed everything), the piece has no quote or
    /// backslash, and the new snapshot is paid for. Returns whether it applied the piece.
    fn continue_string_into(&mut self, text: &str, arguments: &mut Map<String, Value>) -> bool {
        let steady = !self.reporting
            && !self.done
            && !self.dirty
            && self.capture.is_none()
            && !text.is_empty()
            && matches!(self.published, Some(Value::Object(_)))
            && self.string.as_ref().is_some_and(|open| {
                !open.is_key
                    && open.slot.is_some()
                    && matches!(open.escape, Escape::None)
                    && open.high_surrogate.is_none()
            })
            && self.stack.iter().all(|frame| frame.visible)
            && self.log.iter().all(|op| matches!(op, Op::Enter(_)))
            && !text.bytes().any(|byte| byte == b'"' || byte == b'\\');
        if !steady {
            return false;
        }
        let credit = self.credit.saturating_add(CREDIT_PER_APPEND + CREDIT_PER_CHARACTER * utf16_len(text) as u64);
        if self.path_cost > credit {
            return false;
        }
        let Some(slot) = self.string.as_ref().and_then(|open| open.slot.as_ref()) else { return false };
        // The root container is `arguments`; each further open container is a child of the one before.
        let mut root = Value::Object(std::mem::take(arguments));
        let mut node = Some(&mut root);
        for frame in self.stack.iter().skip(1) {
            node = match (node, &frame.slot) {
                (Some(parent), Some(child)) => child_mut(parent, child),
                _ => None,
            };
        }
        let applied = match node.and_then(|container| child_mut(container, slot)) {
            Some(Value::String(existing)) => {
                existing.push_str(text);
                true
            }
            _ => false,
        };
        if let Value::Object(members) = root {
            *arguments = members;
        }
        if applied {
            self.credit = credit - self.path_cost;
            // A new container snapshot, as `publish` counts it.
            self.revision += 1;
        }
        applied
    }

    // ----- reading -----

    fn read_string(&mut self, text: &str, start: usize) -> usize {
        let bytes = text.as_bytes();
        let mut run_start = start;
        let mut index = start;
        while index < bytes.len() {
            let escaping = self.string.as_ref().is_some_and(|open| !matches!(open.escape, Escape::None));
            if escaping {
                let Some(c) = text.get(index..).and_then(|rest| rest.chars().next()) else {
                    break;
                };
                if self.continue_escape(c) {
                    index += c.len_utf8();
                    run_start = index;
                    continue;
                }
                // Not part of the escape: read it as a normal string character below.
                run_start = index;
            }
            match bytes[index] {
                b'"' => {
                    if index > run_start {
                        self.append_string(&text[run_start..index]);
                    }
                    self.end_string();
                    return index + 1;
                }
                b'\\' => {
                    if index > run_start {
                        self.append_string(&text[run_start..index]);
                    }
                    if let Some(open) = &mut self.string {
                        open.escape = Escape::Backslash;
                    }
                    run_start = index + 1;
                }
                _ => {}
            }
            index += 1;
        }
        if bytes.len() > run_start {
            if let Some(rest) = text.get(run_start..) {
                self.append_string(rest);
            }
        }
        bytes.len()
    }

    fn read_scalar(&mut self, text: &str, start: usize) -> usize {
        let bytes = text.as_bytes();
        let mut end = start;
        while end < bytes.len() && !is_delimiter(bytes[end]) {
            end += 1;
        }
        if end > start {
            let piece = &text[start..end];
            self.scalar.push_str(piece);
            self.scalar_units += utf16_len(piece);
            if self.scalar_slot.is_some() {
                self.dirty = true;
            }
        }
        if end < bytes.len() {
            self.end_scalar();
        }
        end
    }

    fn structural(&mut self, c: char) {
        match c {
            ' ' | '\t' | '\n' | '\r' => {}
            '"' => self.start_string(),
            '{' => self.open_container(false),
            '[' => self.open_container(true),
            '}' | ']' => self.close_container(),
            ':' => {
                if let Some(frame) = self.stack.last_mut() {
                    if !frame.is_array && frame.phase == Phase::Colon {
                        frame.phase = Phase::Value;
                    }
                }
            }
            ',' => {
                if let Some(frame) = self.stack.last_mut() {
                    frame.phase = if frame.is_array { Phase::Value } else { Phase::Key };
                }
            }
            _ => {
                self.scalar.clear();
                self.scalar.push(c);
                self.scalar_units = c.len_utf16();
                self.scalar_slot = self.value_slot();
                if self.scalar_slot.is_some() {
                    self.dirty = true;
                }
            }
        }
    }

    /// Where a value starting now goes; `None` when this position takes no value.
    fn value_slot(&self) -> Option<Slot> {
        let Some(frame) = self.stack.last() else {
            return (!self.root_started).then_some(Slot::Root);
        };
        if frame.is_array {
            return Some(Slot::Element(frame.size));
        }
        // A missing colon is tolerated: `{"a" 1}` reads as `{"a": 1}`.
        match (&frame.key, frame.phase) {
            (Some(key), Phase::Value | Phase::Colon) => {
                Some(Slot::Member { key: key.clone(), fresh: !frame.keys.contains(key) })
            }
            _ => None,
        }
    }

    /// The path of a value at `slot` in the innermost open container, when it is reported.
    fn reported_path(&self, slot: Option<&Slot>) -> Option<JsonPath> {
        let slot = slot?;
        let Some(frame) = self.stack.last() else {
            return Some(Arc::from(Vec::new()));
        };
        if !frame.reports_inside {
            return None;
        }
        let parent = frame.path.as_ref()?;
        let mut path = Vec::with_capacity(parent.len() + 1);
        path.extend(parent.iter().cloned());
        path.push(match slot {
            Slot::Member { key, .. } => PathSegment::Key(key.clone()),
            Slot::Element(index) => PathSegment::Index(*index),
            Slot::Root => return Some(Arc::from(Vec::new())),
        });
        Some(Arc::from(path))
    }

    fn report(&mut self, change: JsonChange) -> usize {
        if !self.reporting {
            return self.changes.len();
        }
        self.changes.push(change);
        self.changes.len() - 1
    }

    fn start_string(&mut self) {
        let is_key =
            self.stack.last().is_some_and(|frame| !frame.is_array && matches!(frame.phase, Phase::Key | Phase::Comma));
        let mut open = OpenString {
            is_key,
            slot: None,
            key_text: String::new(),
            escape: Escape::None,
            high_surrogate: None,
            path: None,
            change: None,
        };
        if !is_key {
            let slot = self.value_slot();
            let path = self.reported_path(slot.as_ref());
            if let Some(slot) = &slot {
                self.place(slot, Value::String(String::new()));
            }
            if let Some(path) = &path {
                open.change =
                    Some(self.report(JsonChange::Set { path: path.clone(), value: Value::String(String::new()) }));
            }
            open.slot = slot;
            open.path = path;
        }
        self.string = Some(open);
    }

    /// Continues an escape with `c`; false when `c` is not part of it and must be read normally.
    fn continue_escape(&mut self, c: char) -> bool {
        let Some(open) = &mut self.string else {
            return false;
        };
        match std::mem::replace(&mut open.escape, Escape::None) {
            Escape::None => false,
            Escape::Backslash => {
                let decoded = match c {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'u' => {
                        open.escape = Escape::Unicode(String::new());
                        return true;
                    }
                    _ => {
                        // Invalid escape: keep the backslash as text and read `c` normally.
                        self.append_string("\\");
                        return false;
                    }
                };
                let mut buffer = [0u8; 4];
                self.append_string(decoded.encode_utf8(&mut buffer));
                true
            }
            Escape::Unicode(mut digits) => {
                if c.is_ascii_hexdigit() {
                    digits.push(c);
                    if digits.len() < 4 {
                        open.escape = Escape::Unicode(digits);
                        return true;
                    }
                    let unit = u16::from_str_radix(&digits, 16).unwrap_or(0xfffd);
                    self.append_unit(unit);
                    return true;
                }
                // `\u` without four hex digits: keep it as text and read `c` normally.
                let mut literal = String::with_capacity(digits.len() + 2);
                literal.push_str("\\u");
                literal.push_str(&digits);
                self.append_string(&literal);
                false
            }
        }
    }

    /// Appends the UTF-16 unit of a `\u` escape, pairing surrogates.
    fn append_unit(&mut self, unit: u16) {
        let held = self.string.as_mut().and_then(|open| open.high_surrogate.take());
        if let Some(high) = held {
            if (0xdc00..0xe000).contains(&unit) {
                let mut buffer = [0u8; 4];
                let pair = combine_surrogates(high, unit);
                self.emit_string(pair.encode_utf8(&mut buffer));
                return;
            }
            self.emit_string("\u{fffd}");
        }
        if (0xd800..0xdc00).contains(&unit) {
            if let Some(open) = &mut self.string {
                open.high_surrogate = Some(unit);
            }
            // The reference appended the lone surrogate: the value counts as changed.
            self.touch_string();
            return;
        }
        let decoded = char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}');
        let mut buffer = [0u8; 4];
        self.emit_string(decoded.encode_utf8(&mut buffer));
    }

    /// Appends text that is not a `\u` escape, first giving up a held high surrogate.
    fn append_string(&mut self, text: &str) {
        self.flush_surrogate();
        self.emit_string(text);
    }

    fn flush_surrogate(&mut self) {
        if self.string.as_mut().is_some_and(|open| open.high_surrogate.take().is_some()) {
            self.emit_string("\u{fffd}");
        }
    }

    /// What the reference's `#place` of the string's text does besides storing it.
    fn touch_string(&mut self) {
        if self.string.as_ref().is_some_and(|open| !open.is_key && open.slot.is_some()) {
            self.dirty = true;
        }
    }

    fn emit_string(&mut self, text: &str) {
        let Some(open) = &mut self.string else {
            return;
        };
        if open.is_key {
            open.key_text.push_str(text);
            return;
        }
        let Some(slot) = &open.slot else {
            return;
        };
        let path = if self.reporting { open.path.clone() } else { None };
        let change = open.change;
        self.dirty = true;
        let cursor = self.stack.len().checked_sub(1);
        let visible = cursor.is_none_or(|index| self.stack.get(index).is_none_or(|f| f.visible));
        if visible {
            if let Some(capture) = &mut self.capture {
                if cursor.is_some_and(|index| index >= capture.index) {
                    append_op(&mut capture.ops, slot, text, &mut String::new());
                }
            }
            append_op(&mut self.log, slot, text, &mut self.spare);
        }
        let Some(path) = path else {
            return;
        };
        // Extend this string's newest change while nothing came after it; else report an append.
        if let Some(position) = change.filter(|position| *position + 1 == self.changes.len()) {
            match &mut self.changes[position] {
                JsonChange::Set { value: Value::String(existing), .. } => existing.push_str(text),
                JsonChange::Append { text: existing, .. } => existing.push_str(text),
                JsonChange::Set { .. } => {}
            }
            return;
        }
        let position = self.report(JsonChange::Append { path, text: text.to_owned() });
        if let Some(open) = &mut self.string {
            open.change = Some(position);
        }
    }

    fn end_string(&mut self) {
        self.flush_surrogate();
        let Some(open) = self.string.take() else {
            return;
        };
        if open.is_key {
            if let Some(frame) = self.stack.last_mut() {
                frame.key = Some(Arc::from(open.key_text));
                frame.phase = Phase::Colon;
            }
            return;
        }
        self.value_ended();
    }

    fn end_scalar(&mut self) {
        let token = std::mem::take(&mut self.scalar);
        self.scalar_units = 0;
        let slot = self.scalar_slot.take();
        if let Some(value) = scalar_value(&token) {
            let path = self.reported_path(slot.as_ref());
            if let Some(slot) = &slot {
                self.place(slot, value.clone());
            }
            if let Some(path) = path {
                self.report(JsonChange::Set { path, value });
            }
        }
        self.value_ended();
    }

    /// The value of the unterminated scalar at the end of the text, if it shows.
    fn pending_scalar(&self) -> Option<(Slot, Value)> {
        let slot = self.scalar_slot.as_ref()?;
        if self.scalar.is_empty() || self.scalar_units > MAX_PENDING_SCALAR_LENGTH {
            return None;
        }
        pending_scalar_value(&self.scalar).map(|value| (slot.clone(), value))
    }

    fn open_container(&mut self, is_array: bool) {
        let slot = self.value_slot();
        let path = self.reported_path(slot.as_ref());
        let empty = || {
            if is_array {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            }
        };
        let parent_visible = self.cursor_visible();
        if let Some(slot) = &slot {
            self.place(slot, empty());
        }
        let visible = slot.is_some() && parent_visible && self.stack.len() < MAX_PARSE_DEPTH;
        if let Some(slot) = slot.as_ref().filter(|_| visible) {
            let cursor = self.stack.len().checked_sub(1);
            self.log(cursor, Op::Enter(slot.clone()));
        }
        let reports_inside = path.as_ref().is_some_and(|path| path.len() < MAX_REPORTED_DEPTH);
        if path.is_some() && !reports_inside {
            self.capture = Some(Capture { index: self.stack.len(), ops: Vec::new() });
        }
        self.stack.push(Frame {
            is_array,
            slot,
            visible,
            path: path.clone(),
            reports_inside,
            size: 0,
            keys: HashSet::new(),
            key: None,
            phase: if is_array { Phase::Value } else { Phase::Key },
        });
        self.path_cost += 1;
        self.dirty = true;
        if let Some(path) = path {
            self.report(JsonChange::Set { path, value: empty() });
        }
    }

    fn close_container(&mut self) {
        // A stray closer outside any container is ignored.
        let Some(frame) = self.stack.pop() else {
            return;
        };
        let index = self.stack.len();
        self.path_cost = self.path_cost.saturating_sub(frame.size as u64 + 1);
        self.dirty = true;
        if frame.visible {
            self.log(Some(index), Op::Exit);
        }
        // Too deep to report inside: the whole value, final now that it is closed.
        if let Some(path) = frame.path.as_ref().filter(|_| !frame.reports_inside) {
            if let Some(capture) = self.capture.take().filter(|capture| capture.index == index) {
                let mut value = if frame.is_array { Value::Array(Vec::new()) } else { Value::Object(Map::new()) };
                replay_into(&mut value, capture.ops);
                self.report(JsonChange::Set { path: path.clone(), value });
            }
        }
        self.value_ended();
    }

    /// A value in the innermost open container, or the root value, has ended.
    fn value_ended(&mut self) {
        match self.stack.last_mut() {
            // Text after the root value is ignored, but only once a root value exists.
            None => self.done = self.root_started,
            Some(frame) => frame.phase = Phase::Comma,
        }
    }

    /// Whether the innermost open container (or the root position) is shown.
    fn cursor_visible(&self) -> bool {
        self.stack.last().is_none_or(|frame| frame.visible)
    }

    /// Sets the value at `slot` in the innermost open container.
    fn place(&mut self, slot: &Slot, value: Value) {
        self.dirty = true;
        let cursor = self.stack.len().checked_sub(1);
        match slot {
            Slot::Root => self.root_started = true,
            Slot::Element(index) => {
                if let Some(frame) = self.stack.last_mut() {
                    if *index == frame.size {
                        frame.size += 1;
                        self.path_cost += 1;
                    }
                }
            }
            Slot::Member { key, .. } => {
                if let Some(frame) = self.stack.last_mut() {
                    if frame.keys.insert(key.clone()) {
                        frame.size += 1;
                        self.path_cost += 1;
                    }
                }
            }
        }
        self.log(cursor, Op::Place(slot.clone(), value));
    }

    /// Records `op`, made in the container at stack index `cursor` (`None`: the root position).
    fn log(&mut self, cursor: Option<usize>, op: Op) {
        let visible = match cursor {
            None => true,
            Some(index) => self.stack.get(index).is_none_or(|frame| frame.visible),
        };
        if !visible {
            return;
        }
        if let Some(capture) = &mut self.capture {
            let inside = cursor.is_some_and(|index| index >= capture.index)
                && !(matches!(op, Op::Exit) && cursor == Some(capture.index));
            if inside {
                capture.ops.push(copy_op(&op));
            }
        }
        self.log.push(op);
    }

    // ----- publishing -----

    fn publish(&mut self, pending: Option<(Slot, Value)>) {
        let before = Shape::of(self.published.as_ref());
        // Draining keeps the log's buffer for the next pieces.
        let mut replay = Replay { spare: std::mem::take(&mut self.spare), ..Replay::default() };
        replay.root(&mut self.published, &mut self.log.drain(..));
        self.spare = replay.spare;
        // The next log starts with the way down to the innermost open container.
        let mut shown = 0;
        for frame in self.stack.iter().take_while(|frame| frame.visible) {
            if let Some(slot) = &frame.slot {
                self.log.push(Op::Enter(slot.clone()));
                shown += 1;
            }
        }
        if let Some((slot, value)) = pending.filter(|_| shown == self.stack.len()) {
            self.show_pending(slot, value);
        }
        // A new container is a new snapshot; a primitive one is new when its value changed, as
        // JavaScript's `!==` tells.
        if before.is_container() || before != Shape::of(self.published.as_ref()) {
            self.revision += 1;
        }
    }

    fn show_pending(&mut self, slot: Slot, value: Value) {
        // Show the pending scalar, and log how to take it back out.
        let mut overlay: Vec<Op> = self.log.iter().map(copy_op).collect();
        overlay.push(Op::Place(slot.clone(), value));
        let mut replay = Replay { record: true, ..Replay::default() };
        replay.root(&mut self.published, &mut overlay.into_iter());
        self.log.push(Op::Restore(slot, replay.displaced));
    }
}

/// What tells two published values apart the way JavaScript's `!==` does, without copying.
#[derive(Debug, PartialEq)]
enum Shape {
    Undefined,
    Container,
    /// A root string only grows, so its length tells whether it changed.
    String(usize),
    Scalar(Value),
}

impl Shape {
    fn of(value: Option<&Value>) -> Self {
        match value {
            None => Shape::Undefined,
            Some(Value::Array(_) | Value::Object(_)) => Shape::Container,
            Some(Value::String(text)) => Shape::String(text.len()),
            Some(scalar) => Shape::Scalar(scalar.clone()),
        }
    }

    fn is_container(&self) -> bool {
        matches!(self, Shape::Container)
    }
}

/// Applies logged ops to a published value.
#[derive(Default)]
struct Replay {
    /// Whether to keep what a `Place` displaces (for the pending-scalar overlay).
    record: bool,
    displaced: Option<Value>,
    /// The emptied buffer of an applied `Append`, for the parser's next one.
    spare: String,
}

impl Replay {
    /// Keeps a piece's buffer for reuse, unless it is large (a big piece's buffer is not worth
    /// holding on to for the rest of the stream).
    fn keep(&mut self, mut buffer: String) {
        const MAX_SPARE: usize = 4096;
        if buffer.capacity() > self.spare.capacity() && buffer.capacity() <= MAX_SPARE {
            buffer.clear();
            self.spare = buffer;
        }
    }

    fn root(&mut self, root: &mut Option<Value>, ops: &mut impl Iterator<Item = Op>) {
        while let Some(op) = ops.next() {
            match op {
                Op::Place(_, value) => {
                    let old = root.replace(value);
                    if self.record {
                        self.displaced = old;
                    }
                }
                Op::Append(_, text) => {
                    if let Some(Value::String(existing)) = root {
                        existing.push_str(&text);
                    }
                    self.keep(text);
                }
                Op::Restore(_, displaced) => *root = displaced,
                Op::Enter(_) => match root.as_mut() {
                    Some(node) => self.container(node, ops),
                    None => skip_container(ops),
                },
                Op::Exit => {}
            }
        }
    }

    /// Applies ops inside `node` until the matching `Exit` (or the end).
    fn container(&mut self, node: &mut Value, ops: &mut impl Iterator<Item = Op>) {
        while let Some(op) = ops.next() {
            match op {
                Op::Exit => return,
                Op::Place(slot, value) => {
                    let old = set_slot(node, &slot, value);
                    if self.record {
                        self.displaced = old;
                    }
                }
                Op::Append(slot, text) => {
                    if let Some(Value::String(existing)) = child_mut(node, &slot) {
                        existing.push_str(&text);
                    }
                    self.keep(text);
                }
                Op::Restore(slot, displaced) => restore_slot(node, &slot, displaced),
                Op::Enter(slot) => match child_mut(node, &slot) {
                    Some(child) => self.container(child, ops),
                    None => skip_container(ops),
                },
            }
        }
    }
}

/// Replays `ops` (made inside a container) into `node`.
fn replay_into(node: &mut Value, ops: Vec<Op>) {
    Replay::default().container(node, &mut ops.into_iter());
}

/// Skips the ops of a container that could not be found (never happens for a consistent log).
fn skip_container(ops: &mut impl Iterator<Item = Op>) {
    let mut depth = 1usize;
    for op in ops.by_ref() {
        match op {
            Op::Enter(_) => depth += 1,
            Op::Exit => {
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
            _ => {}
        }
    }
}

/// Logs string growth; the last op is an `Append` only while the same string is open. A new
/// `Append` takes its buffer from `spare`.
fn append_op(ops: &mut Vec<Op>, slot: &Slot, text: &str, spare: &mut String) {
    match ops.last_mut() {
        Some(Op::Append(_, existing)) => existing.push_str(text),
        _ => {
            let mut buffer = std::mem::take(spare);
            buffer.push_str(text);
            ops.push(Op::Append(slot.clone(), buffer));
        }
    }
}

fn copy_op(op: &Op) -> Op {
    match op {
        Op::Place(slot, value) => Op::Place(slot.clone(), value.clone()),
        Op::Enter(slot) => Op::Enter(slot.clone()),
        Op::Exit => Op::Exit,
        Op::Append(slot, text) => Op::Append(slot.clone(), text.clone()),
        Op::Restore(slot, value) => Op::Restore(slot.clone(), value.clone()),
    }
}

/// The value at `slot` in `node`, found in O(1) except for a member whose key was a duplicate.
fn child_mut<'a>(node: &'a mut Value, slot: &Slot) -> Option<&'a mut Value> {
    match (node, slot) {
        (Value::Array(items), Slot::Element(index)) => items.get_mut(*index),
        (Value::Object(members), Slot::Member { fresh: true, .. }) => members.values_mut().next_back(),
        (Value::Object(members), Slot::Member { key, fresh: false }) => members.get_mut(&**key),
        _ => None,
    }
}

/// Sets the value at `slot` in `node`; returns the value it replaced.
fn set_slot(node: &mut Value, slot: &Slot, value: Value) -> Option<Value> {
    match (node, slot) {
        (Value::Array(items), Slot::Element(index)) => {
            if let Some(existing) = items.get_mut(*index) {
                return Some(std::mem::replace(existing, value));
            }
            items.push(value);
            None
        }
        (Value::Object(members), Slot::Member { key, .. }) => members.insert(key.to_string(), value),
        _ => None,
    }
}

fn restore_slot(node: &mut Value, slot: &Slot, displaced: Option<Value>) {
    match (node, slot, displaced) {
        (node, slot, Some(value)) => {
            set_slot(node, slot, value);
        }
        (Value::Array(items), Slot::Element(_), None) => {
            items.pop();
        }
        (Value::Object(members), Slot::Member { key, .. }, None) => {
            // The overlay member is the last one, so this keeps the order.
            members.remove(&**key);
        }
        _ => {}
    }
}

/// The arguments of one streaming tool call: the raw text, for the one full parse when the call
/// ends, and a [`StreamingJsonParser`] for the partial arguments in between.
///
/// The partial arguments are borrowed from the parser's published snapshot: an object snapshot
/// is shown as is, any other snapshot (or none) as an empty object.
#[derive(Debug, Default)]
pub struct ToolCallArgumentsStream {
    text: String,
    parser: StreamingJsonParser,
    empty: Map<String, Value>,
    seen_revision: u64,
    revision: u64,
}

/// What [`ToolCallArgumentsStream::replace`] returns.
#[derive(Debug)]
pub struct Replaced<'a> {
    /// The missing piece when the new text continued the old one (possibly empty); `None` when
    /// the stream started over.
    pub delta: Option<String>,
    /// The partial arguments of the new text.
    pub arguments: &'a Map<String, Value>,
}

impl ToolCallArgumentsStream {
    /// A stream that has received nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw argument text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Appends a piece of argument text; returns the partial arguments.
    ///
    /// The arguments changed exactly when [`revision`](Self::revision) changed (the reference
    /// returns a new object then).
    pub fn append(&mut self, delta: &str) -> &Map<String, Value> {
        self.text.push_str(delta);
        self.parser.append(delta);
        self.partial()
    }

    /// Takes the provider's complete argument text. When it continues the text so far, returns the
    /// missing piece as `delta`; otherwise starts over with `text`. Either way returns the partial
    /// arguments of `text`.
    pub fn replace(&mut self, text: &str) -> Replaced<'_> {
        if let Some(delta) = text.strip_prefix(self.text.as_str()) {
            let delta = delta.to_owned();
            if !delta.is_empty() {
                self.text.push_str(&delta);
                self.parser.append(&delta);
            }
            return Replaced { delta: Some(delta), arguments: self.partial() };
        }
        self.text.clear();
        self.parser = StreamingJsonParser::new();
        self.text.push_str(text);
        self.parser.append(text);
        Replaced { delta: None, arguments: self.partial() }
    }

    /// The final arguments: one full parse of the complete text, which reports malformed
    /// arguments (see [`parse_tool_call_arguments`]).
    pub fn finish(&self) -> ParsedArguments {
        parse_tool_call_arguments(Some(&self.text))
    }

    /// The partial arguments as of the last `append` or `replace`.
    pub fn arguments(&self) -> &Map<String, Value> {
        match self.parser.current() {
            Some(Value::Object(members)) => members,
            _ => &self.empty,
        }
    }

    /// Counts the changes of the partial arguments.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    fn partial(&mut self) -> &Map<String, Value> {
        self.parser.snapshot();
        let published = self.parser.revision();
        if published != self.seen_revision {
            self.seen_revision = published;
            self.revision += 1;
        }
        self.arguments()
    }
}

fn is_delimiter(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b',' | b':' | b'{' | b'}' | b'[' | b']' | b'"')
}

/// Whether `token` is a JSON number, `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`, or without the
/// exponent part when `exponent` is false.
fn is_number(token: &str, exponent: bool) -> bool {
    let bytes = token.as_bytes();
    let digits = |from: usize| bytes[from.min(bytes.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut at = usize::from(bytes.first() == Some(&b'-'));
    match bytes.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at += digits(at),
        _ => return false,
    }
    if bytes.get(at) == Some(&b'.') {
        let count = digits(at + 1);
        if count == 0 {
            return false;
        }
        at += 1 + count;
    }
    if exponent && matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let count = digits(at);
        if count == 0 {
            return false;
        }
        at += count;
    }
    at == bytes.len()
}

fn number_of(token: &str) -> Value {
    number_value(token.parse::<f64>().unwrap_or(f64::NAN))
}

/// The value of a complete number or literal token; `None` for anything else.
fn scalar_value(token: &str) -> Option<Value> {
    match token {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        "null" => Some(Value::Null),
        _ => is_number(token, true).then(|| number_of(token)),
    }
}

/// The value an unterminated number or literal token shows.
fn pending_scalar_value(token: &str) -> Option<Value> {
    if "true".starts_with(token) {
        return Some(Value::Bool(true));
    }
    if "false".starts_with(token) {
        return Some(Value::Bool(false));
    }
    if "null".starts_with(token) {
        return Some(Value::Null);
    }
    if is_number(token, true) {
        return Some(number_of(token));
    }
    // A mantissa followed by an exponent marker without digits shows the mantissa.
    let unsigned = token.strip_suffix(['+', '-']).unwrap_or(token);
    let mantissa = unsigned.strip_suffix(['e', 'E'])?;
    is_number(mantissa, false).then(|| number_of(mantissa))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::js::stringify;

    /// The one-step path of `append_into` must publish exactly what `append` and
    /// `publish_object_into` publish, on every document of the reference fixtures, in pieces of
    /// every recorded size (and the pieces of a long string that take the fast path).
    #[test]
    fn append_into_publishes_what_append_then_publish_does() {
        let fixture: Value =
            serde_json::from_str(include_str!("../tests/fixtures/streaming-json.json")).unwrap_or_default();
        let mut documents: Vec<String> = fixture["streams"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|entry| entry["document"].as_str().map(str::to_owned))
            .chain(
                fixture["parses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|entry| entry["input"].as_str().map(str::to_owned)),
            )
            .collect();
        assert!(documents.len() > 300, "fixture documents: {}", documents.len());
        documents.push(format!(
            r#"{{"path":"a.txt","content":"{}","more":[{{"x":"{}"}}]}}"#,
            "ab".repeat(300),
            "c".repeat(99)
        ));
        let mut fast_pieces = 0;
        for document in &documents {
            for size in 1..=8 {
                let mut fused = StreamingJsonParser::without_changes();
                let mut fused_map = Map::new();
                let mut stepped = StreamingJsonParser::without_changes();
                let mut stepped_map = Map::new();
                for (step, piece) in crate::js::utf16_chunks(document, size).into_iter().enumerate() {
                    let revision = fused.revision();
                    if fused.continue_string_into(piece, &mut fused_map) {
                        fast_pieces += 1;
                    } else {
                        fused.append(piece);
                        fused.publish_object_into(&mut fused_map);
                    }
                    stepped.append(piece);
                    stepped.publish_object_into(&mut stepped_map);
                    assert_eq!(fused_map, stepped_map, "{document} size {size} step {step}");
                    assert_eq!(fused.revision(), stepped.revision(), "{document} size {size} step {step}");
                    assert!(fused.revision() >= revision);
                }
            }
        }
        assert!(fast_pieces > 1_000, "fast path taken {fast_pieces} times");
    }

    fn snapshots(pieces: &[&str]) -> Vec<String> {
        let mut parser = StreamingJsonParser::new();
        pieces
            .iter()
            .map(|piece| {
                parser.append(piece);
                parser.snapshot().map_or_else(|| "undefined".to_owned(), stringify)
            })
            .collect()
    }

    #[test]
    fn reads_incomplete_text() {
        assert_eq!(
            snapshots(&["{\"a\"", ":", " \"he", "llo\\", "n\", \"b\": [1, tr", "ue, 1e", "5]}"]),
            vec![
                "{}",
                "{}",
                "{\"a\":\"he\"}",
                "{\"a\":\"hello\"}",
                "{\"a\":\"hello\\n\",\"b\":[1,true]}",
                "{\"a\":\"hello\\n\",\"b\":[1,true,1]}",
                "{\"a\":\"hello\\n\",\"b\":[1,true,100000]}",
            ]
        );
    }

    #[test]
    fn pending_scalars() {
        assert_eq!(pending_scalar_value("1e"), Some(number_value(1.0)));
        assert_eq!(pending_scalar_value("-1.5E+"), Some(number_value(-1.5)));
        assert_eq!(pending_scalar_value("1.e"), None);
        assert_eq!(pending_scalar_value("-"), None);
        assert_eq!(pending_scalar_value("fa"), Some(Value::Bool(false)));
        assert_eq!(scalar_value("01"), None);
        assert_eq!(scalar_value("-0.5e-3"), Some(number_value(-0.0005)));
    }

    #[test]
    fn surrogate_escapes_pair_up() {
        assert_eq!(
            snapshots(&["[\"\\ud83d", "\\ude00\"", ",\"\\ud83dx\"]"]),
            vec!["[\"\"]", "[\"😀\"]", "[\"😀\",\"\u{fffd}x\"]"]
        );
    }

    #[test]
    fn reports_changes() {
        let mut parser = StreamingJsonParser::new();
        let changes = parser.append("{\"a\": \"x").to_vec();
        assert_eq!(changes.len(), 2);
        let changes = parser.append("yz\", \"b\": 2}").to_vec();
        assert_eq!(
            changes,
            vec![
                JsonChange::Append { path: Arc::from(vec![PathSegment::Key(Arc::from("a"))]), text: "yz".to_owned() },
                JsonChange::Set { path: Arc::from(vec![PathSegment::Key(Arc::from("b"))]), value: number_value(2.0) },
            ]
        );
    }
}
