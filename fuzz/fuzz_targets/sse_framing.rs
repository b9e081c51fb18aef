//! SSE and Gemini framing: any split of the bytes gives the events of the whole, and the
//! frame guard never panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::sse_framing(data));
