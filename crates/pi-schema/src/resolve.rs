//! Reference resolution at compile time: base URIs (`$id`), anchors (`$anchor`, `$dynamicAnchor`) and JSON
//! Pointer fragments over the one schema document. Schema positions are named by JSON Pointers from the root.

use std::collections::HashMap;

use serde_json::Value;

/// How deeply subschemas may nest (far beyond any real tool schema).
pub(crate) const MAX_SCHEMA_DEPTH: usize = 256;

/// The base URI of a root schema without `$id`.
pub(crate) const DEFAULT_BASE: &str = "https://json-schema.invalid/root.json";

/// Keywords whose value is one subschema.
const SCHEMA_KEYWORDS: [&str; 12] = [
    "additionalProperties",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "contentSchema",
    "items",
];
/// Keywords whose value maps names to subschemas.
const MAP_KEYWORDS: [&str; 6] =
    ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
/// Keywords whose value lists subschemas.
const ARRAY_KEYWORDS: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/// The identifiers of one schema document.
#[derive(Default)]
pub(crate) struct Resolver {
    /// Schema resource URI (without fragment) to the position of its root.
    resources: HashMap<String, String>,
    /// `uri#name` of every anchor to its position.
    anchors: HashMap<String, String>,
    /// Position of every indexed schema object to its base URI.
    base_of: HashMap<String, String>,
}

impl Resolver {
    /// Indexes every schema object reachable through schema keywords from the root.
    pub(crate) fn new(root: &Value) -> Self {
        let mut r = Self::default();
        r.resources.insert(DEFAULT_BASE.to_owned(), String::new());
        r.index(root, String::new(), DEFAULT_BASE, 0);
        r
    }

