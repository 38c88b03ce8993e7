//! Units of the policy format: rates, sizes and times written the way `tc` users write them.
//!
//! * Rates are **bits per second** (`u64`): `bit`, `kbit`, `mbit`, `gbit`, `tbit` (SI, powers
//!   of 1000) and `kibit`, `mibit`, `gibit`, `tibit` (powers of 1024). Decimals are allowed when
//!   the result is a whole number of bits per second (`2.5gbit`).
//! * Sizes are **bytes** (`u64`): a bare integer, `b`, and `kb`/`k`, `mb`/`m`, `gb`/`g`, which
//!   are powers of **1024** exactly as in tc (`64kb` = 65,536 bytes); `kib`, `mib`, `gib` are
//!   accepted as synonyms.
//! * Times are **picoseconds** (`u64`): `ps`, `ns`, `us`, `ms`, `s`.
//!
//! The tc trap: in tc, `bps` means *bytes* per second (`10mbps` = 80 Mbit/s) while `mbit`
//! means bits. weft refuses every `…bps` spelling and a bare number as a rate, with an error
//! that spells out both readings, so a rate is never off by a factor of eight silently.
//!
//! Cost: parsing is O(length of the string); nothing here is on a per-packet path.

use std::fmt;

/// Why a quantity could not be read. The message is meant to be shown to a person as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text is not a number followed by a known unit.
    #[error("`{text}` is not a {what}: {hint}")]
    Malformed {
        /// The text given.
        text: String,
        /// What it should have been (a rate, a size, a time).
        what: &'static str,
        /// How to write one.
        hint: &'static str,
    },
    /// A `bps`-style unit whose meaning differs between tc and common usage.
    #[error(
        "`{text}` is ambiguous: in tc `{unit}` means bytes per second ({bytes_reading}), \
         elsewhere bits per second ({bits_reading}); write `{bits_reading}` or `{bytes_as_bits}`"
    )]
    AmbiguousRate {
        /// The text given.
        text: String,
        /// The ambiguous unit.
        unit: String,
        /// The value read as bits per second.
        bits_reading: String,
        /// The value read as bytes per second (tc's meaning).
        bytes_reading: String,
        /// The bytes-per-second reading written in bits.
        bytes_as_bits: String,
    },
    /// The value is zero or negative where a positive quantity is required.
    #[error("`{text}` must be greater than zero")]
    NotPositive {
        /// The text given.
        text: String,
    },
    /// The value is negative where zero is allowed.
    #[error("`{text}` must not be negative")]
    Negative {
        /// The text given.
        text: String,
    },
    /// The value does not fit in 64 bits or is not whole in the base unit.
    #[error("`{text}` is out of range or not a whole number of {base}")]
    OutOfRange {
        /// The text given.
        text: String,
        /// The base unit it must be whole in.
        base: &'static str,
    },
}

const RATE_HINT: &str = "write a number and a unit such as `10gbit`, `500mbit`, `2.5gbit`";
const SIZE_HINT: &str = "write bytes as `1500`, `1500b`, `64kb` (= 65536 bytes) or `1mb`";
const TIME_HINT: &str = "write a number and a unit such as `5us`, `1ms`, `250ns`, `10ps`";

/// Splits `"2.5gbit"` into `("2.5", "gbit")`.
fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-' || *c == '+' || *c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

/// Multiplies a decimal string by an integer scale exactly (no floating point).
/// Returns `None` on overflow, on a fractional result, or on a malformed number.
fn scale_decimal(num: &str, scale: u128) -> Option<Result<u128, ()>> {
    let num = num.replace('_', "");
    let (neg, body) = match num.strip_prefix('-') {
        Some(rest) => (true, rest.to_string()),
        None => (false, num.trim_start_matches('+').to_string()),
    };
    if body.is_empty() {
        return None;
    }
    let (int_part, frac_part) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body.as_str(), ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.chars().all(|c| c.is_ascii_digit())
        || !frac_part.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    if frac_part.len() > 30 {
        return Some(Err(()));
    }
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let denom = 10u128.checked_pow(frac_part.len() as u32)?;
    let scaled = mantissa.checked_mul(scale).map(Ok).unwrap_or(Err(()));
    let value = match scaled {
        Ok(v) if v % denom == 0 => Ok(v / denom),
        _ => Err(()),
    };
    if neg {
        // Negative quantities are never valid; report them as non-positive upstream.
        return Some(match value {
            Ok(0) => Ok(0),
            _ => Ok(u128::MAX),
        });
    }
    Some(value)
}

