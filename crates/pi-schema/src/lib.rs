//! Validation of tool-call arguments against a tool's JSON Schema, with coercion, as pi-ai's
//! `validateToolArguments` does it through the coercing validator of `@earendil-works/pi-schema` (the reference's
//! package this crate is named after): the arguments are coerced towards the schema (numeric strings to numbers,
//! `"true"` to `true`, a single value to a one-item array, an optional `null` dropped, ...), then checked; a failure
//! is explained keyword by keyword, at dotted paths (`edits.0.oldText`).
//!
//! Schemas follow JSON Schema 2020-12 (draft-7 `items` arrays, `additionalItems`, `definitions` and `dependencies`
//! are understood too). A `$ref` that names nothing rejects only the values at its place ("unresolved reference").
//! `pi-types` re-exports this crate as `pi_types::validation`; each tool compiles its [`ArgumentValidator`] once.
//!
//! ```
//! use pi_schema::{validate_tool_arguments, ArgumentValidator};
//! use serde_json::{json, Map, Value};
//!
//! let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
//! let validator = ArgumentValidator::new(&schema)?;
//!
//! // Coerced towards the schema: the numeric string becomes a number.
//! assert_eq!(validator.parse(&json!({"n": "4"})), Ok(json!({"n": 4})));
//!
//! // A failure is the reference's error text, with the arguments as received.
//! let mut args = Map::new();
//! args.insert("n".into(), Value::from("four"));
//! let error = validate_tool_arguments("count", &validator, &args, None).unwrap_err();
//! assert!(error.starts_with("Validation failed for tool \"count\":\n  - n: expected integer, got string"));
//! # Ok::<(), pi_schema::SchemaError>(())
//! ```

mod check;
mod coerce;
mod explain;
mod format;
mod js;
mod regex;
mod resolve;
mod schema;

use serde_json::{Map, Value};

/// A tool schema that cannot be compiled. The messages are the reference's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A subschema is neither an object nor a boolean; holds that value as JSON.
    #[error("A schema must be an object or a boolean, got {0}")]
    NotASchema(String),
    /// A `pattern` or a `patternProperties` key is no valid ECMAScript regular expression.
    #[error("Invalid regular expression: /{pattern}/: {reason}")]
    InvalidPattern {
        /// The pattern as written.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
    /// Subschemas nest deeper than any tool schema does.
    #[error("Schema nesting is too deep")]
    TooDeep,
}

/// One failure of the arguments: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationIssue {
    /// The dotted path of the failing value: `root` for the arguments themselves, else `n`, `edits.0.oldText`.
    pub path: String,
    /// The same place as a JSON Pointer (`""`, `/n`, `/edits/0/oldText`).
    pub pointer: String,
    /// What is wrong: `missing`, `expected integer, got string`, `unknown field`, ...
    pub message: String,
}

/// The text of the error the reference throws when it runs out of stack (a schema that recurses in place).
const STACK_EXHAUSTED: &str = "Maximum call stack size exceeded";

/// The error pi-ai throws for a tool whose parameter schema is `true` or `false`.
const WEAK_MAP_KEY: &str = "Invalid value used as weak map key";

/// A tool's parameter schema, compiled once: it coerces and validates the arguments of each call.
pub struct ArgumentValidator {
    compiled: schema::Compiled,
    /// Whether the schema is `true` or `false`, which pi-ai cannot cache (it keys a WeakMap by the schema).
    boolean_schema: bool,
}

impl std::fmt::Debug for ArgumentValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentValidator").field("nodes", &self.compiled.nodes.len()).finish()
    }
}

/// The result of one run: valid (with the coerced value), invalid, or out of recursion budget.
enum Outcome {
    Valid(Value),
    Invalid(Vec<ValidationIssue>),
    TooDeep,
}

