//! The scan for the end of a run of plain string bytes, shared by every reader and writer of
//! JSON strings here (and by `pi-providers`' typed decode).

/// Where the run of bytes from `at` that a JSON string holds as they are ends: at the first
/// quote, backslash or control character (below 0x20), or at the end of `bytes`. These are
/// the bytes a reader must decode and a writer must escape; any other byte, multi-byte UTF-8
/// included, stands for itself.
///
/// Eight bytes at a time: a string's bytes are mostly plain.
///
/// Public because `pi-providers`' typed decoders scan JSON strings with it too (through
/// `pi_types::json`): one implementation of the rule for every JSON reader of the workspace.
///
/// ```
/// assert_eq!(pi_json::plain_run_end(br#"abc"def"#, 0), 3);
/// assert_eq!(pi_json::plain_run_end(b"tab\there", 1), 3);
/// assert_eq!(pi_json::plain_run_end("héllo".as_bytes(), 0), 6);
/// ```
#[inline]
pub fn plain_run_end(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    if at >= bytes.len() {
        return at;
    }
    // From here `at` is at most `bytes.len()`, which is at most `isize::MAX`: `at + 8` cannot
    // overflow.
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // A byte is flagged when it is below 0x20, or equal to `"` or `\` (the zero-byte test
        // of `word ^ byte`); bytes of 0x80 and up never are. The three tests share their
        // `& !byte & 0x80` (XOR with an ASCII byte keeps the high bit), and a borrow only
        // flags bytes above a flagged one, so the lowest flag is exact.
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        let below = quote.wrapping_sub(ONES) | backslash.wrapping_sub(ONES) | word.wrapping_sub(ONES * 0x20);
        let flagged = below & !word & HIGHS;
        if flagged != 0 {
            return at + (flagged.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&byte) = bytes.get(at) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            break;
        }
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_run_ends_at_the_first_byte_to_decode() {
        for text in ["", "abc", "abcdefgh", "abcdefghi\"", "ab\\c", "a\u{1}b", "ééééé\"", "0123456789abcdef\u{1f}"]
        {
            let bytes = text.as_bytes();
            for start in 0..=bytes.len() {
                let expected = bytes[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
                assert_eq!(
                    plain_run_end(bytes, start),
                    expected.map_or(bytes.len(), |p| start + p),
                    "{text:?} from {start}"
                );
            }
        }
    }
}
