//! `insta` settings that make event snapshots stable: timestamps, durations and usage vary
//! from run to run, so they are redacted.
//!
//! ```
//! let settings = pi_testkit::redactions::event_settings();
//! settings.bind(|| {
//!     let event = serde_json::json!({"type": "message_end", "message": {"role": "user", "content": "hi", "timestamp": 17}});
//!     insta::assert_json_snapshot!(event, @r###"
//!     {
//!       "message": {
//!         "content": "hi",
//!         "role": "user",
//!         "timestamp": "[timestamp]"
//!       },
//!       "type": "message_end"
//!     }
//!     "###);
//! });
//! ```

/// Settings that redact `timestamp`, `durationMs` and `usage` at any depth and sort maps.
pub fn event_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_sort_maps(true);
    settings.add_redaction(".**.timestamp", "[timestamp]");
    settings.add_redaction(".**.durationMs", "[duration]");
    settings.add_redaction(".**.usage", "[usage]");
    settings
}