fn finish(
    text: &str,
    num: &str,
    scale: u128,
    base: &'static str,
    positive: bool,
) -> Result<u64, UnitError> {
    let negative = num.trim().starts_with('-');
    match scale_decimal(num, scale) {
        None => Err(UnitError::OutOfRange {
            text: text.to_string(),
            base,
        }),
        Some(Err(())) => Err(UnitError::OutOfRange {
            text: text.to_string(),
            base,
        }),
        Some(Ok(_)) if negative && positive => Err(UnitError::NotPositive {
            text: text.to_string(),
        }),
        Some(Ok(_)) if negative => Err(UnitError::Negative {
            text: text.to_string(),
        }),
        Some(Ok(0)) if positive => Err(UnitError::NotPositive {
            text: text.to_string(),
        }),
        Some(Ok(v)) => u64::try_from(v).map_err(|_| UnitError::OutOfRange {
            text: text.to_string(),
            base,
        }),
    }
}

/// Parses a rate such as `10gbit` into bits per second. Zero is refused.
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    let malformed = || UnitError::Malformed {
        text: text.to_string(),
        what: "rate",
        hint: RATE_HINT,
    };
    if num.is_empty() {
        return Err(malformed());
    }
    let lower = unit.to_ascii_lowercase();
    let scale: u128 = match lower.as_str() {
        "bit" => 1,
        "kbit" => 1_000,
        "mbit" => 1_000_000,
        "gbit" => 1_000_000_000,
        "tbit" => 1_000_000_000_000,
        "kibit" => 1 << 10,
        "mibit" => 1 << 20,
        "gibit" => 1 << 30,
        "tibit" => 1 << 40,
        "bps" | "kbps" | "mbps" | "gbps" | "tbps" => {
            let prefix = &lower[..lower.len() - 3];
            return Err(UnitError::AmbiguousRate {
                text: text.to_string(),
                unit: unit.to_string(),
                bits_reading: format!("{num}{prefix}bit"),
                bytes_reading: format!("{num} {}bytes/s", prefix_word(prefix)),
                bytes_as_bits: bytes_as_bits(num, prefix),
            });
        }
        "" => {
            return Err(UnitError::Malformed {
                text: text.to_string(),
                what: "rate",
                hint: "a bare number is ambiguous (tc reads it as bytes per second); \
                       add a unit such as `bit`, `mbit` or `gbit`",
            })
        }
        _ => return Err(malformed()),
    };
    finish(text, num, scale, "bits per second", true)
}

fn prefix_word(prefix: &str) -> &'static str {
    match prefix {
        "k" => "kilo",
        "m" => "mega",
        "g" => "giga",
        "t" => "tera",
        _ => "",
    }
}

fn bytes_as_bits(num: &str, prefix: &str) -> String {
    let scale: u128 = match prefix {
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        _ => 1,
    };
    match scale_decimal(num, scale * 8) {
        Some(Ok(bits)) if bits <= u64::MAX as u128 => format_rate(bits as u64),
        _ => format!("{num}×8 {prefix}bit"),
    }
}

/// Parses a size such as `64kb` into bytes (tc's binary multiples). `positive` refuses zero.
pub fn parse_size(text: &str, positive: bool) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    if num.is_empty() {
        return Err(UnitError::Malformed {
            text: text.to_string(),
            what: "size",
            hint: SIZE_HINT,
        });
    }
    let scale: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" | "byte" | "bytes" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "kbit" | "mbit" | "gbit" | "bit" => {
            return Err(UnitError::Malformed {
                text: text.to_string(),
                what: "size",
                hint: "sizes are in bytes here; write `b`, `kb`, `mb` or `gb`",
            })
        }
        _ => {
            return Err(UnitError::Malformed {
                text: text.to_string(),
                what: "size",
                hint: SIZE_HINT,
            })
        }
    };
    finish(text, num, scale, "bytes", positive)
}

