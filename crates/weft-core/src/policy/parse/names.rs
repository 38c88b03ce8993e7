//! Names and the words of messages: which strings can name a node ([`valid_name`] and what
//! is wrong otherwise), short quoted excerpts of long values, and did-you-mean hints
//! ([`suggest`]).
//!
//! Invariants: a valid name is NFC, without whitespace, control or invisible formatting
//! characters, commas or double quotes, at most [`MAX_NAME_BYTES`]; an excerpt is at most
//! 64 characters and escapes what a terminal would act on.
//!
//! Cost: [`suggest`] computes one edit distance per known word of a length near `word`'s
//! (quadratic in the two lengths); the rest is linear in the text.

/// Whether `name` can name a node: non-empty, without whitespace, control characters, commas
/// or double quotes, without invisible formatting characters (zero-width spaces and
/// joiners, bidirectional overrides, the byte-order mark), which make two names look alike
/// or a name read backwards, and in Unicode's composed form (NFC), so that a name typed with
/// a combining accent and the same name typed precomposed are not two names that look the
/// same. Names are columns of weft's CSV outputs (departures, timelines), written unquoted,
/// and cells of its tables. (The simulator holds its scenarios' tenant and application
/// names to the same rule.) [`name_problem`] says what is wrong.
pub fn valid_name(name: &str) -> bool {
    name_problem(name).is_none()
}

/// Whether a name may hold `c` ([`valid_name`]): no whitespace, control character, comma,
/// double quote or invisible formatting character.
pub fn name_char(c: char) -> bool {
    !(c.is_whitespace() || c.is_control() || invisible_formatting(c) || c == '"' || c == ',')
}

/// Invisible formatting characters: zero-width spaces and joiners, the bidirectional
/// controls ([`bidi_control`]), word joiners and invisible operators, the byte-order mark,
/// the soft hyphen. Text holding them looks like other text.
pub fn invisible_formatting(c: char) -> bool {
    bidi_control(c)
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}')
}

/// The bidirectional embeddings, overrides and isolates: text holding them can read in
/// another order than it is stored, in a terminal or a browser.
pub fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What keeps `name` from being a name ([`valid_name`]), as the end of a sentence that
/// starts with the name: "must be non-empty, without ..." or "is not in Unicode's composed
/// form ...". `None` for a valid name.
pub fn name_problem(name: &str) -> Option<String> {
    if name.len() > MAX_NAME_BYTES {
        return Some(format!(
            "is {} bytes long: a name has at most {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.is_empty() || !name.chars().all(name_char) {
        return Some(
            "must be non-empty, without spaces, commas, double quotes, control or invisible \
             formatting characters"
                .to_string(),
        );
    }
    use unicode_normalization::UnicodeNormalization;
    if unicode_normalization::is_nfc(name) {
        return None;
    }
    let nfc: String = name.nfc().collect();
    Some(format!(
        "is not in Unicode's composed form (NFC): it spells a character as a letter and a \
         combining mark, so the same name typed with the composed character would be a \
         different name that looks the same; write it as {nfc:?}"
    ))
}

/// The longest name a node, leaf or flow class may have, bytes: names are printed in every
/// table, trace and report, so one name of megabytes made every output line as long.
pub const MAX_NAME_BYTES: usize = 256;

/// At most the first 64 characters of `s`, quoted as Rust quotes a string, with `…` when
/// there is more: what a diagnostic quotes of an input it refuses.
pub fn excerpt(s: &str) -> String {
    const CHARS: usize = 64;
    match s.char_indices().nth(CHARS) {
        None => format!("{s:?}"),
        Some((at, _)) => format!("{:?}…", &s[..at]),
    }
}

/// At most the first 64 characters of `s`, with `…` when there is more (unquoted).
pub(super) fn excerpt_plain(s: &str) -> String {
    match s.char_indices().nth(64) {
        None => s.to_string(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

/// `s` in Unicode's composed form (NFC), as every valid name is ([`valid_name`]): a name a
/// user types (a command-line flag, a terminal that decomposes accents) finds its node
/// whichever form it was typed in. Borrowed when `s` already is.
pub fn to_nfc(s: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    if unicode_normalization::is_nfc(s) {
        std::borrow::Cow::Borrowed(s)
    } else {
        std::borrow::Cow::Owned(s.nfc().collect())
    }
}

/// Closest known word, for did-you-mean hints: `None` when none is close enough.
///
/// Words are compared without case, `_` and `-` (`latencywindow` is `latency_window`). A
/// known word is close when it is within a few edits of `word` (at most 2, or a third of
/// its length), or when one contains the other and the shorter has at least 3 characters
/// (`loom.batch` for `loom.batchsize`, `latency_window` for `latency`), however long the
/// rest. Containing is worth fewer than 2 edits: a one-letter slip (`tenant` for `tenat`)
/// beats it, a two-letter one (`mtu` for `cpu`) does not. Ties go to a containing or
/// contained word, then to the nearer in length, then to the word that sorts first.
pub fn suggest(word: &str, known: &[&str]) -> Option<String> {
    let word = normalized(word, &mut String::new()).to_string();
    let chars = word.chars().count();
    let mut buf = String::new();
    // Scored in half edits: (score, not containing, length apart, word).
    known
        .iter()
        .filter_map(|k| {
            let n = normalized(k, &mut buf);
            let n_chars = n.chars().count();
            let apart = chars.abs_diff(n_chars);
            // One contains the other: as many edits as their lengths differ, at most 1.5.
            let (short, long) = if chars <= n_chars {
                (&*word, n)
            } else {
                (n, &*word)
            };
            if short.chars().count() >= 3 && long.contains(short) {
                return Some(((2 * apart).min(3), false, apart, *k));
            }
            // A word further in length from `k` than the distance allowed cannot be close
            // to it: skipped before the distance (quadratic in the lengths) is computed.
            let allowed = 2.max(n_chars / 3);
            if apart > allowed {
                return None;
            }
            let d = strsim::damerau_levenshtein(&word, n);
            (d <= allowed).then_some((2 * d, true, apart, *k))
        })
        .min()
        .map(|(_, _, _, k)| k.to_string())
}

/// `s` lowercased without `_` and `-`, in `buf` (borrowed as is when there is nothing to
/// change).
fn normalized<'a>(s: &'a str, buf: &'a mut String) -> &'a str {
    if !s.chars().any(|c| c == '_' || c == '-' || c.is_uppercase()) {
        return s;
    }
    buf.clear();
    buf.extend(
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase),
    );
    buf
}
