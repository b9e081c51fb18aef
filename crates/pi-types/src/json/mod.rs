//! JSON as the reference runtime reads and writes it.
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
pub mod streaming;

pub use js::{
    sort_keys_recursive, string_utf16_len, stringify, stringify_object_utf16_len, stringify_pretty,
    stringify_utf16_len, utf16_chunks, utf16_len, write_stringify, write_stringify_object,
};
pub use parse::{
    parse_js, parse_json_with_repair, parse_streaming_json, parse_tool_call_arguments, repair_json, JsonSyntaxError,
    ParsedArguments,
};
pub use streaming::{JsonChange, JsonPath, PathSegment, Replaced, StreamingJsonParser, ToolCallArgumentsStream};
