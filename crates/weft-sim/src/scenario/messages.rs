//! The YAML library's errors in the scenario's terms: an empty file, a key given twice, an
//! unknown key (with the key it most likely meant) or a value of the wrong kind (its key and
//! what it must be: `` `cores` must be a whole number from 1 to 65535 ``), found from the
//! error's line and column in the text.
//!
//! Cost: linear in the text up to the error's place.

use weft_core::policy::names::suggest;

use crate::nic::NicKind;

pub(super) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// The YAML library's message without its own `error: line L column C: ` prefix (the error
/// already names the file, line and column).
pub(super) fn without_location(m: &str) -> String {
    let m = m.strip_prefix("error: ").unwrap_or(m);
    if m.starts_with("line ") {
        if let Some((head, rest)) = m.split_once(": ") {
            if head.contains(" column ") {
                return rest.to_string();
            }
        }
    }
    m.to_string()
}

/// What the YAML library's error `e` at `line`:`column` of `text` means in the scenario's
/// terms: the scenario file is empty; a key is given twice; a key is unknown (and the key it
/// most likely meant); or the key whose value is of the wrong kind and what it must be
/// (`` `cores` must be a whole number from 1 to 65535 ``). `None` for other errors (syntax:
/// the library's message says it).
pub(super) fn yaml_message(
    e: &serde_saphyr::Error,
    text: &str,
    line: u64,
    column: u64,
) -> Option<String> {
    use serde_saphyr::Error as E;
    let blank = text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    });
    if blank {
        return Some(
            "the scenario file is empty: a scenario is a mapping with `duration`, `policy` (or \
             `policy_inline`) and `tenants` (examples/scenarios/README.md)"
                .into(),
        );
    }
    let want = match e {
        E::AliasError { error, .. } | E::WithSnippet { error, .. } => {
            return yaml_message(error, text, line, column)
        }
        E::DuplicateMappingKey { key: Some(k), .. } => {
            return Some(format!(
                "key `{k}` given twice: a mapping holds each key once"
            ))
        }
        E::DuplicateMappingKey { key: None, .. } => {
            return Some("a key given twice: a mapping holds each key once".into())
        }
        E::SerdeMissingField { field, .. } => return Some(format!("missing key `{field}`")),
        E::SerdeUnknownField {
            field, expected, ..
        } => {
            let hint = suggest(field, expected)
                .map_or(String::new(), |s| format!("; did you mean `{s}`?"));
            return Some(format!(
                "unknown key `{field}`{hint} (known: {})",
                expected.join(", ")
            ));
        }
        E::Unexpected { expected, .. } => match *expected {
            "sequence start" => Want::List,
            "mapping start" => Want::Mapping,
            "string scalar" => Want::Single,
            _ => return None,
        },
        E::InvalidScalar { ty: "boolean", .. } => Want::Bool,
        E::InvalidScalar { ty, .. } => Want::Number(ty),
        E::NullIntoString { .. } => Want::Value,
        // A `meta` field's or a NIC parameter's value (a number or text) given a list or a
        // mapping: serde's words for it name the type.
        E::Message { msg, .. } if msg.contains("untagged enum Scalar") => Want::Single,
        _ => return None,
    };
    let at = key_at(text, line, column);
    let got = match want {
        Want::Number(_) | Want::Bool => {
            scalar_at(text, line, column).map_or(String::new(), |v| format!(", not `{v}`"))
        }
        _ => String::new(),
    };
    let Some((key, item)) = at else {
        return Some(match want {
            Want::Mapping => "a scenario is a mapping of keys (`duration:`, `policy:`, \
                              `tenants:` and others; examples/scenarios/README.md), not a \
                              single value or a list"
                .into(),
            Want::List => "expected a list here, e.g. `[a, b]`".into(),
            Want::Single => "expected a single value here, not a list or a mapping".into(),
            Want::Number(ty) => format!("expected {}{got}", whole_number(ty)),
            Want::Bool => format!("expected `true` or `false`{got}"),
            Want::Value => "a value is missing here".into(),
        });
    };
    let (subject, what) = key_rule(&key, item, want);
    Some(match want {
        Want::Value => format!("{subject} has no value: it must be {what}"),
        _ => format!("{subject} must be {what}{got}"),
    })
}

/// The kind of value the YAML library wanted where it found another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    List,
    Mapping,
    /// A scalar, not a list or a mapping.
    Single,
    /// An integer of this Rust type.
    Number(&'static str),
    Bool,
    /// Something where there is nothing (`duration:` alone).
    Value,
}

