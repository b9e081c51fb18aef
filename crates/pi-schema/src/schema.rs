//! The compiled schema: every subschema the validator can reach, analysed once into a node of an arena, with its
//! references resolved, its patterns compiled and its keywords read defensively (a keyword of the wrong type is
//! ignored, as the reference does).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::format::{self, FormatCheck};
use super::js;
use super::regex::JsRegex;
use super::resolve::{Resolver, DEFAULT_BASE, MAX_SCHEMA_DEPTH};
use super::SchemaError;

/// The index of a node in [`Compiled::nodes`].
pub(crate) type NodeId = usize;

/// A JSON type a value can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonType {
    String,
    Number,
    Integer,
    Boolean,
    Null,
    Array,
    Object,
}

impl JsonType {
    /// The type of a name; `None` for names no JSON value has (`bytes`, `bigint`, `undefined`, unknown ones).
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "number" => Self::Number,
            "integer" => Self::Integer,
            "boolean" => Self::Boolean,
            "null" => Self::Null,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }

    /// Whether `v` has this type (a number is finite; an integer is a number without fraction).
    pub(crate) fn matches(self, v: &Value) -> bool {
        match self {
            Self::String => v.is_string(),
            Self::Number => v.is_number(),
            Self::Integer => js::is_integer(v),
            Self::Boolean => v.is_boolean(),
            Self::Null => v.is_null(),
            Self::Array => v.is_array(),
            Self::Object => v.is_object(),
        }
    }
}

/// A `$ref` (or `$dynamicRef`) as written, and the node it names (`None`: it names nothing, and rejects).
pub(crate) struct Reference {
    pub text: String,
    pub target: Option<NodeId>,
}

/// One entry of the explainer's view of `dependentRequired` and `dependencies`.
pub(crate) enum Dependency {
    Required(Vec<String>),
    Schema(NodeId),
}

/// A compiled subschema.
pub(crate) enum Node {
    /// `true` or `false`.
    Bool(bool),
    /// A schema object.
    Schema(Box<SchemaNode>),
}

/// The keywords of a schema object, as the checks, the coercion and the explanations read them.
#[derive(Default)]
pub(crate) struct SchemaNode {
    /// `type`, when present: the types a value may have (names no JSON value has are left out).
    pub types: Option<Vec<JsonType>>,
    /// `type` for messages: its entries joined by " or ".
    pub type_text: String,
    /// `type` when it is one string.
    pub type_single: Option<String>,
    /// The string entries of `type` (one for a string `type`).
    pub type_names: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub const_value: Option<Value>,
    pub min_length: Option<f64>,
    pub max_length: Option<f64>,
    pub pattern: Option<JsRegex>,
    pub format: Option<(String, FormatCheck)>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: Option<f64>,
    pub exclusive_maximum: Option<f64>,
    pub multiple_of: Option<f64>,
    /// `properties` in declared order (empty unless it is an object).
    pub properties: Vec<(String, NodeId)>,
    /// Whether `properties` is an object.
    pub has_properties: bool,
    /// Whether the node declares members (`properties`, `patternProperties` or `additionalProperties` present).
    pub declares_members: bool,
    /// Whether `properties` or `patternProperties` is present (an untyped node converts as an object).
    pub object_like: bool,
    /// The string entries of `required`, in order.
    pub required: Vec<String>,
    pub pattern_properties: Vec<(JsRegex, NodeId)>,
    pub additional_properties: Option<NodeId>,
    pub property_names: Option<NodeId>,
    pub min_properties: Option<f64>,
    pub max_properties: Option<f64>,
    /// `dependentRequired` and the list form of `dependencies`, as checked.
    pub dependent_required: Vec<(String, Vec<String>)>,
    /// `dependentSchemas` and the schema form of `dependencies`, as checked.
    pub dependent_schemas_checked: Vec<(String, NodeId)>,
    /// `dependentRequired` merged with `dependencies` (later keys win), as explained.
    pub dependencies_explained: Vec<(String, Dependency)>,
    /// `dependentSchemas`, as explained.
    pub dependent_schemas: Vec<(String, NodeId)>,
    /// `items` when it is an array (the draft-7 tuple form).
    pub items_list: Option<Vec<NodeId>>,
    /// `items` when it is one schema.
    pub items: Option<NodeId>,
    pub prefix_items: Option<Vec<NodeId>>,
    pub additional_items: Option<NodeId>,
    /// Whether the node has `items` or `prefixItems` (an untyped node converts as an array).
    pub array_like: bool,
    pub min_items: Option<f64>,
    pub max_items: Option<f64>,
    pub unique_items: bool,
    pub contains: Option<NodeId>,
    pub min_contains: f64,
    pub max_contains: f64,
    pub all_of: Option<Vec<NodeId>>,
    pub any_of: Option<Vec<NodeId>>,
    pub one_of: Option<Vec<NodeId>>,
    pub not: Option<NodeId>,
    /// `if`, with `then` and `else`.
    pub condition: Option<NodeId>,
    pub then: Option<NodeId>,
    pub otherwise: Option<NodeId>,
    pub reference: Option<Reference>,
    pub dynamic_reference: Option<Reference>,
}

