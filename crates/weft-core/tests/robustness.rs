//! Bad input gets a diagnostic, never a panic (docs/design.md, invariant 8): odd line breaks,
//! non-ASCII text, and every input the fuzzers ever crashed on (`fuzz/findings/`).

use std::path::Path;

use weft_core::policy::{compile_str, show, LoadOptions, NodeId};

fn compile(text: &str) -> Result<String, Vec<(String, usize)>> {
    match compile_str(Path::new("input.yaml"), text, &LoadOptions::default()) {
        Ok(p) => Ok(serde_json::to_string(&show::to_json(&p)).unwrap()),
        Err(e) => Err(e
            .diagnostics
            .iter()
            .map(|d| (d.rule.to_string(), e.sources.location(d.span).1))
            .collect()),
    }
}

#[test]
fn carriage_return_line_breaks_are_lines() {
    let text = "weft: 1\rnodes:\r  - {name: root, type: fifo}\r  - {name: a, type: leaf, parent: nowhere}\r";
    assert_eq!(
        compile(text).unwrap_err(),
        vec![("unknown-node".to_string(), 4)]
    );
    let crlf = text.replace('\r', "\r\n");
    assert_eq!(
        compile(&crlf).unwrap_err(),
        vec![("unknown-node".to_string(), 4)]
    );
}

#[test]
fn non_ascii_text_is_located_by_character() {
    let text = "# politique réseau — été\nweft: 1\nnodes:\n  - {name: racine, type: fifo}\n  - {name: é, type: feuille, parent: racine}\n";
    let err = compile_str(Path::new("x.yaml"), text, &LoadOptions::default()).unwrap_err();
    let d = &err.diagnostics[0];
    assert_eq!(d.rule.to_string(), "unknown-algorithm");
    assert_eq!(&text[d.span.offset..d.span.offset + d.span.len], "feuille");
    assert_eq!(err.sources.location(d.span).1, 5);
}

#[test]
fn fuzz_findings_do_not_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/findings");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut n = 0;
    for e in entries {
        let path = e.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        if let Ok(text) = std::str::from_utf8(&bytes) {
            // Either outcome is fine; a valid one must also round-trip.
            if let Ok(json) = compile(text) {
                assert_eq!(compile(&json), Ok(json.clone()), "{}", path.display());
            }
            n += 1;
        }
    }
    assert!(n > 0, "no findings read from {}", dir.display());
}

/// A misspelt parent is matched against the nodes that could be a parent: never the node
/// itself, a leaf or an attachment point.
#[test]
fn a_misspelt_parent_suggests_only_possible_parents() {
    let help = |text: &str| {
        let err = compile_str(Path::new("p.yaml"), text, &LoadOptions::default()).unwrap_err();
        assert_eq!(err.diagnostics[0].rule.to_string(), "unknown-node");
        err.diagnostics[0].help.clone()
    };
    // `x` is one letter from `a` (the node itself) and `b` (a leaf): neither can be its
    // parent, and `root` is too far to suggest.
    let text = "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - {name: b, type: leaf, parent: root}\n  - {name: a, type: leaf, parent: x}\n";
    assert_eq!(help(text), None);
    // `tenant` for `tenants`, an inner node: suggested.
    let text = "weft: 1\nnodes:\n  - {name: tenants, type: wfq}\n  - {name: tenant-a, type: leaf, parent: tenant}\n";
    assert_eq!(help(text).as_deref(), Some("did you mean `tenants`?"));
}

/// What the YAML reader refuses (`policy/yaml.rs`), each as a `yaml-syntax` diagnostic on the
/// line where it is written and nothing else: a key given twice in one mapping, aliases that
/// would expand a small file to millions of values, nesting beyond the parser's limit, a
/// second document.
#[test]
fn yaml_the_reader_refuses_is_a_syntax_error_where_written() {
    let syntax = |line| Err(vec![("yaml-syntax".to_string(), line)]);
    let twice = "weft: 1\nnodes:\n  - {name: root, type: fifo}\n  - {name: a, type: leaf,\n     parent: root, name: b}\n";
    assert_eq!(compile(twice), syntax(5));
    let mut bomb = String::from("weft: 1\nx0: &x0 [a, a]\n");
    for i in 1..24 {
        bomb.push_str(&format!("x{i}: &x{i} [*x{}, *x{}]\n", i - 1, i - 1));
    }
    bomb.push_str("nodes: [{name: root, type: fifo}]\n");
    assert!(matches!(&compile(&bomb), Err(d) if d.len() == 1 && d[0].0 == "yaml-syntax"));
    let deep = format!("weft: 1\nnodes: {}{}\n", "[".repeat(5000), "]".repeat(5000));
    assert_eq!(compile(&deep), syntax(2));
    let two = "weft: 1\nnodes: [{name: root, type: fifo}]\n---\nweft: 1\n";
    assert_eq!(compile(two), syntax(4));
}

