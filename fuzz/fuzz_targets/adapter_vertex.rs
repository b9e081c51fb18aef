//! The google-vertex adapter (API-key mode, custom base URL) over an arbitrary response body,
//! split at arbitrary points.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::adapter("google-vertex", data));
