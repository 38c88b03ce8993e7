//! Reading one policy file: YAML (via `yaml.rs`, which keeps every value's position
//! and text) into declarations that remember where each value was written. The entries of
//! `nodes:` are read and declared one at a time, so the YAML of one node is held at a time.
//!
//! This layer checks what one file can check alone: YAML syntax, known keys (with a
//! did-you-mean), value types, units, positive weights and rates. Graph rules (parents,
//! cycles, the restricted DAG) are checked on the composed policy by `compile`.
//!
//! Integers are read exactly over their whole range (to 2⁶⁴−1), never through `f64`: the
//! core schema's resolution turns a plain integer beyond `i64` into a float, so integers are
//! read from the text written (`Parser::integer`), and a value out of range is reported as
//! written.
//!
//! Cost: linear in the file size.
//!
//! Layout: `ast` holds the declarations and the format's keys, `walk` walks the YAML into
//! them, `values` reads scalars and units, `names` checks names and words the hints; this
//! file holds the parser's state, its spans and `parse_document`.

mod ast;
pub mod names;
#[cfg(test)]
mod tests;
mod values;
mod walk;

use std::sync::Arc;

use saphyr::Scalar;

use super::error::{Diagnostic, FileId, Rule, Sources, Span};
use super::yaml::{Data, Node, Reader};

pub(crate) use ast::{Document, NodeDecl, Spanned};
pub use ast::{FlowKey, FlowSched, Kind, FORMAT_VERSION, MAX_WEIGHT, NODE_KEYS, TOP_KEYS};
use names::excerpt_plain;
pub(crate) use names::{excerpt, suggest, to_nfc};

struct Parser<'a> {
    file: FileId,
    sources: &'a Sources,
    diags: Vec<Diagnostic>,
}

impl<'a> Parser<'a> {
    fn span(&self, n: &Node) -> Span {
        self.span_of(n.start, n.end)
    }

    /// The span of the characters `start..end` (as the YAML parser counts them).
    fn span_of(&self, start: usize, end: usize) -> Span {
        let f = self.sources.file(self.file);
        let len = f.text.len();
        let start = f.byte_offset(start).min(len);
        let mut end = f.byte_offset(end).clamp(start, len);
        if end == start {
            // Scalars sometimes end where they start; underline to the end of the token.
            let rest = &f.text[start..];
            end = start
                + rest
                    .find(['\n', '\r', ',', '}', ']', '#'])
                    .unwrap_or(rest.len());
        }
        // Trim trailing whitespace and newlines so underlines stay on the value; never
        // shorter than one character unless at the end of the file.
        let trimmed = f.text[start..end].trim_end().len();
        let len = if trimmed > 0 {
            trimmed
        } else {
            f.text[start..].chars().next().map_or(0, char::len_utf8)
        };
        Span {
            file: self.file,
            offset: start,
            len,
        }
    }

    fn err(&mut self, rule: Rule, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(rule, span, msg));
    }

    fn describe(n: &Node) -> String {
        if let Data::Value(None, w) = &n.data {
            if let Some(t) = &w.tag {
                let tag = excerpt_plain(&crate::policy::yaml::tag_text(t));
                return if crate::policy::yaml::is_core_tag(t) {
                    format!("a value its tag `{tag}` does not fit")
                } else {
                    format!(
                        "a value tagged `{tag}`, a YAML tag weft does not read (only the core \
                         schema's: !!str, !!int, !!float, !!bool, !!null)"
                    )
                };
            }
        }
        match &n.data {
            Data::Value(Some(Scalar::Null), _) => "nothing",
            Data::Value(Some(Scalar::Boolean(_)), _) => "a boolean",
            Data::Value(Some(Scalar::Integer(_)), _) => "an integer",
            Data::Value(Some(Scalar::FloatingPoint(_)), _) => "a decimal number",
            Data::Value(Some(Scalar::String(_)), _) => "a string",
            Data::Sequence(_) => "a list",
            Data::Mapping(_) => "a mapping",
            Data::Value(None, _) | Data::Other => "an unsupported YAML value",
        }
        .to_string()
    }
}

/// Parses one file's text. Diagnostics are returned even when a document is produced; a
/// YAML syntax error anywhere in the file is the only diagnostic.
pub(crate) fn parse_document(
    sources: &Sources,
    file: FileId,
) -> (Option<Document>, Vec<Diagnostic>) {
    let text: Arc<str> = sources.file(file).text.clone();
    let mut p = Parser {
        file,
        sources,
        diags: Vec::new(),
    };
    let mut reader = Reader::new(&text);
    match p.stream(&mut reader) {
        Ok(doc) => (doc, p.diags),
        Err(e) => {
            let span = sources.first_char(Span {
                file,
                offset: sources.file(file).byte_offset(e.at),
                len: 0,
            });
            (
                None,
                vec![Diagnostic::new(
                    Rule::YamlSyntax,
                    span,
                    format!("not valid YAML: {}", e.message),
                )],
            )
        }
    }
}
