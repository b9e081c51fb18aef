//! The bedrock-converse-stream adapter over an arbitrary response body (AWS event-stream
//! bytes), split at arbitrary points.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::adapter("bedrock-converse-stream", data));
