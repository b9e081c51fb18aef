//! A strict pull reader of one JSON text, for the typed decodes of delta events.
//!
//! # Protocol
//! The caller reads the value it expects next (`object`, `string`, `int`, ...); each read
//! returns `None` for anything else, and for any text `JSON.parse` rejects. After a `None` the
//! reader is in no defined state and the whole decode is given up: the event then takes the
//! generic path (`js_json::parse`), which has the reference's semantics. So the reader never
//! needs to explain an error, and it may decline what it does not handle exactly: a name with
//! escapes, a lone surrogate escape, `-0`, an integer beyond 2^53, nesting deeper than
//! [`MAX_DEPTH`].
//!
//! Why not serde_json: for the events of a stream (objects of 60–300 bytes) its typed decode
//! was the largest part of a delta's whole way from socket to listener; this reader takes a
//! fraction of that (docs/performance.md, "Decoding an event").
//! sonic-rs and jiter were no faster on objects of this size.

use std::borrow::Cow;

use pi_types::json::plain_run_end;

/// Containers nested deeper than this are declined (serde_json's limit as well).
pub(crate) const MAX_DEPTH: u32 = 128;

/// Reads one JSON text; see the [module docs](self).
pub(crate) struct Reader<'a> {
    text: &'a str,
    at: usize,
    depth: u32,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, at: 0, depth: 0 }
    }

    /// A reader of `text` from `at`, inside `depth` containers: where a reader of the same
    /// bytes up to `at` was (see [`Reader::members_from`]).
    pub(crate) fn resume(text: &'a str, at: usize, depth: u32) -> Self {
        Self { text, at, depth }
    }

    /// Where the reader is in its text.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// The next byte that is not whitespace, without taking it.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        let bytes = self.text.as_bytes();
        // Compact JSON has no whitespace: one comparison (whitespace is at most b' ').
        match bytes.get(self.at) {
            Some(&byte) if byte > b' ' => return Some(byte),
            None => return None,
            Some(_) => {}
        }
        while let Some(&byte) = bytes.get(self.at) {
            match byte {
                b' ' | b'\t' | b'\n' | b'\r' => self.at += 1,
                _ => return Some(byte),
            }
        }
        None
    }

    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Nothing but whitespace is left.
    pub(crate) fn end(mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// `None` for `null` (read), else what `read` reads.
    #[inline]
    pub(crate) fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| None),
            _ => read(self).map(Some),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at.checked_add(word.len())?;
        (self.text.as_bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// A string: borrowed from the text, or decoded into an owned one when it has escapes.
    #[inline]
    pub(crate) fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        let end = plain_run_end(self.text.as_bytes(), start);
        match *self.text.as_bytes().get(end)? {
            b'"' => {
                self.at = end + 1;
                self.text.get(start..end).map(Cow::Borrowed)
            }
            b'\\' => {
                self.at = end;
                self.escaped(start)
            }
            _ => None, // a control character
        }
    }

    /// The rest of a string with escapes, from its first backslash at `self.at`.
    #[cold]
    fn escaped(&mut self, start: usize) -> Option<Cow<'a, str>> {
        let mut out = String::from(self.text.get(start..self.at)?);
        loop {
            let bytes = self.text.as_bytes();
            match *bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    let escape = *bytes.get(self.at + 1)?;
                    self.at += 2;
                    out.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    });
                }
                0..=0x1f => return None,
                _ => {
                    let end = plain_run_end(bytes, self.at);
                    out.push_str(self.text.get(self.at..end)?);
                    self.at = end;
                }
            }
        }
    }

    /// The character of a `\uXXXX` escape (its `\u` read), or of a surrogate pair of two. A lone
    /// surrogate is declined: JavaScript keeps it, a Rust string cannot.
    fn unicode_escape(&mut self) -> Option<char> {
        let unit = self.hex4()?;
        match unit {
            0xd800..=0xdbff => {
                self.literal(b"\\u")?;
                let low = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return None;
                }
                char::from_u32(0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00))
            }
            0xdc00..=0xdfff => None,
            _ => char::from_u32(unit),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let end = self.at.checked_add(4)?;
        let digits = self.text.as_bytes().get(self.at..end)?;
        let mut unit = 0;
        for &digit in digits {
            unit = unit * 16 + char::from(digit).to_digit(16)?;
        }
        self.at = end;
        Some(unit)
    }

    /// An integer that a JavaScript number holds exactly (|n| ≤ 2^53) and writes as it is read:
    /// a fraction, an exponent or `-0` is declined.
    pub(crate) fn int(&mut self) -> Option<i64> {
        self.peek()?;
        let bytes = self.text.as_bytes();
        let negative = bytes.get(self.at) == Some(&b'-');
        let first = self.at + usize::from(negative);
        let end = digits_end(bytes, first);
        let digits = bytes.get(first..end)?;
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') || (negative && digits == b"0") {
            return None;
        }
        if matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) || digits.len() > 16 {
            return None;
        }
        let magnitude = digits.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
        if magnitude > 1 << 53 {
            return None;
        }
        self.at = end;
        Some(if negative { -magnitude } else { magnitude })
    }

    /// `true` or `false`.
    pub(crate) fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => None,
        }
    }

    /// An object: `member` is called with each member's name and must read its value. A name
    /// with escapes is declined.
    #[inline]
    pub(crate) fn object(&mut self, mut member: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.enter()?;
        if self.peek()? == b'}' {
            self.at += 1;
            self.depth -= 1;
            return Some(());
        }
        // A loop of its own rather than `members_from`: this one is on every event's path and
        // inlines with its member reader as a whole.
        loop {
            let Cow::Borrowed(name) = self.string()? else { return None };
            self.eat(b':')?;
            member(self, name)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The rest of an object from the value of its member `name` (its `{`, the members before
    /// and the name read): `member` reads that value first, then each further member's.
    ///
    /// This and [`Reader::rest_of_object`] are always inlined: each instance serves one decode,
    /// whose output its closure fills; out of line, that output stays behind a pointer for every
    /// member read (measured in docs/performance.md, "Why the code is shaped so").
    #[inline(always)]
    pub(crate) fn members_from(
        &mut self,
        name: &str,
        mut member: impl FnMut(&mut Self, &str) -> Option<()>,
    ) -> Option<()> {
        member(self, name)?;
        self.rest_of_object(member)
    }

    /// The rest of an object after one of its members' values: its further members (`member`
    /// reads each one's value) and its `}`.
    #[inline(always)]
    pub(crate) fn rest_of_object(&mut self, mut member: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
        loop {
            if self.after_member()? {
                return Some(());
            }
            let Cow::Borrowed(name) = self.string()? else { return None };
            self.eat(b':')?;
            member(self, name)?;
        }
    }

    /// After a member's value: `,` (`false`, another member follows) or the object's `}`
    /// (`true`).
    #[inline]
    fn after_member(&mut self) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.at += 1;
                Some(false)
            }
            b'}' => {
                self.at += 1;
                self.depth -= 1;
                Some(true)
            }
            _ => None,
        }
    }

    /// An array of exactly one element, which `element` reads.
    pub(crate) fn single<T>(&mut self, element: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.eat(b'[')?;
        let value = element(self)?;
        self.eat(b']')?;
        Some(value)
    }

    /// Any value, checked and passed over.
    pub(crate) fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|reader, _| reader.skip()),
            b'[' => {
                self.at += 1;
                self.enter()?;
                if self.peek()? == b']' {
                    self.at += 1;
                } else {
                    loop {
                        self.skip()?;
                        match self.peek()? {
                            b',' => self.at += 1,
                            b']' => {
                                self.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                self.depth -= 1;
                Some(())
            }
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// A number of JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let mut at = self.at;
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        match bytes.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => at = digits_end(bytes, at),
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            let fraction = at + 1;
            at = digits_end(bytes, fraction);
            if at == fraction {
                return None;
            }
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let exponent = at;
            at = digits_end(bytes, exponent);
            if at == exponent {
                return None;
            }
        }
        self.at = at;
        Some(())
    }
}

/// Where the ASCII digits from `at` end.
fn digits_end(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_digit) {
        at += 1;
    }
    at
}
