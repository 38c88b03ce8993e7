//! The example policies are tests: every file in `examples/policies/invalid/` breaks exactly the
//! rule it is named after, at the line its `# expect: RULE line N` comment gives, and every
//! policy directly in `examples/policies/` is valid.
//!
//! Files in `examples/policies/invalid/include/` are sub-policies the invalid examples attach;
//! they are not checked on their own. For diagnostics reported inside such a file (e.g.
//! `attach-cycle`, `match-conflict`) the expected line is a line of that file.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use weft_core::policy::{load, LoadOptions, Rule, Severity};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies")
}

/// The `*.yaml` files directly in `dir` (not in subdirectories), sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The `(rule, line)` of a file's `# expect: RULE line N` comment.
fn expectation(path: &Path) -> (Rule, usize) {
    // Lossy: `unreadable-file.yaml` is not UTF-8 on purpose (its comments are ASCII).
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let text = String::from_utf8_lossy(&bytes);
    let mut found = text
        .lines()
        .filter_map(|l| l.strip_prefix("# expect:"))
        .map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            match words.as_slice() {
                [rule, "line", n] => {
                    let rule = Rule::from_name(rule).unwrap_or_else(|| {
                        panic!("{}: `# expect:` names no rule: `{rule}`", path.display())
                    });
                    let line = n.parse::<usize>().unwrap_or_else(|_| {
                        panic!(
                            "{}: `# expect:` line is not a number: `{n}`",
                            path.display()
                        )
                    });
                    (rule, line)
                }
                _ => panic!(
                    "{}: malformed `# expect:{rest}`; write `# expect: RULE line N`",
                    path.display()
                ),
            }
        });
    let first = found
        .next()
        .unwrap_or_else(|| panic!("{}: no `# expect: RULE line N` comment", path.display()));
    assert!(
        found.next().is_none(),
        "{}: more than one `# expect:` comment",
        path.display()
    );
    first
}

#[test]
fn every_invalid_example_reports_its_rule_at_its_line() {
    let dir = examples_dir().join("invalid");
    let files = yaml_files(&dir);
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    let mut failures = Vec::new();
    for path in &files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (rule, line) = expectation(path);
        if rule.name() != stem {
            failures.push(format!(
                "{}: named `{stem}.yaml` but expects `{rule}`; name each file after its rule",
                path.display()
            ));
            continue;
        }
        match load(path, &LoadOptions::default()) {
            Ok(p) => failures.push(format!(
                "{}: expected {rule} at line {line}, but the policy loaded ({} nodes)",
                path.display(),
                p.nodes.len()
            )),
            Err(e) => {
                let got = e.rules_and_lines();
                if !got.contains(&(rule, line)) {
                    failures.push(format!(
                        "{}: expected {rule} at line {line}, got {got:?}:\n{}",
                        path.display(),
                        e.render_plain()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n\n"));
}

#[test]
fn every_rule_has_an_invalid_example() {
    let dir = examples_dir().join("invalid");
    let stems: Vec<String> = yaml_files(&dir)
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    // Warnings (`small-burst`) refuse nothing: no invalid example can show them.
    let missing: Vec<&str> = Rule::ALL
        .iter()
        .filter(|r| r.severity() == Severity::Error)
        .map(|r| r.name())
        .filter(|n| !stems.iter().any(|s| s == n))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without an example in {}: {}",
        dir.display(),
        missing
            .iter()
            .map(|n| format!("{n}.yaml"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let unknown: Vec<&String> = stems
        .iter()
        .filter(|s| Rule::from_name(s).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "files in {} not named after a rule: {unknown:?}",
        dir.display()
    );
}

#[test]
fn every_valid_example_loads() {
    let dir = examples_dir();
    let files = yaml_files(&dir);
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    let failures: BTreeMap<String, String> = files
        .iter()
        .filter_map(|path| {
            load(path, &LoadOptions::default())
                .err()
                .map(|e| (path.display().to_string(), e.render_plain()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "valid examples that do not load:\n{}",
        failures
            .iter()
            .map(|(p, e)| format!("{p}:\n{e}"))
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}
