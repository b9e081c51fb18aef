//! Tool-argument validation of arbitrary arguments against arbitrary schemas.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pi_fuzz::arg_validation(data));
