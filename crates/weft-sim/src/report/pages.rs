//! HTML pages: a report's `index.html` (the models side by side, as the papers' figures
//! are, with the headline table and every chart) and the top page of `weft demo` linking
//! each scenario's report.
//!
//! Invariants: every name and text from a scenario is escaped; links are URL-encoded path
//! segments.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::text::{esc, number};
use super::{headline_app, round};
use crate::scenario::Scenario;

/// A percentile of a `latency_us` object as a table shows it: `≥ 125000` for a lower bound.
fn pct(lat: &Value, key: &str) -> String {
    let at_least = lat[format!("{key}_at_least")].as_bool().unwrap_or(false);
    format!("{}{}", if at_least { "≥ " } else { "" }, lat[key])
}

pub(super) fn html(sc: &Scenario, sum: &Value, figs: &[String], app_figs: &[String]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>weft sim: {0}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         .grid{{display:flex;flex-wrap:wrap;gap:8px}}</style></head><body>\
         <h1>{0}</h1><p>{1}</p>",
        esc(&sc.name),
        esc(&sc.description)
    );
    if let Some(ts) = &sc.time_scale {
        let _ = write!(s, "<p>Time scale: {}", esc(ts));
        if let Some((paper, sim)) = sc.time_scale_ratio {
            let _ = write!(
                s,
                " ({} s simulated stand for {} paper seconds)",
                sum["duration_s"],
                round(sc.duration_ps as f64 * paper as f64 / sim as f64 / 1e12, 6)
            );
        }
        s.push_str("</p>");
    }
    let _ = write!(
        s,
        "<p>Policy <code>{}</code>, link {} Gbit/s, seed {}, {} s simulated, windows of {} s.</p>",
        esc(&sc.program.name),
        sc.program.link.rate_bps as f64 / 1e9,
        sc.seed,
        sum["duration_s"],
        sum["window_s"]
    );
    s.push_str("<h2>NIC models</h2><table><tr><th>model</th><th>jain_min</th><th>jain_mean</th><th>link utilization</th><th>headline p90 µs</th><th>doorbells/s</th><th>DMA reads/s</th><th>CPU cores busy</th><th>drops</th></tr>");
    let hl = headline_app(sc);
    let (ht, ha) = (&sc.tenants[sc.apps[hl].tenant].name, &sc.apps[hl].name);
    if let Some(m) = sum["nics"].as_object() {
        for (k, v) in m {
            let _ = write!(
                s,
                "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(k),
                v["jain_min"], v["jain_mean"], v["link_utilization"],
                pct(&v["tenants"][ht]["apps"][ha]["latency_us"], "p90"),
                v["doorbell_writes_per_s"], v["dma_reads_per_s"], v["cpu_cores_busy"], v["drops"]
            );
        }
    }
    s.push_str("</table><h2>Throughput per tenant</h2><div class=\"grid\">");
    for f in figs {
        let _ = write!(s, "<img src=\"{0}\" alt=\"{0}\">", esc(f));
    }
    if !app_figs.is_empty() {
        s.push_str("</div><h2>Throughput per application</h2><div class=\"grid\">");
        for f in app_figs {
            let _ = write!(s, "<img src=\"{0}\" alt=\"{0}\">", esc(f));
        }
    }
    s.push_str("</div><h2>Fairness and latency</h2><div class=\"grid\"><img src=\"jain.svg\" alt=\"jain\"><img src=\"latency.svg\" alt=\"latency\"><img src=\"latency-cdf.svg\" alt=\"latency CDF\"></div>");
    s.push_str("<h2>Shares</h2><table><tr><th>model</th><th>tenant</th><th>mean Gbit/s</th><th>share</th><th>ideal share</th><th>rel. error</th><th>p50 µs</th><th>p99 µs</th><th>drops</th></tr>");
    if let Some(m) = sum["nics"].as_object() {
        for (k, v) in m {
            if let Some(ts) = v["tenants"].as_object() {
                for (tn, tv) in ts {
                    let _ = write!(
                        s,
                        "<tr><th>{}</th><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        esc(k),
                        esc(tn),
                        tv["mean_bps"].as_f64().unwrap_or(0.0) / 1e9,
                        tv["share"], tv["ideal_share"], tv["rel_error"],
                        pct(&tv["latency_us"], "p50"), pct(&tv["latency_us"], "p99"), tv["drops"]
                    );
                }
            }
        }
    }
    s.push_str("</table>");
    if s.contains("<td>≥ ") {
        s.push_str(
            "<p>≥: a lower bound: the percentile falls on requests unfinished at the end of the \
             run (or, for bulk and UDP applications, packets still queued then), counted at \
             their age then.</p>",
        );
    }
    s.push_str(
        "<p>Files: <a href=\"summary.json\">summary.json</a>, <a href=\"timeseries.csv\">timeseries.csv</a>, \
         <a href=\"latency.csv\">latency.csv</a>, <a href=\"latency-cdf.csv\">latency-cdf.csv</a>, \
         <a href=\"jain.csv\">jain.csv</a>.</p></body></html>\n",
    );
    s
}

