//! What a reload's errors may say: the policy's diagnostics without excerpts and hints,
//! and whatever their messages quote from the file replaced by `…` unless it is a word of
//! weft's own vocabulary ([`redact`], [`client_error`], [`unquote_files`]): the daemon may
//! run as root, and a client must not learn what is in a file it names.
//!
//! Invariants: no byte of a file's text reaches the answer unless it is one of the format's
//! own words. Cost: one pass over the message.

use super::*;

/// Words of weft's policy format (keys, node types, match fields, units, rule names): what a
/// message may quote without quoting the file.
pub(super) fn vocabulary() -> &'static HashSet<&'static str> {
    static WORDS: std::sync::OnceLock<HashSet<&'static str>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        let mut w: HashSet<&'static str> = HashSet::new();
        w.extend(TOP_KEYS.iter().copied());
        w.extend(NODE_KEYS.iter().copied());
        w.extend(Kind::ALL.map(Kind::name));
        w.extend(weft_core::classifier::FIELDS.map(|f| f.name()));
        w.extend(Rule::ALL.map(Rule::name));
        w.extend([
            "app",
            "overhead",
            "mtu",
            "count",
            "wire",
            "frame",
            "max_depth",
            "max_nodes",
            "max_shaping_depth",
            "max_match_shapes",
            "by",
            "sched",
            "packets",
            "bytes",
            "five",
            "tuple",
            "flow",
            "none",
            "fair",
            "bit",
            "kbit",
            "mbit",
            "gbit",
            "tbit",
            "kibit",
            "mibit",
            "gibit",
            "kb",
            "kib",
            "mb",
            "mib",
            "gb",
            "gib",
        ]);
        w
    })
}

/// Whether a quoted fragment of a message is weft's own words (kept) rather than something
/// from the file (replaced by `…`): short ASCII, every run of letters in it a word of
/// [`vocabulary`] (of two letters or more), no run of more than three digits.
pub(super) fn own_words(fragment: &str) -> bool {
    fragment.len() <= 64
        && fragment.is_ascii()
        && fragment
            .split(|c: char| !(c.is_ascii_alphabetic() || c == '_'))
            .filter(|w| !w.is_empty())
            .all(|w| w.len() > 1 && vocabulary().contains(w))
        && fragment
            .split(|c: char| !c.is_ascii_digit())
            .all(|digits| digits.len() <= 3)
}

/// A policy that does not compile, as a control client that may not read its files is told:
/// [`redact`]ed, then [`unquote_files`] with every file the policy was composed from.
pub fn client_error(e: &weft_core::policy::PolicyError) -> String {
    let texts: Vec<&str> = e.sources.files.iter().map(|f| &*f.text).collect();
    unquote_files(&redact(&e.to_string()), &texts)
}

/// Whether `c` belongs to a word for [`unquote_files`]: letters, digits, `_`, and every
/// character outside ASCII.
pub(super) fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || !c.is_ascii()
}

/// [`redact`]'s second pass for a reload whose files' texts are known: a word of `answer`'s
/// messages (after each line's `error[rule]: `) that one of `texts` holds as a whole word
/// becomes `…`, unless it is weft's own (a word of the policy format, a number of at most
/// three digits). Quotes alone cannot say where a file's text ends when it holds quote
/// characters itself: the value `10.0`x`.0.0/8`, quoted in backticks by the compiler, left
/// `x` between two quoted fragments. Cost: one pass over the texts (a set of their words)
/// and one over the answer.
pub fn unquote_files(answer: &str, texts: &[&str]) -> String {
    let words: HashSet<&str> = texts
        .iter()
        .flat_map(|t| t.split(|c: char| !word_char(c)))
        .filter(|w| !w.is_empty())
        .collect();
    let unquote = |message: &str| {
        let mut out = String::with_capacity(message.len());
        let mut rest = message;
        while let Some(i) = rest.find(word_char) {
            out.push_str(&rest[..i]);
            let w = &rest[i..];
            let end = w.find(|c: char| !word_char(c)).unwrap_or(w.len());
            let (word, after) = w.split_at(end);
            out.push_str(if words.contains(word) && !own_words(word) {
                "…"
            } else {
                word
            });
            rest = after;
        }
        out.push_str(rest);
        out
    };
    answer
        .lines()
        .map(|line| match line.find("]: ") {
            Some(i) => format!("{}{}", &line[..i + 3], unquote(&line[i + 3..])),
            None => unquote(line),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A policy error (the compiler's diagnostic lines) fit for a control client, who may not be
/// allowed to read the file: each line keeps its `file:line:col: error[rule]:` and message,
/// loses the node and the hint, and what the message quotes from the file (between backticks
/// or double quotes, node names in a chain `a → b`, a byte's value) becomes `…`.
pub fn redact(error: &str) -> String {
    error
        .lines()
        .map(redact_line)
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn redact_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    // Quoted fragments: `…` and "…" (with \" inside, as `{:?}` writes them).
    while let Some(i) = rest.find(['`', '"']) {
        let q = rest.as_bytes()[i] as char;
        out.push_str(&rest[..=i]);
        let after = &rest[i + 1..];
        let mut end = None;
        let mut escaped = false;
        for (j, c) in after.char_indices() {
            if q == '"' && c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            if c == q && !escaped {
                end = Some(j);
                break;
            }
            escaped = false;
        }
        let Some(j) = end else {
            // An unmatched quote: what follows may be the file's; it goes.
            out.push('…');
            rest = "";
            break;
        };
        let inner = &after[..j];
        out.push_str(if own_words(inner) { inner } else { "…" });
        out.push(q);
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    // Chains of names: `parents form a cycle: a → b → a`.
    let words: Vec<&str> = out.split(' ').collect();
    let mut chained = vec![false; words.len()];
    for (i, w) in words.iter().enumerate() {
        if *w == "→" {
            chained[i.saturating_sub(1)] = true;
            if i + 1 < words.len() {
                chained[i + 1] = true;
            }
        }
    }
    let mut out: String = words
        .iter()
        .zip(&chained)
        .map(|(w, &c)| {
            if !c || own_words(w.trim_end_matches([',', ';', ')'])) {
                (*w).to_string()
            } else {
                let tail = &w[w.trim_end_matches([',', ';', ')']).len()..];
                format!("…{tail}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    // A byte of a file that is not UTF-8.
    while let Some(i) = out.find("byte 0x") {
        let end = (i + "byte 0x".len() + 2).min(out.len());
        if !out.is_char_boundary(end) {
            break;
        }
        out.replace_range(i..end, "a byte");
    }
    // The node and the hint: `… (node `x`); help: …` (their quotes are redacted already,
    // so neither holds a `; help: ` of the file's).
    if let Some(i) = out.find("; help: ") {
        out.truncate(i);
    }
    if let Some(i) = out.rfind(" (node `") {
        if out.ends_with("`)") {
            out.truncate(i);
        }
    }
    out
}