/// A name written as a number is the name as written (`007`, not `7`), at its declaration
/// and where a parent names it.
#[test]
fn a_number_as_a_name_keeps_its_digits() {
    let text = "weft: 1\nnodes:\n  - {name: 007, type: wfq}\n  - {name: 0x1f, type: leaf, parent: 007, weight: 1, match: {tag: 1}}\n  - {name: 1e3, type: leaf, parent: 007, weight: 1}\n";
    let json = compile(text).unwrap();
    assert!(
        json.contains("\"007\"") && json.contains("\"0x1f\"") && json.contains("\"1e3\""),
        "{json}"
    );
    // A name that is no number or string is one diagnostic, not also a missing name.
    let text = "weft: 1\nnodes:\n  - {name: true, type: fifo}\n";
    assert_eq!(compile(text), Err(vec![("bad-value".to_string(), 3)]));
}

/// Names with invisible formatting characters (a zero-width space, a right-to-left override)
/// are refused: they make two names look alike, or a name read backwards.
#[test]
fn invisible_characters_in_names_are_refused() {
    for name in ["ro\u{200b}ot", "\u{202e}toor", "root\u{feff}"] {
        let text = format!("weft: 1\nnodes:\n  - {{name: \"{name}\", type: fifo}}\n");
        assert_eq!(
            compile(&text),
            Err(vec![("bad-value".to_string(), 3)]),
            "{name:?}"
        );
    }
    // Accents are letters, not formatting.
    let text = "weft: 1\nnodes:\n  - {name: café, type: wfq}\n  - {name: a, type: leaf, parent: café, weight: 1}\n";
    assert!(compile(text).is_ok());
}

