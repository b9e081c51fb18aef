//! The streaming JSON parser fed in pieces against the final parse.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::streaming_json(data));
