//! The proxy client over an arbitrary proxy event stream, split at arbitrary points.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::adapter("proxy", data));