impl ArgumentValidator {
    /// Compiles a JSON Schema (an object or a boolean).
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        Ok(Self { compiled: schema::Compiled::new(schema)?, boolean_schema: schema.is_boolean() })
    }

    /// Coerces `args` towards the schema, then checks them: the coerced arguments when they are valid, else the
    /// failures of the coerced arguments in the reference's order. The input is never modified.
    pub fn parse(&self, args: &Value) -> Result<Value, Vec<ValidationIssue>> {
        match self.run(args) {
            Outcome::Valid(value) => Ok(value),
            Outcome::Invalid(issues) => Err(issues),
            Outcome::TooDeep => Err(vec![ValidationIssue {
                path: format_path(""),
                pointer: String::new(),
                message: STACK_EXHAUSTED.to_owned(),
            }]),
        }
    }

    fn run(&self, args: &Value) -> Outcome {
        let run = check::Run::new(&self.compiled);
        let coerced = coerce::Coercer::new(&run).coerce(args);
        let value = coerced.as_ref().unwrap_or(args);
        if run.ok(self.compiled.root, value) {
            if run.overflowed() {
                return Outcome::TooDeep;
            }
            return Outcome::Valid(coerced.unwrap_or_else(|| args.clone()));
        }
        let failures = explain::Explainer::new(&run).errors(value);
        if run.overflowed() {
            return Outcome::TooDeep;
        }
        Outcome::Invalid(
            failures
                .into_iter()
                .map(|f| ValidationIssue { path: format_path(&f.pointer), pointer: f.pointer, message: f.message })
                .collect(),
        )
    }
}

/// A JSON Pointer as the dotted path shown to the model: `""` is `root`, `/edits/0/oldText` is `edits.0.oldText`.
pub fn format_path(pointer: &str) -> String {
    match pointer.strip_prefix('/') {
        None if pointer.is_empty() => "root".to_owned(),
        None => pointer.to_owned(),
        Some(rest) => rest.split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect::<Vec<_>>().join("."),
    }
}

/// The JSON Schema of a Rust type as a tool's `parameters`: inlined, without the `$schema`
/// and `title` keys that only add tokens.
pub fn schema_for<A: schemars::JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft07().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut value = schema.to_value();
    if let Value::Object(map) = &mut value {
        map.shift_remove("title");
        map.shift_remove("$schema");
    }
    value
}

