//! Numbers and text as the report prints them: counts with thousands separators, numbers
//! to a few significant digits, times on an axis, and text escaped for HTML and SVG.

use super::round;

/// Seconds written in a unit that reads: `100 ms`, `2 s`, `1.5 µs`.
pub(super) fn time_text(s: f64) -> String {
    let (unit, scale) = [("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)]
        .into_iter()
        .find(|&(_, u)| s >= u * (1.0 - 1e-9))
        .unwrap_or(("ps", 1e-12));
    format!("{} {unit}", round(s / scale, 6))
}

/// `n` for a table, its digits in groups of three: `1,223,416`.
pub fn count(n: u64) -> String {
    group(&n.to_string())
}

/// `x` for a table (the terminal's or a page's), to `digits` decimals with the whole part's digits in groups of three
/// (`112,700.0`); what rounds to zero reads `0` (not `-0.000`, nor serde's `3.86831e-16`),
/// and what is not a number `-`. Tables only: JSON keeps every value as computed.
pub fn number(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let text = format!("{:.*}", digits, x.abs());
    if text.bytes().all(|b| b == b'0' || b == b'.') {
        return "0".into();
    }
    let (whole, frac) = text
        .split_once('.')
        .map_or((&*text, None), |(w, f)| (w, Some(f)));
    let sign = if x < 0.0 { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{}.{f}", group(whole)),
        None => format!("{sign}{}", group(whole)),
    }
}

/// Digits with a comma between groups of three, from the right.
fn group(digits: &str) -> String {
    let mut s = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    s
}

/// `s` escaped for HTML or SVG text and attribute values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