impl SchemaNode {
    /// The tuple items and the schema of the items after them, as checked and explained.
    pub(crate) fn tuple(&self) -> (&[NodeId], Option<NodeId>) {
        match &self.items_list {
            Some(list) => (list, self.additional_items),
            None => (self.prefix_items.as_deref().unwrap_or(&[]), self.items),
        }
    }

    /// The schema coercion applies to the array item at `index`.
    pub(crate) fn coerced_item(&self, index: usize) -> Option<NodeId> {
        if let Some(list) = &self.items_list {
            return list.get(index).copied();
        }
        if let Some(p) = self.prefix_items.as_ref().and_then(|p| p.get(index)) {
            return Some(*p);
        }
        self.items
    }
}

/// A compiled schema document.
pub(crate) struct Compiled {
    pub nodes: Vec<Node>,
    pub root: NodeId,
}

impl Compiled {
    /// Compiles `schema`: every subschema reachable from the root, every reference resolved.
    pub(crate) fn new(schema: &Value) -> Result<Self, SchemaError> {
        let mut c =
            Compiler { root: schema, resolver: Resolver::new(schema), nodes: Vec::new(), cache: HashMap::new() };
        let root = c.node("", DEFAULT_BASE, 0)?;
        Ok(Self { nodes: c.nodes, root })
    }

    /// The node `id`; an out-of-range id (never built) reads as `true`.
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        self.nodes.get(id).unwrap_or(&Node::Bool(true))
    }

    /// The schema object of `id`, if it is one.
    pub(crate) fn schema(&self, id: NodeId) -> Option<&SchemaNode> {
        match self.node(id) {
            Node::Schema(s) => Some(s),
            Node::Bool(_) => None,
        }
    }

    /// The node a branch stands for when it is a `$ref` (its target, `false` when unresolved), else the branch.
    pub(crate) fn through_ref(&self, id: NodeId) -> Option<&SchemaNode> {
        let s = self.schema(id)?;
        match &s.reference {
            Some(r) => r.target.and_then(|t| self.schema(t)),
            None => Some(s),
        }
    }
}

struct Compiler<'a> {
    root: &'a Value,
    resolver: Resolver,
    nodes: Vec<Node>,
    /// Position (JSON Pointer from the root) to its node.
    cache: HashMap<String, NodeId>,
}

fn number(map: &Map<String, Value>, key: &str) -> Option<f64> {
    map.get(key).and_then(js::num)
}

