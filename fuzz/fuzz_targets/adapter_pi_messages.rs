//! The pi-messages adapter over an arbitrary response body, split at arbitrary points.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::adapter("pi-messages", data));
