//! Statistics over seeds: the summaries of one scenario run once per seed (`weft sim
//! --seeds`), each metric as its mean with a 95 % confidence interval, its standard
//! deviation, minimum and maximum (`aggregate.json`).
//!
//! Every number under `nics` of a summary ([`crate::report::summary`]: per model, tenant
//! and application) becomes `{n, mean, ci95_low, ci95_high, ci95_half_width, std, min,
//! max}` over the seeds where it is a number (`n` of them; a metric null in a seed, such
//! as `jain_min` without a window of two backlogged tenants, is left out of that seed's
//! count); a flag (`p90_at_least`) becomes `{n, true_in}`, how many seeds had it set; text
//! (an application's `kind`) is kept when every seed has the same. Keys are in the order
//! of their first appearance; a key that only some seeds have (a set of backlogged
//! tenants) has the `n` of those.
//!
//! The interval is Student's t for the mean of n independent runs: with x̄ = Σx / n and
//! s² = Σ(x − x̄)² / (n − 1), the mean lies in x̄ ± t(0.975, n − 1) · s / √n with 95 %
//! confidence, t(0.975, ν) the 97.5th percentile of Student's t distribution with ν
//! degrees of freedom ([`t_975`]). With one seed there is no interval (null). Numbers are
//! rounded to 6 significant digits, as in the summaries.
//!
//! The schema of aggregate.json is written down once, as the types [`Aggregate`],
//! [`MetricStats`] and [`FlagCount`] (serialized in their fields' order); under `nics` it
//! follows the summaries' own ([`crate::report::Summary`]), whatever keys they have.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::report::round;

/// t(0.975, ν) for ν = 1 ..= 30, to 6 decimals.
const T_975: [f64; 30] = [
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157,
    2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922,
    2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831,
    2.048407, 2.045230, 2.042272,
];

/// The 97.5th percentile of Student's t distribution with `df` degrees of freedom (`df`
/// at least 1): a table to 30, then the Cornish–Fisher expansion around the normal's
/// 1.959964 (Abramowitz and Stegun 26.7.5, four terms; within 4e-8 from 31 on).
pub fn t_975(df: u64) -> f64 {
    assert!(df >= 1, "Student's t needs a degree of freedom");
    if let Some(&t) = T_975.get(df as usize - 1) {
        return t;
    }
    let z: f64 = 1.959_963_984_540_054;
    let nu = df as f64;
    let g1 = (z.powi(3) + z) / 4.0;
    let g2 = (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / 96.0;
    let g3 = (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / 384.0;
    let g4 = (79.0 * z.powi(9) + 776.0 * z.powi(7) + 1482.0 * z.powi(5)
        - 1920.0 * z.powi(3)
        - 945.0 * z)
        / 92160.0;
    z + g1 / nu + g2 / nu.powi(2) + g3 / nu.powi(3) + g4 / nu.powi(4)
}

/// Statistics of one metric over seeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Seeds with a value.
    pub n: u64,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator; 0 with one value).
    pub std: f64,
    /// Half the 95 % confidence interval's width, t(0.975, n − 1) · s / √n (`None` with
    /// one value).
    pub half_width: Option<f64>,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    /// The statistics of `values` (`None` when empty).
    pub fn of(values: &[f64]) -> Option<Stat> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let (std, half_width) = if n > 1 {
            let ss: f64 = values.iter().map(|x| (x - mean) * (x - mean)).sum();
            let s = (ss / (n - 1) as f64).sqrt();
            (s, Some(t_975(n as u64 - 1) * s / (n as f64).sqrt()))
        } else {
            (0.0, None)
        };
        Some(Stat {
            n: n as u64,
            mean,
            std,
            half_width,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// As aggregate.json writes it ([`MetricStats`]).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(MetricStats::from(*self)).expect("statistics have string keys")
    }
}

/// A metric's statistics over the seeds as aggregate.json writes them, rounded to 6
/// significant digits; the interval's fields are null with one seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricStats {
    /// Seeds with a value.
    pub n: u64,
    pub mean: f64,
    /// The 95 % confidence interval of the mean (Student's t), and its half width.
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    pub ci95_half_width: Option<f64>,
    /// Sample standard deviation, minimum and maximum.
    pub std: f64,
    pub min: f64,
    pub max: f64,
}