/// `a whole number from 0 to 65535` for an integer type's name.
fn whole_number(ty: &str) -> String {
    let max = match ty {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        _ => u64::MAX,
    };
    format!("a whole number from 0 to {max}")
}

/// What the value of `key` must be, for a message: (`` `cores` ``, `a whole number from 1 to
/// 65535`). `item`: the value is an entry of `key`'s list.
fn key_rule(key: &str, item: bool, want: Want) -> (String, String) {
    let k = format!("`{key}`");
    let each = format!("each entry of `{key}`");
    let time = "a time, e.g. `10ms`";
    let size = "a size, e.g. `64kb`";
    let (subject, what): (&str, String) = match (key, item) {
        ("cores", false) if want == Want::List || want == Want::Mapping => {
            (&k, "a list of core numbers, e.g. `[0, 1]`".into())
        }
        ("cores", false) => (&k, "a whole number from 1 to 65535".into()),
        ("cores", true) => (
            &each,
            "a core number, a whole number from 0 to 65534".into(),
        ),
        ("flows", _) => (&k, whole_number("u32")),
        ("limits", _) => (
            &k,
            "a mapping, e.g. `{max_offered_load: 64, max_events: 1073741824}`".into(),
        ),
        ("max_offered_load" | "max_events", _) => (&k, "a whole number, at least 1".into()),
        ("seed", _) => (&k, whole_number("u64")),
        ("dcb_class", _) => (&k, "a whole number from 0 to 7".into()),
        ("prioritized" | "closed_loop", _) => (&k, "`true` or `false`".into()),
        ("nics", false) => (&k, "a list, e.g. `[sq, loom]`".into()),
        ("nics", true) => (&each, format!("a NIC model's name ({})", NicKind::names())),
        ("tenants", false) => (
            &k,
            "a list of tenants, each a mapping with `name` and `apps`".into(),
        ),
        ("tenants", true) => (&each, "a mapping with `name` and `apps`".into()),
        ("apps", false) => (
            &k,
            "a list of applications, e.g. `[{name: bulk, kind: bulk}]`".into(),
        ),
        ("apps", true) => (&each, "a mapping with `name` and `kind`".into()),
        ("schedule", false) => (
            &k,
            "a list of steps, e.g. `[{at: 400ms, flows: 16}]`".into(),
        ),
        ("schedule", true) => (&each, "a mapping, e.g. `{at: 400ms, flows: 16}`".into()),
        ("host", _) => (&k, "a mapping, e.g. `{cores: 8, mtu: 1500b}`".into()),
        ("nic", _) => (
            &k,
            "a mapping of models to parameters, e.g. `{loom: {batch: 64kb}}`".into(),
        ),
        ("meta", _) => (
            &k,
            "a mapping of packet fields to values, e.g. `{tenant: 1, dport: 11211}`".into(),
        ),
        (
            "duration" | "latency_window" | "start" | "stop" | "at" | "retry" | "cpu_per_packet"
            | "cpu_per_doorbell",
            _,
        ) => (&k, time.into()),
        ("window", _) => (
            &k,
            "a single value: a time (the throughput window, e.g. `5ms`), or in a bulk \
             application a size (e.g. `128kb`)"
                .into(),
        ),
        ("segment" | "mtu" | "size" | "socket_limit", _) => (&k, size.into()),
        ("rate", _) => (
            &k,
            "a single value, e.g. `10000/s` (request-response) or `2gbit` (udp)".into(),
        ),
        ("kind", _) => (&k, "`bulk`, `request-response` or `udp`".into()),
        ("placement", _) => (&k, "`random` or `round-robin`".into()),
        ("size_dist", _) => (&k, "`fixed` or `exponential`".into()),
        ("policy_inline", _) => (
            &k,
            "the policy's YAML as a block: `policy_inline: |` and the policy indented below".into(),
        ),
        ("name" | "description" | "time_scale" | "policy", _) => {
            (&k, "text, not a list or a mapping".into())
        }
        (model, false)
            if NicKind::from_name(model).is_some() || matches!(model, "hw" | "all" | "dcb") =>
        {
            let params: Vec<&str> = crate::nic::PARAMETERS
                .iter()
                .filter_map(|p| p.strip_prefix(model)?.strip_prefix('.'))
                .collect();
            (
                &k,
                format!(
                    "a mapping of its NIC parameters ({}) to values",
                    params.join(", ")
                ),
            )
        }
        _ => match want {
            Want::List => (&k, "a list".into()),
            Want::Mapping => (&k, "a mapping".into()),
            Want::Single | Want::Value => (
                &k,
                "a single value (a number or text), not a list or a mapping".into(),
            ),
            Want::Number(ty) => (&k, whole_number(ty)),
            Want::Bool => (&k, "`true` or `false`".into()),
        },
    };
    (subject.to_string(), what)
}