#[test]
fn names_must_be_composed_and_are_found_in_either_form() {
    // "café" with a combining acute accent (e + U+0301): it looks like the composed name, so
    // it is refused, with the composed spelling in the message.
    let decomposed = "cafe\u{301}";
    let text = format!("weft: 1\nnodes:\n  - {{name: {decomposed}, type: fifo}}\n");
    assert_eq!(
        compile(&text),
        Err(vec![("bad-value".to_string(), 3)]),
        "{decomposed:?}"
    );
    let e = compile_str(Path::new("p.yaml"), &text, &LoadOptions::default()).unwrap_err();
    let message = e.diagnostics[0].message.clone();
    assert!(
        message.contains("NFC")
            && message.contains(r#""cafe\u{301}""#)
            && message.contains(r#""café""#),
        "{message}"
    );
    // The composed name compiles, and a lookup typed decomposed finds it.
    let text = "weft: 1\nnodes:\n  - {name: café, type: wfq}\n  - {name: a, type: leaf, parent: café, weight: 1}\n";
    let p = compile_str(Path::new("p.yaml"), text, &LoadOptions::default()).unwrap();
    assert_eq!(p.node_id(decomposed), Some(NodeId::ROOT));
    assert_eq!(p.node_id("café"), Some(NodeId::ROOT));
}

/// A YAML 1.1 merge key (`<<: *defaults`, common in hand-written YAML) is an unknown key in
/// YAML 1.2; the hint says so instead of listing the node keys, and an alias of a whole value
/// still works.
#[test]
fn a_merge_key_says_merge_keys_are_not_supported() {
    let text = "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - &a {name: a, type: leaf, parent: root, match: &web {dport: 80}}\n  - {<<: *a, name: b, match: {dport: 81}}\n";
    let err = compile_str(Path::new("x.yaml"), text, &LoadOptions::default()).unwrap_err();
    let d = &err.diagnostics[0];
    assert_eq!(d.rule.to_string(), "unknown-key");
    assert_eq!(err.sources.location(d.span).1, 5);
    let help = d.help.as_deref().unwrap_or_default();
    assert!(help.contains("merge keys"), "{help}");
    let alias = "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - {name: b, type: drr, parent: root, match: {vm: 1}}\n  - {name: c, type: leaf, parent: b, match: &web {dport: 80}}\n  - {name: a, type: leaf, parent: root, match: *web}\n";
    assert!(compile(alias).is_ok());
}

/// A policy saved as UTF-16 (Windows editors, PowerShell's `>`) is named as such, with the
/// `iconv` line that converts it, rather than as Latin-1 text with a bad byte.
#[test]
fn a_utf16_policy_is_named_utf16() {
    let text = "weft: 1\nnodes:\n  - {name: root, type: leaf}\n";
    for (bom, encode) in [
        ([0xFF, 0xFE], u16::to_le_bytes as fn(u16) -> [u8; 2]),
        ([0xFE, 0xFF], u16::to_be_bytes),
    ] {
        let mut bytes = bom.to_vec();
        bytes.extend(text.encode_utf16().flat_map(encode));
        let err = weft_core::policy::load_bytes(
            Path::new("win.yaml"),
            Ok(bytes),
            &LoadOptions::default(),
        )
        .unwrap_err();
        let d = &err.diagnostics[0];
        assert_eq!(d.rule.to_string(), "unreadable-file");
        assert!(d.message.contains("is UTF-16 text"), "{}", d.message);
        assert!(
            d.help
                .as_deref()
                .unwrap_or_default()
                .contains("iconv -f utf-16"),
            "{:?}",
            d.help
        );
    }
    // Latin-1 keeps its hint.
    let err = weft_core::policy::load_bytes(
        Path::new("latin.yaml"),
        Ok(b"# caf\xe9\nweft: 1\n".to_vec()),
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(err.diagnostics[0].message.contains("byte 0xE9"));
}

/// Rule shadowed-match across levels: a node every packet of whose scope (its match and its
/// ancestors') an earlier sibling of it or of an ancestor takes first can never be chosen.
/// Such policies compiled, and the node's counters stayed at zero.
#[test]
fn a_node_shadowed_from_a_level_above_is_refused() {
    let head = "weft: 1\nnodes:\n  - {name: root, type: prio}\n  - {name: web, type: leaf, parent: root, priority: 0, match: {dport: 80}}\n  - {name: vm1, type: wfq, parent: root, priority: 1, match: {vm: 1}}\n";
    // VM 1's port 80 goes to `web` at the root: `vm1-web` never sees a packet.
    let text = format!("{head}  - {{name: vm1-web, type: leaf, parent: vm1, weight: 1, match: {{dport: 80}}}}\n  - {{name: vm1-rest, type: leaf, parent: vm1, weight: 1}}\n");
    assert_eq!(
        compile(&text),
        Err(vec![("shadowed-match".to_string(), 6)]),
        "{text}"
    );
    // Overlap that leaves something is allowed: port 443 of VM 1 reaches `vm1-tls`.
    let text = format!("{head}  - {{name: vm1-tls, type: leaf, parent: vm1, weight: 1, match: {{dport: [80, 443]}}}}\n  - {{name: vm1-rest, type: leaf, parent: vm1, weight: 1}}\n");
    assert!(compile(&text).is_ok(), "{text}");
    // A node under a shadowed one is not reported again.
    let text = format!("{head}  - {{name: vm1-web, type: wfq, parent: vm1, weight: 1, match: {{dport: 80}}}}\n  - {{name: x, type: leaf, parent: vm1-web, weight: 1, match: {{tenant: 1}}}}\n  - {{name: y, type: leaf, parent: vm1-web, weight: 1}}\n  - {{name: vm1-rest, type: leaf, parent: vm1, weight: 1}}\n");
    assert_eq!(
        compile(&text),
        Err(vec![("shadowed-match".to_string(), 6)]),
        "{text}"
    );
    // At its own level, through the parent's scope: under `t`, which takes only VM 1, `a`
    // (VM 1) leaves nothing for the catch-all `b`.
    let text = "weft: 1\nnodes:\n  - {name: root, type: prio}\n  - {name: t, type: wfq, parent: root, priority: 0, match: {vm: 1}}\n  - {name: a, type: leaf, parent: t, weight: 1, match: {vm: 1}}\n  - {name: b, type: leaf, parent: t, weight: 1}\n  - {name: rest, type: leaf, parent: root, priority: 1}\n";
    assert_eq!(
        compile(text),
        Err(vec![("shadowed-match".to_string(), 6)]),
        "{text}"
    );
    let e = compile_str(Path::new("p.yaml"), text, &LoadOptions::default()).unwrap_err();
    assert!(
        e.diagnostics[0]
            .message
            .contains("`b` can never be chosen: every packet that can reach it (match {vm: 1}) is taken first by `a`"),
        "{}",
        e.diagnostics[0].message
    );
}

/// A policy path that is not a regular file is refused at once, saying what it is: a FIFO
/// would block the reader for ever and `/dev/zero` would never end (both hung or exhausted
/// `weft ctl reload` and every command that loads a policy).
#[cfg(unix)]
#[test]
fn a_policy_path_that_is_not_a_regular_file_is_refused_saying_what_it_is() {
    use weft_core::policy::{load, LoadOptions};
    let e = load(std::path::Path::new("/dev/zero"), &LoadOptions::default()).unwrap_err();
    assert!(
        e.render_plain().contains("character device"),
        "{}",
        e.render_plain()
    );
    let dir = std::env::temp_dir().join(format!("weft-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("policy.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let e = load(&fifo, &LoadOptions::default()).unwrap_err();
        assert!(e.render_plain().contains("a FIFO"), "{}", e.render_plain());
    } else {
        eprintln!("skipped the FIFO half: mkfifo did not run");
    }
    // A sub-policy too.
    let top = dir.join("top.yaml");
    std::fs::write(
        &top,
        "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - {name: t, type: leaf, parent: root}\n  - {name: p, type: attach, parent: root, policy: /dev/zero}\n",
    )
    .unwrap();
    let e = load(&top, &LoadOptions::default()).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        e.render_plain().contains("character device"),
        "{}",
        e.render_plain()
    );
}

/// A YAML tag outside the core schema (`!!python/object:...`, `!custom`, `!!binary`) is
/// refused where its value is read, naming the tag; it is never read as if it were not there.
#[test]
fn yaml_tags_outside_the_core_schema_are_refused_by_name() {
    for (tag, value) in [
        ("!!python/object:os.system", "root"),
        ("!custom", "root"),
        ("!!binary", "cm9vdA=="),
    ] {
        let text = format!(
            "weft: 1\nnodes:\n  - {{name: {tag} {value}, type: wfq}}\n  - {{name: a, type: leaf, parent: root}}\n"
        );
        let e = compile_str(Path::new("tags.yaml"), &text, &LoadOptions::default())
            .expect_err("a foreign tag is refused");
        let plain = e.render_plain();
        assert!(
            plain.contains(&format!("tagged `{tag}`")) && plain.contains("bad-value"),
            "{plain}"
        );
    }
    // The core schema's tags are read.
    let text = "weft: 1\nnodes:\n  - {name: !!str root, type: wfq}\n  - {name: a, type: leaf, parent: root, weight: !!int 2}\n";
    compile_str(Path::new("tags.yaml"), text, &LoadOptions::default()).expect("core tags");
}

/// `max_nodes` is charged while sub-policies expand: L files each attaching the next twice
/// (2^L nodes) are refused once the limit is passed, without composing the rest.
#[test]
fn composition_stops_at_the_node_limit() {
    use weft_core::policy::{load, LoadOptions};
    let dir = std::env::temp_dir().join(format!("weft-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    const LEVELS: usize = 24; // 2^24 nodes if composed whole
    for k in 0..LEVELS {
        let text = if k + 1 < LEVELS {
            format!(
                "weft: 1\nnodes:\n  - {{name: r, type: wfq}}\n  - {{name: a, type: attach, parent: r, policy: f{}.yaml}}\n  - {{name: b, type: attach, parent: r, policy: f{}.yaml}}\n",
                k + 1,
                k + 1
            )
        } else {
            "weft: 1\nnodes:\n  - {name: r, type: wfq}\n  - {name: l, type: leaf, parent: r}\n"
                .to_string()
        };
        let head = if k == 0 {
            "limits: {max_nodes: 1000}\n"
        } else {
            ""
        };
        std::fs::write(dir.join(format!("f{k}.yaml")), format!("{head}{text}")).unwrap();
    }
    let e = load(&dir.join("f0.yaml"), &LoadOptions::default()).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    let plain = e.render_plain();
    assert!(
        plain.contains("node-limit") && plain.contains("composition stopped"),
        "{plain}"
    );
}

/// Thousands of nodes naming one misspelt parent each get the suggestion (looked up once),
/// and a node is never told to take itself as its parent.
#[test]
fn many_nodes_under_a_misspelt_parent_are_each_told_the_right_name() {
    let mut text = String::from("weft: 1\nnodes:\n  - {name: root, type: wfq}\n");
    for i in 0..5000 {
        text += &format!("  - {{name: l{i}, type: leaf, parent: rooot}}\n");
    }
    // A scheduling node whose own name is the closest to its (unknown) parent.
    text +=
        "  - {name: rooots, type: wfq, parent: rooot}\n  - {name: x, type: leaf, parent: rooots}\n";
    let e = compile_str(Path::new("many.yaml"), &text, &LoadOptions::default()).unwrap_err();
    let unknown: Vec<_> = e
        .diagnostics
        .iter()
        .filter(|d| d.rule.to_string() == "unknown-node")
        .collect();
    assert_eq!(unknown.len(), 5001);
    for d in &unknown {
        let help = d.help.as_deref().unwrap_or("");
        // `rooots` and `root` are both one edit from `rooot`; ties go to the name that
        // sorts first, except for `rooots` itself, which cannot be its own parent.
        let want = if d.node.as_deref() == Some("rooots") {
            "did you mean `root`?"
        } else {
            "did you mean `rooots`?"
        };
        assert_eq!(help, want, "{}", d.message);
    }
}
