//! Cross-crate integration tests for pi-rs live in `tests/tests/`; fixtures in `tests/fixtures/`.