/// One scenario of a page over several reports ([`top_page`]).
pub struct TopScenario {
    /// Its report's directory, relative to the page (`weft demo`: the scenario's name).
    pub dir: String,
    /// Its report's summary ([`write()`](super::write)'s value, `summary.json`).
    pub summary: Value,
    /// What to look for in its figures (plain text).
    pub look_for: String,
    /// What the paper found, the figure cited (plain text).
    pub paper: String,
}

/// `s` as one segment of a relative URL: what is not an unreserved character
/// percent-encoded (a scenario named `a#b` or `50%` links to its own directory).
pub(super) fn url_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The headline cells of one model of a summary, as `weft demo` prints them: Jain's index
/// (lowest window), the headline application's p90 in µs (`≥ ` before a lower bound) and
/// the link utilization; `-` where there is none.
pub fn headline_cells(sum: &Value, model: &str) -> [String; 3] {
    let v = &sum["nics"][model];
    let fmt = |x: &Value, digits| x.as_f64().map_or("-".into(), |x| number(x, digits));
    let lat = &headline_of(sum, v)["latency_us"];
    let mut p90 = fmt(&lat["p90"], 1);
    if lat["p90_at_least"].as_bool() == Some(true) {
        p90 = format!("≥ {p90}");
    }
    [fmt(&v["jain_min"], 4), p90, fmt(&v["link_utilization"], 3)]
}

/// The headline application's object in a model's part `v` of summary `sum`.
fn headline_of<'a>(sum: &Value, v: &'a Value) -> &'a Value {
    let (t, a) = sum["headline_app"]
        .as_str()
        .and_then(|h| h.split_once('/'))
        .unwrap_or(("", ""));
    &v["tenants"][t]["apps"][a]
}

/// The charts a report holds, by its summary: `throughput-MODEL.svg` per model (and
/// `throughput-apps-MODEL.svg` where a tenant has several applications), then Jain's
/// index, the latency over time and its CDF.
pub fn report_charts(sum: &Value) -> Vec<String> {
    let empty = Map::new();
    let nics = sum["nics"].as_object().unwrap_or(&empty);
    let apps = nics.values().next().and_then(|v| v["tenants"].as_object());
    let several = apps.is_some_and(|ts| {
        ts.values()
            .any(|t| t["apps"].as_object().is_some_and(|a| a.len() > 1))
    });
    let mut charts: Vec<String> = nics.keys().map(|k| format!("throughput-{k}.svg")).collect();
    if several {
        charts.extend(nics.keys().map(|k| format!("throughput-apps-{k}.svg")));
    }
    charts.extend(["jain.svg", "latency.svg", "latency-cdf.svg"].map(String::from));
    charts
}

/// The data files a report holds beside its charts.
pub const DATA_FILES: [&str; 5] = [
    "summary.json",
    "timeseries.csv",
    "latency.csv",
    "latency-cdf.csv",
    "jain.csv",
];