/// Validates one tool call's arguments as pi-ai's `validateToolArguments`: `Ok` with the coerced arguments, else
/// the text of the error it throws. `arguments_error` (why the arguments could not be parsed) fails the call
/// before any validation; `arguments` are the raw arguments, shown in the message as received.
pub fn validate_tool_arguments(
    tool_name: &str,
    validator: &ArgumentValidator,
    arguments: &Map<String, Value>,
    arguments_error: Option<&str>,
) -> Result<Value, String> {
    if let Some(error) = arguments_error.filter(|e| !e.is_empty()) {
        return Err(format!("Invalid arguments for tool \"{tool_name}\": {error}"));
    }
    if validator.boolean_schema {
        // pi-ai's validator cache is a WeakMap keyed by the schema, and a boolean is no valid key.
        return Err(WEAK_MAP_KEY.to_owned());
    }
    let args = Value::Object(arguments.clone());
    match validator.run(&args) {
        Outcome::Valid(value) => Ok(value),
        Outcome::TooDeep => Err(STACK_EXHAUSTED.to_owned()),
        Outcome::Invalid(issues) => {
            let lines: Vec<String> = issues.iter().map(|i| format!("  - {}: {}", i.path, i.message)).collect();
            Err(format!(
                "Validation failed for tool \"{tool_name}\":\n{}\n\nReceived arguments:\n{}",
                lines.join("\n"),
                pi_json::stringify_pretty(&args, 2)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn schema_for_inlines_and_drops_title_and_meta_schema() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Edit {
            line: u32,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Args {
            path: String,
            edits: Vec<Edit>,
        }
        let schema = schema_for::<Args>();
        assert_eq!(schema.get("title"), None);
        assert_eq!(schema.get("$schema"), None);
        assert_eq!(schema.get("definitions"), None);
        assert_eq!(schema["required"], json!(["path", "edits"]));
        assert_eq!(schema["properties"]["edits"]["items"]["properties"]["line"]["type"], "integer");
    }

    #[test]
    fn formats_paths() {
        assert_eq!(format_path(""), "root");
        assert_eq!(format_path("/n"), "n");
        assert_eq!(format_path("/edits/0/oldText"), "edits.0.oldText");
        assert_eq!(format_path("/a~1b/c~0d"), "a/b.c~d");
    }

    #[test]
    fn validator_is_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ArgumentValidator>();
    }

    #[test]
    fn arguments_error_comes_first() {
        let v = ArgumentValidator::new(&json!({"type": "object"})).expect("schema");
        let err = validate_tool_arguments("t", &v, &Map::new(), Some("bad json")).expect_err("fails");
        assert_eq!(err, "Invalid arguments for tool \"t\": bad json");
        assert!(validate_tool_arguments("t", &v, &Map::new(), Some("")).is_ok());
    }

    #[test]
    fn in_place_recursion_fails_without_overflowing() {
        let schema = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        let v = ArgumentValidator::new(&schema).expect("compiles");
        let err = validate_tool_arguments("t", &v, &object(json!({"x": 1})), None).expect_err("fails");
        assert_eq!(err, STACK_EXHAUSTED);
    }

    #[test]
    fn deep_values_stay_within_a_small_stack() {
        let mut value = json!(1);
        for _ in 0..400 {
            value = json!({"next": value});
        }
        let schema = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
        let v = ArgumentValidator::new(&schema).expect("compiles");
        let handle =
            std::thread::Builder::new().stack_size(1 << 20).spawn(move || v.parse(&value).is_err()).expect("thread");
        assert!(handle.join().unwrap_or(false));
    }

    #[test]
    fn rejects_bad_schemas() {
        let err = ArgumentValidator::new(&json!({"properties": {"a": 5}})).expect_err("not a schema");
        assert_eq!(err.to_string(), "A schema must be an object or a boolean, got 5");
        assert!(matches!(ArgumentValidator::new(&json!({"pattern": "("})), Err(SchemaError::InvalidPattern { .. })));
        assert!(matches!(ArgumentValidator::new(&json!("string")), Err(SchemaError::NotASchema(_))));
    }

    #[test]
    fn never_panics_on_odd_schemas_or_arguments() {
        let schemas = [
            json!({"type": 5, "enum": 3, "const": null, "required": [1, null, "a"], "properties": [1]}),
            json!({"minLength": "2", "maximum": "x", "multipleOf": 0, "items": [], "prefixItems": {}}),
            json!({"allOf": {}, "anyOf": [], "oneOf": [true, false], "not": true, "if": false}),
            json!({"$ref": "#/nowhere", "$dynamicRef": "#x", "$id": "::bad::", "$anchor": 5}),
            json!({"$ref": "#/$defs/a/0", "$defs": {"a": [true]}}),
            json!({"$ref": "http://[bad/", "dependencies": {"a": ["b", 1, null]}, "dependentRequired": {"a": 5}}),
            json!({"type": ["array"], "contains": {}, "minContains": -1, "maxContains": 0.5, "uniqueItems": true}),
            json!({"patternProperties": {"^(a)\\1$": {"type": "integer"}}, "additionalProperties": {"$ref": "#"}}),
            json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]}),
            json!({"items": {"$ref": "#"}, "type": "array"}),
            json!({"format": "date", "type": ["string", "integer"], "pattern": "^\\d+$"}),
        ];
        let args = [
            json!({}),
            json!({"a": null, "b": [1, "2", {"c": null}], "": {"~/": -0.0}}),
            json!({"a": "1e400", "b": 1e308, "c": "-9007199254740993n", "d": "\u{feff}12\u{3000}"}),
        ];
        for schema in &schemas {
            let Ok(validator) = ArgumentValidator::new(schema) else { continue };
            for a in &args {
                let _ = validator.parse(a);
                let _ = validate_tool_arguments("t", &validator, &object(a.clone()), None);
            }
        }
    }

    #[test]
    fn never_modifies_the_input() {
        let v = ArgumentValidator::new(&json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
            .expect("schema");
        let args = json!({"n": "4"});
        assert_eq!(v.parse(&args), Ok(json!({"n": 4})));
        assert_eq!(args, json!({"n": "4"}));
    }
}