impl Compiler<'_> {
    /// The node of the subschema at `at`, whose parent has base URI `base`.
    fn node(&mut self, at: &str, base: &str, depth: usize) -> Result<NodeId, SchemaError> {
        if let Some(&id) = self.cache.get(at) {
            return Ok(id);
        }
        if depth > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep);
        }
        let root = self.root;
        let value = root.pointer(at).unwrap_or(&Value::Null);
        let map = match value {
            Value::Bool(b) => {
                self.nodes.push(Node::Bool(*b));
                return Ok(self.nodes.len() - 1);
            }
            Value::Object(map) => map,
            other => return Err(SchemaError::NotASchema(pi_json::stringify(other))),
        };
        let id = self.nodes.len();
        // A placeholder, so a reference back to this node while it is built finds it.
        self.nodes.push(Node::Bool(true));
        self.cache.insert(at.to_owned(), id);
        let b = self.resolver.base_for(at, value, base);
        let node = self.build(map, at, &b, depth)?;
        self.nodes[id] = Node::Schema(Box::new(node));
        Ok(id)
    }

    fn child(&mut self, at: &str, key: &str, base: &str, depth: usize) -> Result<NodeId, SchemaError> {
        self.node(&js::pointer(at, key), base, depth + 1)
    }

    fn list(
        &mut self,
        map: &Map<String, Value>,
        at: &str,
        key: &str,
        b: &str,
        d: usize,
    ) -> Result<Option<Vec<NodeId>>, SchemaError> {
        let Some(Value::Array(items)) = map.get(key) else { return Ok(None) };
        let here = js::pointer(at, key);
        let mut ids = Vec::with_capacity(items.len());
        for i in 0..items.len() {
            ids.push(self.node(&format!("{here}/{i}"), b, d + 1)?);
        }
        Ok(Some(ids))
    }

    fn one(
        &mut self,
        map: &Map<String, Value>,
        at: &str,
        key: &str,
        b: &str,
        d: usize,
    ) -> Result<Option<NodeId>, SchemaError> {
        if map.contains_key(key) {
            self.child(at, key, b, d).map(Some)
        } else {
            Ok(None)
        }
    }

    fn named(
        &mut self,
        map: &Map<String, Value>,
        at: &str,
        key: &str,
        b: &str,
        d: usize,
    ) -> Result<Vec<(String, NodeId)>, SchemaError> {
        let Some(Value::Object(children)) = map.get(key) else { return Ok(Vec::new()) };
        let here = js::pointer(at, key);
        let mut out = Vec::with_capacity(children.len());
        for name in js_keys(children) {
            out.push((name.clone(), self.node(&js::pointer(&here, name), b, d + 1)?));
        }
        Ok(out)
    }

    fn reference(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        b: &str,
        d: usize,
    ) -> Result<Option<Reference>, SchemaError> {
        let Some(Value::String(text)) = map.get(key) else { return Ok(None) };
        let target = match self.resolver.find(self.root, text, b) {
            Some((at, base)) => Some(self.node(&at, &base, d + 1)?),
            None => None,
        };
        Ok(Some(Reference { text: text.clone(), target }))
    }

    fn build(&mut self, map: &Map<String, Value>, at: &str, b: &str, d: usize) -> Result<SchemaNode, SchemaError> {
        let mut n = SchemaNode::default();
        if let Some(t) = map.get("type") {
            let entries: Vec<&Value> = match t {
                Value::Array(list) => list.iter().collect(),
                other => vec![other],
            };
            n.types = Some(entries.iter().filter_map(|e| e.as_str().and_then(JsonType::from_name)).collect());
            n.type_text = entries.iter().map(|e| js::join_string(e)).collect::<Vec<_>>().join(" or ");
            n.type_single = t.as_str().map(str::to_owned);
            n.type_names = entries.iter().filter_map(|e| e.as_str().map(str::to_owned)).collect();
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            n.enum_values = Some(values.clone());
        }
        n.const_value = map.get("const").cloned();
        n.min_length = number(map, "minLength");
        n.max_length = number(map, "maxLength");
        if let Some(Value::String(source)) = map.get("pattern") {
            n.pattern = Some(regex(source)?);
        }
        if let Some(Value::String(name)) = map.get("format") {
            n.format = format::lookup(name).map(|check| (name.clone(), check));
        }
        n.minimum = number(map, "minimum");
        n.maximum = number(map, "maximum");
        n.exclusive_minimum = number(map, "exclusiveMinimum");
        n.exclusive_maximum = number(map, "exclusiveMaximum");
        n.multiple_of = number(map, "multipleOf");

        n.has_properties = map.get("properties").is_some_and(Value::is_object);
        n.properties = self.named(map, at, "properties", b, d)?;
        n.object_like = map.contains_key("properties") || map.contains_key("patternProperties");
        n.declares_members = n.object_like || map.contains_key("additionalProperties");
        if let Some(Value::Array(required)) = map.get("required") {
            n.required = required.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect();
        }
        for (source, id) in self.named(map, at, "patternProperties", b, d)? {
            n.pattern_properties.push((regex(&source)?, id));
        }
        n.additional_properties = self.one(map, at, "additionalProperties", b, d)?;
        n.property_names = self.one(map, at, "propertyNames", b, d)?;
        n.min_properties = number(map, "minProperties");
        n.max_properties = number(map, "maxProperties");
        self.dependencies(&mut n, map, at, b, d)?;

        match map.get("items") {
            Some(Value::Array(_)) => {
                n.items_list = self.list(map, at, "items", b, d)?;
                n.additional_items = self.one(map, at, "additionalItems", b, d)?;
            }
            Some(_) => n.items = self.one(map, at, "items", b, d)?,
            None => {}
        }
        if n.items_list.is_none() {
            n.prefix_items = self.list(map, at, "prefixItems", b, d)?;
        }
        n.array_like = map.contains_key("items") || map.contains_key("prefixItems");
        n.min_items = number(map, "minItems");
        n.max_items = number(map, "maxItems");
        n.unique_items = map.get("uniqueItems") == Some(&Value::Bool(true));
        n.contains = self.one(map, at, "contains", b, d)?;
        n.min_contains = number(map, "minContains").unwrap_or(1.0);
        n.max_contains = number(map, "maxContains").unwrap_or(f64::INFINITY);

        n.all_of = self.list(map, at, "allOf", b, d)?;
        n.any_of = self.list(map, at, "anyOf", b, d)?;
        n.one_of = self.list(map, at, "oneOf", b, d)?;
        n.not = self.one(map, at, "not", b, d)?;
        // `if` counts only with `then` or `else` (alone it decides nothing).
        if map.contains_key("if") && (map.contains_key("then") || map.contains_key("else")) {
            n.condition = self.one(map, at, "if", b, d)?;
            n.then = self.one(map, at, "then", b, d)?;
            n.otherwise = self.one(map, at, "else", b, d)?;
        }
        n.reference = self.reference(map, "$ref", b, d)?;
        n.dynamic_reference = self.reference(map, "$dynamicRef", b, d)?;
        Ok(n)
    }

    fn dependencies(
        &mut self,
        n: &mut SchemaNode,
        map: &Map<String, Value>,
        at: &str,
        b: &str,
        d: usize,
    ) -> Result<(), SchemaError> {
        let keys = |list: &[Value]| list.iter().filter_map(js::key_string).collect::<Vec<_>>();
        let mut explained: Vec<(String, Dependency)> = Vec::new();
        let mut set = |key: &str, dep: Dependency| match explained.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = dep,
            None => explained.push((key.to_owned(), dep)),
        };
        if let Some(Value::Object(entries)) = map.get("dependentRequired") {
            let here = js::pointer(at, "dependentRequired");
            for key in js_keys(entries) {
                let value = &entries[key];
                match value {
                    Value::Array(list) => {
                        n.dependent_required.push((key.clone(), keys(list)));
                        set(key, Dependency::Required(keys(list)));
                    }
                    Value::Bool(_) | Value::Object(_) => {
                        set(key, Dependency::Schema(self.node(&js::pointer(&here, key), b, d + 1)?));
                    }
                    _ => {}
                }
            }
        }
        if let Some(Value::Object(entries)) = map.get("dependencies") {
            let here = js::pointer(at, "dependencies");
            for key in js_keys(entries) {
                let value = &entries[key];
                if let Value::Array(list) = value {
                    n.dependent_required.push((key.clone(), keys(list)));
                    set(key, Dependency::Required(keys(list)));
                } else {
                    let id = self.node(&js::pointer(&here, key), b, d + 1)?;
                    n.dependent_schemas_checked.push((key.clone(), id));
                    set(key, Dependency::Schema(id));
                }
            }
        }
        n.dependencies_explained = explained;
        n.dependent_schemas = self.named(map, at, "dependentSchemas", b, d)?;
        n.dependent_schemas_checked.extend(n.dependent_schemas.iter().cloned());
        Ok(())
    }
}

/// The keys of a JSON object in JavaScript's property order: array-index keys ascending, then the others in order.
fn js_keys(map: &Map<String, Value>) -> Vec<&String> {
    pi_json::js::members_in_js_order(map)
        .into_iter()
        .filter_map(|(key, _)| map.get_key_value(key).map(|(k, _)| k))
        .collect()
}

fn regex(source: &str) -> Result<JsRegex, SchemaError> {
    JsRegex::new(source).map_err(|reason| SchemaError::InvalidPattern { pattern: source.to_owned(), reason })
}