/// A page over several reports (`weft demo`'s `index.html`): the headline table (per
/// scenario and model, the figures `weft demo` prints: Jain's index, the headline
/// application's p90, the link utilization, `≥` before a lower bound), `legend` under it;
/// then per scenario what to look for beside what the paper found, its charts as thumbnails
/// and links to its report and data files. Every text is escaped; nothing varies between
/// runs of the same reports.
pub fn top_page(title: &str, intro: &str, legend: &str, scenarios: &[TopScenario]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{0}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em;max-width:75em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px}}\
         td.n{{text-align:right}}.grid{{display:flex;flex-wrap:wrap;gap:8px}}\
         .grid img{{width:260px;border:1px solid #ddd}}\
         .cmp{{display:flex;flex-wrap:wrap;gap:1.5em}}.cmp div{{flex:1;min-width:20em}}</style>\
         </head><body><h1>{0}</h1><p>{1}</p>",
        esc(title),
        esc(intro)
    );
    s.push_str(
        "<h2 id=\"headline\">Headline</h2><table><tr><th>scenario</th><th>model</th>\
         <th>jain_min</th><th>latency app p90 µs</th><th>link utilization</th></tr>",
    );
    let empty = Map::new();
    let mut notes = Vec::new();
    for sc in scenarios {
        let sum = &sc.summary;
        let nics = sum["nics"].as_object().unwrap_or(&empty);
        let headline = sum["headline_app"].as_str().unwrap_or("");
        for (i, (k, v)) in nics.iter().enumerate() {
            s.push_str("<tr>");
            if i == 0 {
                let _ = write!(
                    s,
                    "<th rowspan=\"{}\"><a href=\"#{}\">{}</a><br>({})</th>",
                    nics.len(),
                    esc(&url_segment(&sc.dir)),
                    esc(sum["scenario"].as_str().unwrap_or("")),
                    esc(headline)
                );
            }
            let [jain, p90, util] = headline_cells(sum, k);
            let _ = write!(
                s,
                "<th>{}</th><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(k),
                esc(&jain),
                esc(&p90),
                esc(&util)
            );
            let app = headline_of(sum, v);
            if app["latency_us"]["p90_at_least"].as_bool() == Some(true) {
                let scn = sum["scenario"].as_str().unwrap_or("");
                notes.push(if app["requests"].is_object() {
                    format!(
                        "≥ {scn} {k}: {} of {headline}'s {} requests unfinished at the end, \
                         counted at their age then: the p90 is at least that",
                        app["requests"]["unfinished"], app["requests"]["issued"]
                    )
                } else {
                    format!(
                        "≥ {scn} {k}: {} of {headline}'s packets still queued at the end ({} \
                         sent), counted at their age then: the p90 packet delay is at least that",
                        app["packets"]["queued_at_end"], app["packets"]["sent"]
                    )
                });
            }
        }
    }
    s.push_str("</table>");
    for n in &notes {
        let _ = write!(s, "<p>{}</p>", esc(n));
    }
    let _ = write!(s, "<p>{}</p>", esc(legend));
    for sc in scenarios {
        let sum = &sc.summary;
        let dir = url_segment(&sc.dir);
        let name = sum["scenario"].as_str().unwrap_or("");
        let _ = write!(
            s,
            "<h2 id=\"{0}\">{1}</h2><p>{2}</p>",
            esc(&dir),
            esc(name),
            esc(sum["description"].as_str().unwrap_or(""))
        );
        if let Some(ts) = sum["time_scale"].as_str() {
            let _ = write!(s, "<p>Time scale: {}.</p>", esc(ts));
        }
        let _ = write!(
            s,
            "<div class=\"cmp\"><div><h3>What to look for</h3><p>{}</p></div>\
             <div><h3>What the paper found</h3><p>{}</p></div></div>\
             <p><a href=\"{2}/index.html\">{3}'s report</a> (every table and chart). Data: ",
            esc(&sc.look_for),
            esc(&sc.paper),
            esc(&dir),
            esc(name)
        );
        for (i, f) in DATA_FILES.iter().enumerate() {
            let _ = write!(
                s,
                "{}<a href=\"{}/{f}\">{f}</a>",
                if i > 0 { ", " } else { "" },
                esc(&dir)
            );
        }
        s.push_str(".</p><div class=\"grid\">");
        for f in report_charts(sum) {
            let _ = write!(
                s,
                "<a href=\"{0}/{1}\"><img src=\"{0}/{1}\" alt=\"{2}: {1}\"></a>",
                esc(&dir),
                esc(&f),
                esc(name)
            );
        }
        s.push_str("</div>");
    }
    s.push_str("</body></html>\n");
    s
}
