//! ECMAScript regular expressions (`pattern`, `patternProperties`, the `regex` format), compiled by `regress`, an
//! ECMAScript regex engine: `\d` and `\w` are ASCII, `\p{..}` classes, lookarounds and backreferences work as in
//! JavaScript.
//!
//! The reference compiles a pattern as `new RegExp(source, "u")` and, when that throws, in the legacy (non-Unicode)
//! mode, where a brace or bracket that opens nothing is a literal character (Annex B). `regress` implements the
//! Unicode mode; the legacy literals are escaped before the second attempt.

/// A compiled ECMAScript pattern; `is_match` searches (it is not anchored), as `RegExp.prototype.test`.
pub(crate) struct JsRegex {
    source: String,
    matcher: regress::Regex,
}

impl JsRegex {
    /// Compiles `source`; the error explains why it is no valid pattern.
    pub(crate) fn new(source: &str) -> Result<Self, String> {
        let compile = |pattern: &str| regress::Regex::with_flags(pattern, "u");
        let matcher = compile(source)
            .or_else(|first| compile(&escape_stray_brackets(source)).map_err(|_| first))
            .map_err(|e| e.to_string())?;
        Ok(Self { source: source.to_owned(), matcher })
    }

    /// The pattern as written in the schema.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Whether the pattern matches somewhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.matcher.find(text).is_some()
    }
}

/// `source` with `{`, `}` and `]` escaped where they do not open a quantifier or close a class (legacy-mode
/// literals).
fn escape_stray_brackets(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len() + 8);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.get(i + 1) {
                    out.push(*next);
                }
                i += 2;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            ']' => out.push('\\'),
            '{' if !in_class && !is_quantifier(&chars[i..]) => out.push('\\'),
            '}' if !in_class => {
                let opened = out.rfind('{').is_some_and(|o| !out[..o].ends_with('\\') && !out[o..].contains('}'));
                if !opened {
                    out.push('\\');
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Whether `rest` starts with a `{n}`, `{n,}` or `{n,m}` quantifier.
fn is_quantifier(rest: &[char]) -> bool {
    let body: String = rest.iter().skip(1).take_while(|c| **c != '}').collect();
    if rest.len() < body.chars().count() + 2 {
        return false;
    }
    let (min, max) = body.split_once(',').map_or((body.as_str(), None), |(a, b)| (a, Some(b)));
    !min.is_empty()
        && min.chars().all(|c| c.is_ascii_digit())
        && max.is_none_or(|m| m.chars().all(|c| c.is_ascii_digit()))
}

impl std::fmt::Debug for JsRegex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "/{}/", self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::JsRegex;

    #[test]
    fn matches_ecmascript_semantics() {
        let digits = JsRegex::new(r"^\d+$").expect("valid");
        assert!(digits.is_match("123"));
        assert!(!digits.is_match("١٢٣"), "\\d is ASCII in ECMAScript");
        let look = JsRegex::new("^(?=.*[0-9])(?=.*[a-z]).{4,}$").expect("valid");
        assert!(look.is_match("abc1"));
        assert!(!look.is_match("abcdef"));
        assert!(JsRegex::new("x").expect("valid").is_match("axb"), "unanchored search");
        assert!(JsRegex::new("(").is_err());
        assert!(JsRegex::new("a**").is_err());
        let literal = JsRegex::new("a{").expect("legacy literal brace");
        assert!(literal.is_match("xa{") && !literal.is_match("a"));
        assert!(JsRegex::new("^x{2}$").expect("quantifier").is_match("xx"));
        assert!(JsRegex::new("a]b").expect("legacy literal bracket").is_match("a]b"));
    }
}
