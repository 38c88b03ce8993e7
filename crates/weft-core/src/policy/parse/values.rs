//! Scalar values: strings, integers read exactly from their text, and quantities with units
//! (rates, sizes, times), each with the diagnostic its key's reader expects.
//!
//! Invariants: an integer is read from the text written, over its whole range (to 2⁶⁴−1 and
//! beyond, as `Integer::value`), never through `f64`; a decimal in exponent notation reaches
//! the unit parser rewritten exactly (`1.5e3` as `1500`), and a message about it quotes the
//! text as written.
//!
//! Cost: linear in the scalar's text.

use saphyr::Scalar;

use super::ast::Spanned;
use super::Parser;
use crate::policy::error::{Rule, Span};
use crate::policy::yaml::Node;
use crate::units::{self, UnitError};

impl Parser<'_> {
    pub(super) fn string(&mut self, n: &Node, what: &str) -> Option<Spanned<String>> {
        let span = self.span(n);
        match (n.scalar(), n.written()) {
            (Some(Scalar::String(s)), _) => Some(Spanned::new(s.to_string(), span)),
            // As written: a name `007` stays `007`, `1e3` stays `1e3`.
            (Some(Scalar::Integer(_) | Scalar::FloatingPoint(_)), Some(w)) => {
                Some(Spanned::new(w.text.to_string(), span))
            }
            _ => {
                self.err(
                    Rule::BadValue,
                    span,
                    format!("{what} must be a string, found {}", Self::describe(n)),
                );
                None
            }
        }
    }

    /// A scalar as text, for unit parsing (`10gbit`, or a bare integer). Numbers are given
    /// exactly: integers of any size in decimal, decimals from their text (`1.5e3` as
    /// `1500`), never through `f64`.
    fn scalar_text(&mut self, n: &Node, what: &str) -> Option<(String, Span)> {
        let span = self.span(n);
        if let Some(i) = self.integer(n) {
            return Some((i.value.map_or(i.text, |v| v.to_string()), span));
        }
        match (n.scalar(), n.written()) {
            (Some(Scalar::String(s)), _) => Some((s.to_string(), span)),
            (Some(Scalar::FloatingPoint(_)), Some(w)) => Some((plain_decimal(&w.text), span)),
            _ => {
                self.err(
                    Rule::BadValue,
                    span,
                    format!("{what} must be a value, found {}", Self::describe(n)),
                );
                None
            }
        }
    }

    /// The text of scalar `n` as written, for messages about the `given` text it was read as
    /// (they differ for numbers: `0x10` is given as `16`, `1.5e3` as `1500`).
    fn written_text(&self, n: &Node, given: &str) -> String {
        match (self.integer(n), n.scalar(), n.written()) {
            (Some(i), _, _) => i.text,
            (None, Some(Scalar::FloatingPoint(_)), Some(w)) => w.text.to_string(),
            _ => given.to_string(),
        }
    }

    fn unit_err(&mut self, span: Span, key: &str, e: UnitError, zero_rule: Rule) {
        let rule = match e {
            UnitError::AmbiguousRate { .. } => Rule::AmbiguousUnit,
            UnitError::Malformed { hint, .. } if hint.contains("ambiguous") => Rule::AmbiguousUnit,
            UnitError::NotPositive { .. } => zero_rule,
            _ => Rule::BadValue,
        };
        self.err(rule, span, format!("`{key}`: {e}"));
    }

    pub(super) fn rate(&mut self, n: &Node, key: &str) -> Option<Spanned<u64>> {
        let (text, span) = self.scalar_text(n, key)?;
        match units::parse_rate(&text) {
            Ok(v) => Some(Spanned::new(v, span)),
            Err(e) => {
                let e = quoting(e, &text, &self.written_text(n, &text));
                self.unit_err(span, key, e, Rule::NonPositiveRate);
                None
            }
        }
    }

    pub(super) fn size(&mut self, n: &Node, key: &str, positive: bool) -> Option<Spanned<u64>> {
        let (text, span) = self.scalar_text(n, key)?;
        match units::parse_size(&text, positive) {
            Ok(v) => Some(Spanned::new(v, span)),
            Err(e) => {
                let e = quoting(e, &text, &self.written_text(n, &text));
                self.unit_err(span, key, e, Rule::BadValue);
                None
            }
        }
    }

    pub(super) fn time(&mut self, n: &Node, key: &str) -> Option<Spanned<u64>> {
        let (text, span) = self.scalar_text(n, key)?;
        match units::parse_time(&text, false) {
            Ok(v) => Some(Spanned::new(v, span)),
            // Zero is a time here (`edf`: due at arrival; `lstf`: no slack): only a negative
            // one is refused ("must not be negative").
            Err(e) => {
                let e = quoting(e, &text, &self.written_text(n, &text));
                self.unit_err(span, key, e, Rule::BadValue);
                None
            }
        }
    }

    pub(super) fn int(
        &mut self,
        n: &Node,
        key: &str,
        min: i64,
        max: u64,
        rule: Rule,
    ) -> Option<Spanned<u64>> {
        let span = self.span(n);
        if let Some(i) = self.integer(n) {
            let lo = i128::from(min.max(0));
            match i.value {
                Some(v) if v >= lo && v <= i128::from(max) => {
                    return Some(Spanned::new(v as u64, span))
                }
                _ => {
                    self.err(
                        rule,
                        span,
                        format!(
                            "`{key}` must be an integer in {min}..={max}, found {}",
                            i.text
                        ),
                    );
                    return None;
                }
            }
        }
        match (n.scalar(), n.written()) {
            (Some(Scalar::FloatingPoint(_)), Some(w)) => {
                let found = w.text.to_string();
                // A whole number written with an exponent or a fraction of zeros (`1e3`,
                // `1000.0`) is read from its text exactly, as a size is; never through a float.
                let whole = units::parse_size(&plain_decimal(&found), false);
                if let Ok(v) = whole {
                    if v >= min.max(0) as u64 && v <= max {
                        return Some(Spanned::new(v, span));
                    }
                }
                let what = if whole.is_ok() {
                    "an integer"
                } else {
                    "a whole number"
                };
                self.err(
                    rule,
                    span,
                    format!("`{key}` must be {what} in {min}..={max}, found {found}"),
                );
                None
            }
            _ => {
                self.err(
                    Rule::BadValue,
                    span,
                    format!("`{key}` must be an integer, found {}", Self::describe(n)),
                );
                None
            }
        }
    }

    /// An integer scalar read exactly, whatever its size, from its text: plain (or tagged
    /// `!!int`) and written as a YAML 1.2 core-schema integer (`[-+]?[0-9]+`, `0o…`, `0x…`).
    /// The core schema's resolution reads a plain integer beyond `i64` as a float, a hex or
    /// octal one as a string, and one tagged `!!int` as no value; the text reads them all.
    /// `None` for anything but an integer.
    fn integer(&self, n: &Node) -> Option<Integer> {
        let w = n.written()?;
        if let Some(Scalar::Integer(i)) = n.scalar() {
            return Some(Integer {
                value: Some(i128::from(*i)),
                text: w.text.to_string(),
            });
        }
        let untagged_or_int = w
            .tag
            .as_ref()
            .is_none_or(|t| t.is_yaml_core_schema() && t.suffix == "int");
        if !w.plain || !untagged_or_int {
            return None;
        }
        Some(Integer {
            value: int_literal(&w.text)?,
            text: w.text.to_string(),
        })
    }
}

