//! The Gemini framer's cost is linear in its input, however the input is split: counted in
//! bytes (copies and searches, [`GeminiFramer::work`]) and in bytes allocated (a counting
//! global allocator, so this test has its own binary), never timed.
//!
//! The quadratic framer this guards against rescanned the whole buffer for a delimiter on
//! every chunk (one large event in many reads: work ~ n² / chunk) and removed each event from
//! the front of the buffer on its own (many events in one read: work ~ n² / event). Against
//! it, the first case below counted 1 544 times its input and the second 30 131 times, while
//! the linear framer stays under 5; its allocations (8.0 and 6.3 times the input) were no
//! larger than the linear framer's, which is why the work is counted as well as the bytes
//! allocated.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;

use pi_providers::transport::sse::{GeminiFramer, GeminiItem};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Most bytes of work per input byte: decoding, appending, one search, one copy into the
/// item, and moving the unconsumed tail once per read, with room to spare.
const MAX_WORK_PER_BYTE: u64 = 6;
/// Most bytes allocated per input byte: the decoded chunk items, the buffer's doubling
/// growth and the data items, with room to spare.
const MAX_ALLOCATED_PER_BYTE: u64 = 10;

fn event(text: &str) -> String {
    format!("data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"{text}\"}}]}}}}]}}\r\n\r\n")
}

/// Frame `chunks`; the number of data items, the framer's work and the bytes allocated.
fn frame(chunks: &[&[u8]]) -> (usize, u64, u64) {
    let region = Region::new(GLOBAL);
    let mut framer = GeminiFramer::default();
    let mut out = Vec::new();
    let mut data = 0;
    for chunk in chunks {
        framer.push(chunk, &mut out);
        // As the adapter does: items are handled after each read, not kept.
        data += out.drain(..).filter(|item| matches!(item, GeminiItem::Data(_))).count();
    }
    assert_eq!(framer.finish(), Ok(()));
    let stats = region.change();
    let allocated = stats.bytes_allocated as u64 + stats.bytes_reallocated.max(0) as u64;
    (data, framer.work(), allocated)
}

fn check(case: &str, input: &[u8], chunks: &[&[u8]], events: usize) {
    let (data, work, allocated) = frame(chunks);
    let n = input.len() as u64;
    println!(
        "{case}: {} bytes in {} reads: work {work} ({:.1}x), allocated {allocated} ({:.1}x)",
        n,
        chunks.len(),
        work as f64 / n as f64,
        allocated as f64 / n as f64
    );
    assert_eq!(data, events, "{case}");
    assert!(work <= MAX_WORK_PER_BYTE * n, "{case}: {work} bytes of work for {n} bytes of input");
    assert!(allocated <= MAX_ALLOCATED_PER_BYTE * n, "{case}: {allocated} bytes allocated for {n} bytes of input");
}

/// One test, so that no other test allocates while the counting region is open.
#[test]
fn gemini_framing_work_and_allocations_are_linear() {
    // One 1 MiB event in 1 KiB reads.
    let large = event(&"a".repeat(1 << 20));
    let chunks: Vec<&[u8]> = large.as_bytes().chunks(1024).collect();
    check("one large event, many reads", large.as_bytes(), &chunks, 1);

    // 20 000 events in one read.
    let many: String = (0..20_000).map(|i| event(&format!("event {i}"))).collect();
    check("many events, one read", many.as_bytes(), &[many.as_bytes()], 20_000);

    // The same events in 7-byte reads (delimiters split across reads).
    let chunks: Vec<&[u8]> = many.as_bytes().chunks(7).collect();
    check("many events, 7-byte reads", many.as_bytes(), &chunks, 20_000);
}
