//! A shaping node's default bucket is two frames of the link (2 × `link.mtu`), and a `burst`
//! under that compiles with one `small-burst` warning (docs/policy.md, "The bucket's depth").

use std::path::Path;

use weft_core::policy::default_burst_bytes;
use weft_core::policy::{compile_str, show, LoadOptions, Program, Rule, Severity};

fn compile(text: &str) -> Program {
    compile_str(Path::new("burst.yaml"), text, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{}\n---\n{text}", e.render_plain()))
}

/// A policy whose one shaping node `cap` has `burst` (none when empty), on a link of `link`.
fn shaped(link: &str, burst: &str) -> String {
    let burst = if burst.is_empty() {
        String::new()
    } else {
        format!(", burst: {burst}")
    };
    format!(
        "weft: 1\n\
         link: {{{link}}}\n\
         nodes:\n  \
           - {{name: root, type: wfq}}\n  \
           - {{name: cap, type: shape, parent: root, rate: 1gbit{burst}}}\n  \
           - {{name: a, type: leaf, parent: cap, match: {{tag: 1}}}}\n  \
           - {{name: b, type: leaf, parent: root}}\n"
    )
}

#[test]
fn the_default_burst_is_two_frames_of_the_link() {
    let p = compile(&shaped("rate: 10gbit", ""));
    assert_eq!(p.link.mtu_bytes, 1514);
    assert_eq!(p.shapers[0].burst_bytes, 3028);
    assert_eq!(default_burst_bytes(&p.link), 3028);
    assert!(p.warnings.is_none(), "{:?}", p.warnings);
    // What `weft policy show` prints, and the normalized JSON (a valid policy again).
    assert!(
        show::tree(&p).contains("cap  shape 1gbit burst 3028b"),
        "{}",
        show::tree(&p)
    );
    let json = show::to_json(&p).to_string();
    assert!(json.contains(r#""burst":"3028b""#), "{json}");
    let again = compile(&json);
    assert_eq!(again.shapers[0].burst_bytes, 3028);
    assert!(again.warnings.is_none());

    // With the link's own MTU.
    let jumbo = compile(&shaped("mtu: 9000b", ""));
    assert_eq!(jumbo.shapers[0].burst_bytes, 18_000);
    assert!(jumbo.warnings.is_none());
    // A given burst is kept as written.
    assert_eq!(compile(&shaped("", "64kb")).shapers[0].burst_bytes, 65_536);
}

#[test]
fn a_burst_under_two_frames_compiles_with_one_warning() {
    let text = shaped("rate: 10gbit", "64b");
    let p = compile(&text);
    assert_eq!(p.shapers[0].burst_bytes, 64, "kept as written");
    let w = p.warnings.as_ref().expect("a small-burst warning");
    assert_eq!(w.diagnostics.len(), 1, "{}", w.render_plain());
    let d = &w.diagnostics[0];
    assert_eq!(d.rule, Rule::SmallBurst);
    assert_eq!(d.severity(), Severity::Warning);
    assert_eq!(d.node.as_deref(), Some("cap"));
    assert_eq!(
        w.locations(),
        vec![(Rule::SmallBurst, "burst.yaml".to_string(), 5)]
    );
    // At the value of `burst` on line 5.
    let column = text.lines().nth(4).unwrap().find("64b").unwrap() + 1;
    assert_eq!(
        w.render_plain(),
        format!(
            "burst.yaml:5:{column}: warning[small-burst]: the bucket of `cap` holds 64 bytes, \
             less than two frames of the link (2 × mtu 1514 = 3028 bytes) (node `cap`); help: \
             a bucket under two frames loses rate when the link delays the class's packet \
             behind another frame; use at least 3028b (2 × mtu) or omit burst for the default"
        )
    );
}

#[test]
fn the_warning_starts_below_two_frames_of_the_links_mtu() {
    let warned = |link: &str, burst: &str| {
        compile(&shaped(link, burst))
            .warnings
            .map_or(0, |w| w.diagnostics.len())
    };
    assert_eq!(warned("", "1514b"), 1, "one frame");
    assert_eq!(warned("", "3027"), 1);
    assert_eq!(warned("", "3028b"), 0, "two frames");
    assert_eq!(warned("", "64kb"), 0);
    assert_eq!(warned("mtu: 9000b", "16kb"), 1, "under 18,000 bytes");
    assert_eq!(warned("mtu: 9000b", "18000b"), 0);
    assert_eq!(warned("mtu: 100b", "200b"), 0);
    // The help names the link's own figure.
    let p = compile(&shaped("mtu: 9000b", "16kb"));
    let w = p.warnings.unwrap();
    assert!(
        w.render_plain().contains("use at least 18000b (2 × mtu)"),
        "{}",
        w.render_plain()
    );
}

#[test]
fn a_policy_with_errors_reports_its_errors_only() {
    // An unknown parent (an error) beside a small burst.
    let text = shaped("", "64b") + "  - {name: c, type: leaf, parent: nowhere}\n";
    let e = compile_str(Path::new("burst.yaml"), &text, &LoadOptions::default())
        .expect_err("an unknown parent");
    assert_eq!(e.rules_and_lines(), vec![(Rule::UnknownNode, 8)]);
    assert!(e.render_plain().contains("error[unknown-node]"));
}

#[test]
fn small_burst_is_the_only_warning_rule() {
    for r in Rule::ALL {
        let expected = if r == Rule::SmallBurst {
            Severity::Warning
        } else {
            Severity::Error
        };
        assert_eq!(r.severity(), expected, "{r}");
    }
    assert_eq!(Rule::from_name("small-burst"), Some(Rule::SmallBurst));
}
