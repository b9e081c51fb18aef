//! The calculator's arithmetic: `+ - * / % ^`, unary signs, parentheses and decimals over
//! `f64`, by recursive descent with a nesting limit (model-written input must not overflow
//! the stack).
//!
//! Grammar: `sum := product (('+'|'-') product)*`, `product := power (('*'|'/'|'%') power)*`,
//! `power := unary ('^' power)?` (right-associative), `unary := ('+'|'-') unary | atom`,
//! `atom := number | '(' sum ')'`. `×` and `÷` are accepted for `*` and `/`.

/// Deepest nesting of parentheses and signs accepted.
const MAX_DEPTH: usize = 64;

/// Why an expression has no value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CalcError {
    /// Not a well-formed expression.
    #[error("cannot read \"{expression}\": {reason}")]
    Syntax {
        /// The expression.
        expression: String,
        /// What is wrong.
        reason: String,
    },
    /// Division by zero or a result too large.
    #[error("\"{0}\" has no finite value")]
    NotFinite(String),
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    depth: usize,
}

type Step = Result<f64, String>;

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.peek().map(|(_, c)| *c)
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn sum(&mut self) -> Step {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.chars.next();
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Step {
        let mut value = self.power()?;
        while let Some(op @ ('*' | '/' | '%' | '×' | '÷')) = self.peek() {
            self.chars.next();
            let rhs = self.power()?;
            value = match op {
                '*' | '×' => value * rhs,
                '%' => value % rhs,
                _ => value / rhs,
            };
        }
        Ok(value)
    }

    fn power(&mut self) -> Step {
        let base = self.unary()?;
        if self.peek() == Some('^') {
            self.chars.next();
            self.enter()?;
            let exponent = self.power()?;
            self.depth -= 1;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Step {
        match self.peek() {
            Some(sign @ ('+' | '-')) => {
                self.chars.next();
                self.enter()?;
                let value = self.unary()?;
                self.depth -= 1;
                Ok(if sign == '-' { -value } else { value })
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Step {
        match self.peek() {
            Some('(') => {
                self.chars.next();
                self.enter()?;
                let value = self.sum()?;
                self.depth -= 1;
                match self.peek() {
                    Some(')') => {
                        self.chars.next();
                        Ok(value)
                    }
                    _ => Err("missing `)`".into()),
                }
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let mut text = String::new();
                while let Some((_, c)) = self.chars.next_if(|(_, c)| c.is_ascii_digit() || *c == '.' || *c == '_') {
                    if c != '_' {
                        text.push(c);
                    }
                }
                text.parse::<f64>().map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) => Err(format!("unexpected `{c}`")),
            None => Err("unexpected end".into()),
        }
    }
}

/// The value of an arithmetic expression.
pub fn evaluate(expression: &str) -> Result<f64, CalcError> {
    let syntax = |reason: String| CalcError::Syntax { expression: expression.trim().to_owned(), reason };
    let mut parser = Parser { chars: expression.char_indices().peekable(), depth: 0 };
    let value = parser.sum().map_err(syntax)?;
    if let Some(c) = parser.peek() {
        return Err(syntax(format!("unexpected `{c}`")));
    }
    if !value.is_finite() {
        return Err(CalcError::NotFinite(expression.trim().to_owned()));
    }
    Ok(value)
}

/// A number as people write it: integers without `.0`, others with at most 10 decimals.
pub fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{}", value as i64);
    }
    let text = format!("{value:.10}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_associativity_and_signs() {
        assert_eq!(evaluate("12 * (3 + 4)"), Ok(84.0));
        assert_eq!(evaluate("2 + 3 * 4"), Ok(14.0));
        assert_eq!(evaluate("2 ^ 3 ^ 2"), Ok(512.0));
        assert_eq!(evaluate("-(2 - 5) * -2"), Ok(-6.0));
        assert_eq!(evaluate("7 / 2"), Ok(3.5));
        assert_eq!(evaluate("10 % 4 + 6 ÷ 3 × 2"), Ok(6.0));
        assert_eq!(evaluate("1_000 * 1.5"), Ok(1500.0));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(evaluate("1 +"), Err(CalcError::Syntax { .. })));
        assert!(matches!(evaluate("(1 + 2"), Err(CalcError::Syntax { .. })));
        assert!(matches!(evaluate("1 2"), Err(CalcError::Syntax { .. })));
        assert!(matches!(evaluate("1..2"), Err(CalcError::Syntax { .. })));
        assert_eq!(evaluate("1 / 0"), Err(CalcError::NotFinite("1 / 0".into())));
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(matches!(evaluate(&deep), Err(CalcError::Syntax { .. })));
        let signs = format!("{}1", "-".repeat(10_000));
        assert!(matches!(evaluate(&signs), Err(CalcError::Syntax { .. })));
    }

    #[test]
    fn numbers_are_formatted_for_people() {
        assert_eq!(format_number(84.0), "84");
        assert_eq!(format_number(3.5), "3.5");
        assert_eq!(format_number(1.0 / 3.0), "0.3333333333");
        assert_eq!(format_number(-2.0), "-2");
    }
}