/// The characters of `text` before 1-based `line`:`column` (counted in characters, as the
/// YAML library does), and the character there.
fn before(text: &str, line: u64, column: u64) -> (Vec<char>, Option<char>) {
    let mut out = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        if i as u64 + 1 < line {
            out.extend(l.chars());
            out.push('\n');
        } else {
            let mut cs = l.trim_end_matches('\r').chars();
            out.extend(cs.by_ref().take(column.saturating_sub(1) as usize));
            return (out, cs.next());
        }
    }
    (out, None)
}

/// The key whose value is at `line`:`column`, and whether the value is an entry of that key's
/// list (`cores: [0, x]`, `- x` under `tenants:`); `None` at the top of the document. Reads
/// the text backwards: flow and block style as the scenarios are written (comments between a
/// key and its value are not skipped).
fn key_at(text: &str, line: u64, column: u64) -> Option<(String, bool)> {
    let (mut cs, here) = before(text, line, column);
    // A key without a value is reported at its colon.
    if here == Some(':') {
        cs.push(':');
    }
    let skip_space = |cs: &[char], mut i: usize| {
        while i > 0 && cs[i - 1].is_whitespace() {
            i -= 1;
        }
        i
    };
    // The key ending at the colon before `i` (after spaces).
    let key_before = |cs: &[char], i: usize| -> Option<String> {
        let i = skip_space(cs, i);
        if i == 0 || cs[i - 1] != ':' {
            return None;
        }
        let mut j = i - 1;
        while j > 0 && cs[j - 1] == ' ' {
            j -= 1;
        }
        let end = j;
        while j > 0 && (cs[j - 1].is_alphanumeric() || matches!(cs[j - 1], '_' | '-' | '.')) {
            j -= 1;
        }
        (j < end).then(|| cs[j..end].iter().collect())
    };
    let i = skip_space(&cs, cs.len());
    match i.checked_sub(1).map(|k| cs[k]) {
        Some(':') => key_before(&cs, i).map(|k| (k, false)),
        Some('[' | ',') => {
            // The `[` that opens this list, then its key.
            let mut depth = 0usize;
            let mut j = i;
            while j > 0 {
                j -= 1;
                match cs[j] {
                    ']' | '}' => depth += 1,
                    '{' if depth == 0 => return None,
                    '[' | '{' if depth > 0 => depth -= 1,
                    '[' => return key_before(&cs, j).map(|k| (k, true)),
                    _ => {}
                }
            }
            None
        }
        Some('-') if i == 1 || cs[i - 2].is_whitespace() => {
            // A block list entry: the key above it, indented less (or as much: `key:` then
            // `- entry` at its indentation).
            let line_start = cs[..i - 1]
                .iter()
                .rposition(|&c| c == '\n')
                .map_or(0, |p| p + 1);
            let indent = i - 1 - line_start;
            let above: String = cs[..line_start].iter().collect();
            for l in above.lines().rev() {
                let t = l.trim_start();
                if t.is_empty() || t.starts_with('#') {
                    continue;
                }
                if l.len() - t.len() > indent || t.starts_with("- ") {
                    continue;
                }
                let t = t.split(" #").next().unwrap_or(t).trim_end();
                return t.strip_suffix(':').map(|k| (k.trim().to_string(), true));
            }
            None
        }
        _ => None,
    }
}

/// The plain scalar at `line`:`column` (to the next `,`, `]`, `}`, ` #` or the line's end),
/// for messages; `None` when empty or long.
fn scalar_at(text: &str, line: u64, column: u64) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)? as usize)?;
    let rest: String = l.chars().skip(column.saturating_sub(1) as usize).collect();
    let v = rest
        .split([',', ']', '}'])
        .next()?
        .split(" #")
        .next()?
        .trim();
    (!v.is_empty() && v.chars().count() <= 40 && !v.chars().any(char::is_control))
        .then(|| v.to_string())
}