impl From<Stat> for MetricStats {
    fn from(s: Stat) -> MetricStats {
        let r = |x: f64| round(x, 6);
        let hw = s.half_width;
        MetricStats {
            n: s.n,
            mean: r(s.mean),
            ci95_low: hw.map(|h| r(s.mean - h)),
            ci95_high: hw.map(|h| r(s.mean + h)),
            ci95_half_width: hw.map(r),
            std: r(s.std),
            min: r(s.min),
            max: r(s.max),
        }
    }
}

/// A flag (such as `p90_at_least`) over the seeds: in how many of the `n` seeds that have
/// it it was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlagCount {
    pub n: usize,
    pub true_in: usize,
}

/// The statistics of the values at one place in every seed's summary (`None` where a seed
/// has nothing there).
fn combine(values: &[Option<&Value>]) -> Value {
    let present: Vec<&Value> = values.iter().flatten().copied().collect();
    if present.iter().any(|v| v.is_object()) {
        let mut keys: Vec<&String> = Vec::new();
        for v in &present {
            for k in v.as_object().into_iter().flat_map(|o| o.keys()) {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        let mut out = Map::new();
        for k in keys {
            let sub: Vec<Option<&Value>> =
                values.iter().map(|v| v.and_then(|v| v.get(k))).collect();
            out.insert(k.clone(), combine(&sub));
        }
        return Value::Object(out);
    }
    let numbers: Vec<f64> = present.iter().filter_map(|v| v.as_f64()).collect();
    if !numbers.is_empty() {
        return Stat::of(&numbers).map_or(Value::Null, |s| s.to_json());
    }
    let flags: Vec<bool> = present.iter().filter_map(|v| v.as_bool()).collect();
    if !flags.is_empty() {
        let flags = FlagCount {
            n: flags.len(),
            true_in: flags.iter().filter(|&&b| b).count(),
        };
        return serde_json::to_value(flags).expect("a flag count has string keys");
    }
    match present.first() {
        Some(first) if first.is_string() && present.iter().all(|v| v == first) => (*first).clone(),
        _ => Value::Null,
    }
}

/// How aggregate.json's statistics are computed, as its `statistics` says.
pub const STATISTICS: &str = "per metric over the seeds with a value (n): mean, 95 % \
     confidence interval of the mean by Student's t, mean ± t(0.975, n - 1) * s / sqrt(n) with \
     s the sample standard deviation (std, n - 1 in the denominator; no interval with n = 1), \
     min and max; flags: in how many seeds they were set (true_in)";

/// aggregate.json: the scenario's facts from the first seed's summary (each null where it
/// has none), the seeds, how the statistics are computed, and every metric's statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// As in the summaries ([`crate::report::Summary`]), from the first seed's.
    pub scenario: Option<String>,
    pub description: Option<String>,
    pub policy: Option<String>,
    pub duration_s: Option<f64>,
    pub window_s: Option<f64>,
    pub latency_window_s: Option<f64>,
    pub time_scale: Option<String>,
    pub time_scale_ratio: Option<f64>,
    pub link_rate_bps: Option<u64>,
    pub headline_app: Option<String>,
    /// The seeds, in the order run.
    pub seeds: Vec<u64>,
    /// [`STATISTICS`].
    pub statistics: &'static str,
    /// The summaries' `nics`, each place holding the seeds' values there combined: a
    /// number's [`MetricStats`], a flag's [`FlagCount`], text every seed has alike, else
    /// null; keys in the order of their first appearance.
    pub nics: Value,
}

/// The aggregate of `runs`, `(seed, summary)` each in the order run: the scenario's
/// description from the first summary, the seeds, how the statistics are computed, and
/// under `nics` every metric's statistics over the seeds ([`Aggregate`]).
pub fn aggregate(runs: &[(u64, Value)]) -> Value {
    let first = runs.first().map(|r| &r.1).unwrap_or(&Value::Null);
    let text = |k: &str| first.get(k).and_then(Value::as_str).map(String::from);
    let number = |k: &str| first.get(k).and_then(Value::as_f64);
    let nics: Vec<Option<&Value>> = runs.iter().map(|r| r.1.get("nics")).collect();
    let agg = Aggregate {
        scenario: text("scenario"),
        description: text("description"),
        policy: text("policy"),
        duration_s: number("duration_s"),
        window_s: number("window_s"),
        latency_window_s: number("latency_window_s"),
        time_scale: text("time_scale"),
        time_scale_ratio: number("time_scale_ratio"),
        link_rate_bps: first.get("link_rate_bps").and_then(Value::as_u64),
        headline_app: text("headline_app"),
        seeds: runs.iter().map(|r| r.0).collect(),
        statistics: STATISTICS,
        nics: combine(&nics),
    };
    serde_json::to_value(agg).expect("an aggregate's keys are strings")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn student_t_quantiles() {
        assert_eq!(t_975(1), 12.706205);
        assert_eq!(t_975(9), 2.262157);
        assert_eq!(t_975(30), 2.042272);
        // From the expansion, against the exact values.
        for (df, t) in [
            (31, 2.039513446),
            (40, 2.021075390),
            (100, 1.983971519),
            (1000, 1.962339081),
        ] {
            assert!((t_975(df) - t).abs() < 1e-7, "{df}: {}", t_975(df));
        }
    }

    /// Three seeds: mean 2, s = 1, half width t(0.975, 2) / √3 = 2.48414.
    #[test]
    fn stat_mean_interval_min_max() {
        let s = Stat::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.n, s.mean, s.std, s.min, s.max), (3, 2.0, 1.0, 1.0, 3.0));
        let hw = s.half_width.unwrap();
        assert!((hw - 4.302653 / 3f64.sqrt()).abs() < 1e-12, "{hw}");
        assert_eq!(
            s.to_json(),
            json!({"n": 3, "mean": 2.0, "ci95_low": -0.484138, "ci95_high": 4.48414,
                   "ci95_half_width": 2.48414, "std": 1.0, "min": 1.0, "max": 3.0})
        );
        let one = Stat::of(&[5.0]).unwrap();
        assert_eq!((one.n, one.std, one.half_width), (1, 0.0, None));
        assert_eq!(one.to_json()["ci95_low"], Value::Null);
        assert_eq!(Stat::of(&[]), None);
    }

    /// Numbers become statistics, flags counts, equal text stays; a metric null in a seed
    /// is counted over the others; keys only some seeds have are kept.
    #[test]
    fn summaries_combine_by_place() {
        let a = json!({"scenario": "s", "nics": {"loom": {"jain_min": 0.5, "kind": "udp",
            "lat": {"p90": 10.0, "p90_at_least": true}, "phase": {"A+B": {"w": 1}}}}});
        let b = json!({"scenario": "s", "nics": {"loom": {"jain_min": null, "kind": "udp",
            "lat": {"p90": 20.0, "p90_at_least": false}}}});
        let c = json!({"scenario": "s", "nics": {"loom": {"jain_min": 0.7, "kind": "udp",
            "lat": {"p90": 30.0, "p90_at_least": true}}}});
        let g = aggregate(&[(1, a), (2, b), (3, c)]);
        assert_eq!(g["seeds"], json!([1, 2, 3]));
        assert_eq!(g["scenario"], "s");
        let l = &g["nics"]["loom"];
        assert_eq!(l["jain_min"]["n"], 2);
        assert_eq!(l["jain_min"]["mean"], 0.6);
        assert_eq!(l["kind"], "udp");
        assert_eq!(l["lat"]["p90"]["mean"], 20.0);
        assert_eq!(l["lat"]["p90"]["min"], 10.0);
        assert_eq!(l["lat"]["p90_at_least"], json!({"n": 3, "true_in": 2}));
        assert_eq!(l["phase"]["A+B"]["w"]["n"], 1);
        let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["jain_min", "kind", "lat", "phase"]);
    }

    /// aggregate.json's keys are in the schema's order, each statistic's and flag's too.
    #[test]
    fn aggregate_keys_follow_the_schema() {
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        let s = json!({"scenario": "s", "nics": {"loom": {"x": 1.0, "f": true}}});
        let g = aggregate(&[(1, s.clone()), (2, s)]);
        assert_eq!(
            keys(&g),
            [
                "scenario",
                "description",
                "policy",
                "duration_s",
                "window_s",
                "latency_window_s",
                "time_scale",
                "time_scale_ratio",
                "link_rate_bps",
                "headline_app",
                "seeds",
                "statistics",
                "nics"
            ]
        );
        assert_eq!(
            (&g["statistics"], &g["policy"]),
            (&json!(STATISTICS), &Value::Null)
        );
        assert_eq!(
            keys(&g["nics"]["loom"]["x"]),
            [
                "n",
                "mean",
                "ci95_low",
                "ci95_high",
                "ci95_half_width",
                "std",
                "min",
                "max"
            ]
        );
        assert_eq!(keys(&g["nics"]["loom"]["f"]), ["n", "true_in"]);
    }
}
