//! Message and event deserialization (and re-serialization) of arbitrary JSON.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::wire_json(data));
