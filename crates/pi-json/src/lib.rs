//! JSON as the reference runtime of the pi agent (`@earendil-works/pi-ai`) reads and writes it.
//!
//! `pi-json` is the JavaScript side of JSON for the pi crates: text exactly as `JSON.stringify`
//! writes it, `JSON.parse` with V8's error messages, and the tolerant parser of tool-call
//! arguments that arrive in pieces. `pi-types` re-exports it as `pi_types::json`.
//!
//! ```
//! use pi_json::{stringify, ToolCallArgumentsStream};
//! use serde_json::json;
//!
//! // Integer-like keys first, numbers spelled as JavaScript spells them.
//! assert_eq!(stringify(&json!({"b": 1.0, "10": 1e21, "2": -0.0})), r#"{"2":0,"10":1e+21,"b":1}"#);
//!
//! // Streamed arguments: a usable value after every piece, the finished parse at the end.
//! let mut stream = ToolCallArgumentsStream::new();
//! stream.append(r#"{"city": "Os"#);
//! assert_eq!(stream.arguments().get("city"), Some(&json!("Os")));
//! stream.append(r#"lo"}"#);
//! let parsed = stream.finish();
//! assert_eq!(parsed.arguments.get("city"), Some(&json!("Oslo")));
//! assert!(parsed.arguments_error.is_none());
//! ```
//!
//! * [`js`]: JavaScript-exact `JSON.stringify` for [`serde_json::Value`], number formatting,
//!   property order and the UTF-16 helpers.
//! * [`parse`]: `JSON.parse` with V8's error messages, string repair, the finished tool-call
//!   argument parse and the tolerant parse of incomplete text.
//! * [`streaming`]: the incremental parser of streamed tool-call arguments.
//!
//! Values follow the JSON data model of [`serde_json::Value`]; where JavaScript values do not fit
//! (lone surrogates, `NaN`, `±Infinity`), each module documents the substitution it makes.

pub mod js;
pub mod parse;
mod scan;
pub mod streaming;

pub use js::{
    sort_keys_recursive, string_utf16_len, stringify, stringify_object_utf16_len, stringify_pretty,
    stringify_utf16_len, utf16_chunks, utf16_len, write_stringify, write_stringify_object,
};
pub use parse::{
    parse_js, parse_json_with_repair, parse_streaming_json, parse_tool_call_arguments, repair_json, JsonSyntaxError,
    ParsedArguments,
};
pub use scan::plain_run_end;
pub use streaming::{JsonChange, JsonPath, PathSegment, Replaced, StreamingJsonParser, ToolCallArgumentsStream};