/// An integer scalar read exactly (see `Parser::integer`).
struct Integer {
    /// The value; `None` beyond the range of `i128` (so beyond every field's range).
    value: Option<i128>,
    /// The text written (`0x100`), for messages.
    text: String,
}

/// `e` with the text the unit parser was given replaced by the text written (they differ
/// for numbers: `1.5e3` is given as `1500`).
fn quoting(e: UnitError, given: &str, written: &str) -> UnitError {
    if given == written {
        return e;
    }
    let fix = |t: String| if t == given { written.to_string() } else { t };
    match e {
        UnitError::Malformed { text, what, hint } => UnitError::Malformed {
            text: fix(text),
            what,
            hint,
        },
        UnitError::NotPositive { text } => UnitError::NotPositive { text: fix(text) },
        UnitError::Negative { text } => UnitError::Negative { text: fix(text) },
        UnitError::OutOfRange { text, base } => UnitError::OutOfRange {
            text: fix(text),
            base,
        },
        e @ UnitError::AmbiguousRate { .. } => e,
    }
}

/// Reads a YAML 1.2 core-schema integer (`[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`)
/// exactly: `None` if `s` is not one, `Some(None)` if it is beyond the range of `i128`.
fn int_literal(s: &str) -> Option<Option<i128>> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x") {
        (h, 16)
    } else if let Some(o) = s.strip_prefix("0o") {
        (o, 8)
    } else {
        (s.strip_prefix(['-', '+']).unwrap_or(s), 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok();
    Some(magnitude.and_then(|m| {
        if s.starts_with('-') {
            0i128.checked_sub_unsigned(m)
        } else {
            i128::try_from(m).ok()
        }
    }))
}

/// A decimal in exponent notation (`1.5e3`) rewritten without it (`1500`), exactly, for
/// the unit parser (which reads plain decimals). Anything else, and exponents beyond any
/// 64-bit quantity, come back as they are (and the unit parser refuses them).
fn plain_decimal(s: &str) -> String {
    let Some((mantissa, exp)) = s.split_once(['e', 'E']) else {
        return s.to_string();
    };
    let Ok(exp) = exp.parse::<i64>() else {
        return s.to_string();
    };
    let (sign, mantissa) = match mantissa.strip_prefix(['-', '+']) {
        Some(m) => (&mantissa[..1], m),
        None => ("", mantissa),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let is_digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    if exp.abs() > 64
        || (int_part.is_empty() && frac_part.is_empty())
        || !is_digits(int_part)
        || !is_digits(frac_part)
    {
        return s.to_string();
    }
    let digits = format!("{int_part}{frac_part}");
    let sign = if sign == "-" { "-" } else { "" };
    // Where the decimal point falls in `digits`.
    let point = int_part.len() as i64 + exp;
    if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!(
            "{sign}{digits}{}",
            "0".repeat(point as usize - digits.len())
        )
    } else {
        let (i, f) = digits.split_at(point as usize);
        format!("{sign}{i}.{f}")
    }
}
