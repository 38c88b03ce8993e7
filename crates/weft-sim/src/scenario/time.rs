//! Times: the rules a run's duration and windows keep (positive, within the clock, a
//! bounded number of windows and windows × applications), and `time_scale`'s
//! `PAPER = SIMULATED` ratio.
//!
//! Cost: constant per check; `time_scale` is linear in its text.

use weft_core::sched::LAST_ARRIVAL_PS;
use weft_core::units;

use super::{MAX_WINDOWS, MAX_WINDOW_CELLS};

/// A unit of time as `time_scale` may write it (`ms`, `second`, `minutes`): the unit of
/// [`units::parse_time`] it is a multiple of, and the multiple.
fn time_unit(unit: &str) -> Option<(&'static str, u64)> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "ps" | "picosecond" | "picoseconds" => ("ps", 1),
        "ns" | "nanosecond" | "nanoseconds" => ("ns", 1),
        "us" | "µs" | "microsecond" | "microseconds" => ("us", 1),
        "ms" | "millisecond" | "milliseconds" => ("ms", 1),
        "s" | "sec" | "secs" | "second" | "seconds" => ("s", 1),
        "min" | "mins" | "minute" | "minutes" => ("s", 60),
        "h" | "hour" | "hours" => ("s", 3_600),
        _ => return None,
    })
}

/// A positive time at the start of `words` (`100 ms`, `100ms`, `1 paper second`: `skip` is
/// a word allowed between the number and the unit), ps, and the words after it.
pub(super) fn scale_time<'a>(
    words: &'a [&'a str],
    skip: &str,
) -> Result<(u64, &'a [&'a str]), String> {
    let Some((&first, mut rest)) = words.split_first() else {
        return Err("a time is missing".into());
    };
    let split = first
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '+')))
        .unwrap_or(first.len());
    let (num, mut unit) = first.split_at(split);
    if num.is_empty() {
        return Err(format!("`{first}` is not a number"));
    }
    if unit.is_empty() {
        if rest.first() == Some(&skip) {
            rest = &rest[1..];
        }
        let Some((&u, r)) = rest.split_first() else {
            return Err(format!("`{num}` has no unit (e.g. `s`, `ms`, `second`)"));
        };
        unit = u;
        rest = r;
    }
    let (base, times) = time_unit(unit).ok_or_else(|| {
        format!("`{unit}` is not a unit of time (ps, ns, us, ms, s or second, min, h)")
    })?;
    let ps = units::parse_time(&format!("{num}{base}"), true)
        .map_err(|e| e.to_string())?
        .checked_mul(times)
        .ok_or_else(|| format!("`{num} {unit}` is more than 2^64 ps"))?;
    Ok((ps, rest))
}

/// What a `time_scale` says: `PAPER = SIMULATED`, each a positive time (`1 paper second =
/// 100 ms simulated`, `1s = 100ms`; the words `paper` and `simulated` are optional), then
/// free text if any (`(phases of 200 ms instead of 2 s)`). Returns `(paper_ps,
/// simulated_ps)`.
pub fn parse_time_scale(text: &str) -> Result<(u64, u64), String> {
    const FORM: &str = "expected `PAPER = SIMULATED`, two positive times, e.g. `1 paper \
                        second = 100 ms simulated`, then a note if you like";
    let Some((lhs, rhs)) = text.split_once('=') else {
        return Err(format!("no `=`: {FORM}"));
    };
    let lw: Vec<&str> = lhs.split_whitespace().collect();
    let (paper, rest) = scale_time(&lw, "paper").map_err(|e| format!("{e}; {FORM}"))?;
    if !rest.is_empty() {
        return Err(format!(
            "`{}` after the paper's time; {FORM}",
            rest.join(" ")
        ));
    }
    let rw: Vec<&str> = rhs.split_whitespace().collect();
    let (sim, _note) = scale_time(&rw, "simulated").map_err(|e| format!("{e}; {FORM}"))?;
    Ok((paper, sim))
}

/// Why a duration and its windows do not go together; `what` names the offending value.
#[derive(Debug)]
pub(crate) struct TimeRule {
    pub(super) what: &'static str,
    pub(super) rule: String,
}

impl std::fmt::Display for TimeRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rule)
    }
}

/// `1234ps (1.234 ns)`-style text for messages.
pub(super) fn fmt_ps(ps: u64) -> String {
    format!("{ps}ps ({} s)", ps as f64 / 1e12)
}

/// The rules of a run's length (see the module docs): it ends by [`LAST_ARRIVAL_PS`] and
/// holds at most [`MAX_WINDOWS`] windows of each kind.
pub(super) fn check_times(
    duration_ps: u64,
    window_ps: u64,
    latency_window_ps: u64,
) -> Result<(), TimeRule> {
    if duration_ps == 0 {
        return Err(TimeRule {
            what: "duration",
            rule: "the duration must be greater than zero".into(),
        });
    }
    if duration_ps > LAST_ARRIVAL_PS {
        return Err(TimeRule {
            what: "duration",
            rule: format!(
                "the duration is at most 2^63 ps ({LAST_ARRIVAL_PS}ps, about 106.7 days): \
                 applications write until the end, and the rest of the 64-bit picosecond \
                 clock is headroom for what is queued then to leave"
            ),
        });
    }
    for (what, w) in [("window", window_ps), ("latency_window", latency_window_ps)] {
        let n = duration_ps.div_ceil(w.max(1));
        if n > MAX_WINDOWS {
            return Err(TimeRule {
                what,
                rule: format!(
                    "a duration of {} in {what}s of {} makes {n} windows; at most \
                     {MAX_WINDOWS} (give a longer `{what}`)",
                    fmt_ps(duration_ps),
                    fmt_ps(w)
                ),
            });
        }
    }
    Ok(())
}

/// The rule of a run's windows and applications together: at most [`MAX_WINDOW_CELLS`]
/// (window, application) pairs of each kind, throughput and latency.
pub(crate) fn check_cells(
    duration_ps: u64,
    window_ps: u64,
    latency_window_ps: u64,
    apps: usize,
) -> Result<(), TimeRule> {
    for (what, w) in [("window", window_ps), ("latency_window", latency_window_ps)] {
        let n = duration_ps.div_ceil(w.max(1));
        let cells = n.saturating_mul(apps as u64);
        if cells > MAX_WINDOW_CELLS {
            return Err(TimeRule {
                what,
                rule: format!(
                    "a duration of {} in {what}s of {} makes {n} windows of {apps} \
                     applications, {cells} counters; at most {MAX_WINDOW_CELLS} (each is held \
                     in memory for every model and written as a row of {}): give a longer \
                     `{what}`",
                    fmt_ps(duration_ps),
                    fmt_ps(w),
                    if what == "window" {
                        "timeseries.csv"
                    } else {
                        "latency.csv"
                    }
                ),
            });
        }
    }
    Ok(())
}