/// Parses a duration such as `5us` into picoseconds. `positive` refuses zero.
pub fn parse_time(text: &str, positive: bool) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    let malformed = || UnitError::Malformed {
        text: text.to_string(),
        what: "time",
        hint: TIME_HINT,
    };
    if num.is_empty() {
        return Err(malformed());
    }
    let scale: u128 = match unit.to_ascii_lowercase().as_str() {
        "ps" => 1,
        "ns" => 1_000,
        "us" | "µs" => 1_000_000,
        "ms" => 1_000_000_000,
        "s" | "sec" => 1_000_000_000_000,
        _ => return Err(malformed()),
    };
    finish(text, num, scale, "picoseconds", positive)
}

/// Formats bits per second with the largest SI unit that keeps it whole (`10gbit`).
pub fn format_rate(bps: u64) -> String {
    for (unit, scale) in [
        ("tbit", 1_000_000_000_000u64),
        ("gbit", 1_000_000_000),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bps >= scale && bps.is_multiple_of(scale) {
            return format!("{}{unit}", bps / scale);
        }
    }
    format!("{bps}bit")
}

/// Formats bytes with `kb`/`mb`/`gb` (powers of 1024) when exact, otherwise as `NNNb`.
pub fn format_size(bytes: u64) -> String {
    for (unit, scale) in [("gb", 1u64 << 30), ("mb", 1 << 20), ("kb", 1 << 10)] {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}b")
}

/// Formats picoseconds with the largest unit that keeps it whole (`5us`).
pub fn format_time(ps: u64) -> String {
    for (unit, scale) in [
        ("s", 1_000_000_000_000u64),
        ("ms", 1_000_000_000),
        ("us", 1_000_000),
        ("ns", 1_000),
    ] {
        if ps >= scale && ps.is_multiple_of(scale) {
            return format!("{}{unit}", ps / scale);
        }
    }
    format!("{ps}ps")
}

/// A rate in bits per second that prints as `10gbit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_rate(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10gbit"), Ok(10_000_000_000));
        assert_eq!(parse_rate("500mbit"), Ok(500_000_000));
        assert_eq!(parse_rate("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate("1kibit"), Ok(1024));
        assert_eq!(parse_rate("100 Mbit"), Ok(100_000_000));
        assert!(matches!(
            parse_rate("0gbit"),
            Err(UnitError::NotPositive { .. })
        ));
        assert!(matches!(
            parse_rate("-1gbit"),
            Err(UnitError::NotPositive { .. })
        ));
        assert!(matches!(
            parse_rate("0.5bit"),
            Err(UnitError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_rate("100"),
            Err(UnitError::Malformed { .. })
        ));
        assert!(matches!(
            parse_rate("fast"),
            Err(UnitError::Malformed { .. })
        ));
        assert!(matches!(
            parse_rate("99999999tbit"),
            Err(UnitError::OutOfRange { .. })
        ));
    }

    #[test]
    fn bps_is_refused_with_both_readings() {
        let err = parse_rate("10mbps").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("10mbit"), "{msg}");
        assert!(msg.contains("80mbit"), "{msg}");
        assert!(msg.contains("bytes per second"), "{msg}");
    }

    #[test]
    fn sizes_follow_tc() {
        assert_eq!(parse_size("64kb", true), Ok(65_536));
        assert_eq!(parse_size("1500", true), Ok(1500));
        assert_eq!(parse_size("1500b", true), Ok(1500));
        assert_eq!(parse_size("1mb", true), Ok(1 << 20));
        assert_eq!(parse_size("0", false), Ok(0));
        assert!(parse_size("0", true).is_err());
        assert!(parse_size("64kbit", true).is_err());
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("5us", true), Ok(5_000_000));
        assert_eq!(parse_time("1.5ns", true), Ok(1_500));
        assert_eq!(parse_time("2s", true), Ok(2_000_000_000_000));
        assert!(parse_time("5", true).is_err());
    }

    #[test]
    fn formatting_round_trips() {
        for bps in [1u64, 999, 1000, 2_500_000_000, 10_000_000_000, 123_456_789] {
            assert_eq!(parse_rate(&format_rate(bps)), Ok(bps));
        }
        for b in [1u64, 1500, 65_536, 3 << 20, 1 << 30, 12_345] {
            assert_eq!(parse_size(&format_size(b), true), Ok(b));
        }
        for ps in [1u64, 1_500, 5_000_000, 2_000_000_000_000] {
            assert_eq!(parse_time(&format_time(ps), true), Ok(ps));
        }
    }
}