    fn index(&mut self, node: &Value, at: String, base: &str, depth: usize) {
        let Value::Object(map) = node else { return };
        if depth > MAX_SCHEMA_DEPTH || self.base_of.contains_key(&at) {
            return;
        }
        let mut b = base.to_owned();
        if let Some(Value::String(id)) = map.get("$id") {
            let uri = resolve_uri(id, base);
            b = document_of(&uri).to_owned();
            self.resources.insert(b.clone(), at.clone());
            if uri.len() > b.len() + 1 {
                self.anchors.insert(uri, at.clone());
            }
        }
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(Value::String(name)) = map.get(key) {
                self.anchors.insert(format!("{b}#{name}"), at.clone());
            }
        }
        self.base_of.insert(at.clone(), b.clone());
        for key in SCHEMA_KEYWORDS {
            if let Some(child) = map.get(key) {
                self.index(child, super::js::pointer(&at, key), &b, depth + 1);
            }
        }
        for key in MAP_KEYWORDS {
            if let Some(Value::Object(children)) = map.get(key) {
                let here = super::js::pointer(&at, key);
                for (name, child) in children {
                    self.index(child, super::js::pointer(&here, name), &b, depth + 1);
                }
            }
        }
        for key in ARRAY_KEYWORDS {
            if let Some(Value::Array(children)) = map.get(key) {
                let here = super::js::pointer(&at, key);
                for (i, child) in children.iter().enumerate() {
                    self.index(child, format!("{here}/{i}"), &b, depth + 1);
                }
            }
        }
    }

    /// The base URI of the schema object at `at`, whose parent has `parent`.
    pub(crate) fn base_for(&self, at: &str, node: &Value, parent: &str) -> String {
        if let Some(b) = self.base_of.get(at) {
            return b.clone();
        }
        match node.get("$id") {
            Some(Value::String(id)) => document_of(&resolve_uri(id, parent)).to_owned(),
            _ => parent.to_owned(),
        }
    }

    /// The position and base URI `reference` names from `base`; `None` when it names nothing.
    pub(crate) fn find(&self, root: &Value, reference: &str, base: &str) -> Option<(String, String)> {
        let uri = resolve_uri(reference, base);
        let doc = document_of(&uri).to_owned();
        let fragment = if uri.len() > doc.len() { percent_decode(&uri[doc.len() + 1..])? } else { String::new() };
        let resource = self.resources.get(&doc)?;
        if fragment.is_empty() {
            return Some((resource.clone(), doc));
        }
        if fragment.starts_with('/') {
            return self.follow(root, resource, &doc, &fragment);
        }
        let at = self.anchors.get(&format!("{doc}#{fragment}"))?;
        let b = self.base_of.get(at).cloned().unwrap_or(doc);
        Some((at.clone(), b))
    }

    /// Follows a JSON Pointer fragment from the resource at `start`.
    fn follow(&self, root: &Value, start: &str, doc: &str, fragment: &str) -> Option<(String, String)> {
        let mut at = start.to_owned();
        let mut node = root.pointer(start)?;
        let mut b = doc.to_owned();
        for raw in fragment.split('/').skip(1) {
            let key = raw.replace("~1", "/").replace("~0", "~");
            node = match node {
                Value::Object(map) => map.get(&key)?,
                Value::Array(items) => {
                    let canonical = key == "0" || (!key.starts_with('0') && key.bytes().all(|c| c.is_ascii_digit()));
                    if !canonical {
                        return None;
                    }
                    items.get(key.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
            at = super::js::pointer(&at, &key);
            if let Some(nb) = self.base_of.get(&at) {
                b = nb.clone();
            }
        }
        Some((at, b))
    }
}

/// `uri` without its fragment.
pub(crate) fn document_of(uri: &str) -> &str {
    uri.split_once('#').map_or(uri, |(doc, _)| doc)
}

fn has_scheme(s: &str) -> bool {
    let Some(colon) = s.find(':') else { return false };
    let scheme = &s[..colon];
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `reference` resolved against the absolute `base` (RFC 3986 resolution; bases without a hierarchical part only
/// take fragment references).
pub(crate) fn resolve_uri(reference: &str, base: &str) -> String {
    if has_scheme(reference) {
        let (scheme, rest) = reference.split_once(':').unwrap_or((reference, ""));
        return format!("{}:{}", scheme.to_ascii_lowercase(), rest);
    }
    let base = document_of(base);
    let Some((scheme, rest)) = base.split_once(':') else {
        return reference.to_owned();
    };
    if let Some(fragment) = reference.strip_prefix('#') {
        return format!("{base}#{fragment}");
    }
    let Some(after) = rest.strip_prefix("//") else {
        // An opaque base (a URN): only fragments resolve against it.
        return reference.to_owned();
    };
    let authority_end = after.find(['/', '?']).unwrap_or(after.len());
    let authority = &after[..authority_end];
    let tail = &after[authority_end..];
    let (base_path, base_query) = tail.split_once('?').map_or((tail, None), |(p, q)| (p, Some(q)));
    if let Some(network) = reference.strip_prefix("//") {
        return format!("{scheme}://{network}");
    }
    if reference.is_empty() {
        return base.to_owned();
    }
    let (ref_main, ref_fragment) = reference.split_once('#').map_or((reference, None), |(m, f)| (m, Some(f)));
    let (ref_path, ref_query) = ref_main.split_once('?').map_or((ref_main, None), |(p, q)| (p, Some(q)));
    let (path, query) = if ref_path.is_empty() {
        (base_path.to_owned(), ref_query.or(base_query))
    } else if ref_path.starts_with('/') {
        (remove_dot_segments(ref_path), ref_query)
    } else {
        let dir = base_path.rfind('/').map_or("/", |i| &base_path[..=i]);
        (remove_dot_segments(&format!("{dir}{ref_path}")), ref_query)
    };
    let path = if path.is_empty() { "/".to_owned() } else { path };
    let mut out = format!("{scheme}://{authority}{path}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    if let Some(f) = ref_fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

/// `decodeURIComponent`: `None` for a malformed escape or invalid UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_references() {
        assert_eq!(resolve_uri("#/$defs/a", DEFAULT_BASE), format!("{DEFAULT_BASE}#/$defs/a"));
        assert_eq!(resolve_uri("other.json#x", DEFAULT_BASE), "https://json-schema.invalid/other.json#x");
        assert_eq!(resolve_uri("../a/./b.json", "https://h/x/y/z.json"), "https://h/x/a/b.json");
        assert_eq!(resolve_uri("/abs", "https://h/x/y"), "https://h/abs");
        assert_eq!(resolve_uri("#frag", "urn:example:thing"), "urn:example:thing#frag");
        assert_eq!(resolve_uri("HTTP://h/p", DEFAULT_BASE), "http://h/p");
    }

    #[test]
    fn finds_ids_anchors_and_pointers() {
        let root = serde_json::json!({
            "$defs": {
                "a": {"$id": "https://e.com/a.json", "$defs": {"b": {"$anchor": "bee", "type": "string"}}},
                "c/d": {"type": "integer"}
            }
        });
        let r = Resolver::new(&root);
        let (at, base) = r.find(&root, "https://e.com/a.json#bee", DEFAULT_BASE).expect("anchor");
        assert_eq!(at, "/$defs/a/$defs/b");
        assert_eq!(base, "https://e.com/a.json");
        let (at, _) = r.find(&root, "#/$defs/b", "https://e.com/a.json").expect("pointer in resource");
        assert_eq!(at, "/$defs/a/$defs/b");
        let (at, _) = r.find(&root, "#/$defs/c~1d", DEFAULT_BASE).expect("escaped pointer");
        assert_eq!(at, "/$defs/c~1d");
        assert!(r.find(&root, "#/$defs/missing", DEFAULT_BASE).is_none());
        assert!(r.find(&root, "#%zz", DEFAULT_BASE).is_none());
    }
}
