//! Rendering policy diagnostics on stderr: annotated source via miette (with the rule as the
//! error code, the node, secondary labels and a hint), or one plain line per problem; or as
//! JSON values for `weft policy check --json`. Errors ([`PolicyError`]) and the warnings of a
//! policy that compiled ([`Warnings`]) render alike, each with its severity.

use std::fmt;
use std::io::IsTerminal;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};
use weft_core::policy::Sources;
use weft_core::policy::{Diagnostic, PolicyError, Program, Severity, Warnings};

#[derive(Debug)]
struct Rendered {
    message: String,
    code: String,
    src: NamedSource<String>,
    labels: Vec<LabeledSpan>,
    help: Option<String>,
    severity: Severity,
}

impl fmt::Display for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Rendered {}

impl miette::Diagnostic for Rendered {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
}

fn convert(sources: &Sources, d: &Diagnostic) -> Rendered {
    let file = sources.file(d.span.file);
    let (path, line, col) = sources.location(d.span);
    let mut labels = vec![LabeledSpan::new_primary_with_span(
        Some(d.rule.name().to_string()),
        SourceSpan::new(d.span.offset.into(), d.span.len),
    )];
    let mut elsewhere = Vec::new();
    for l in &d.labels {
        if l.span.file == d.span.file {
            labels.push(LabeledSpan::new_with_span(
                Some(l.text.clone()),
                SourceSpan::new(l.span.offset.into(), l.span.len),
            ));
        } else {
            let (p, ln, c) = sources.location(l.span);
            elsewhere.push(format!("{}: {p}:{ln}:{c}", l.text));
        }
    }
    let mut help = d.help.clone();
    if !elsewhere.is_empty() {
        let extra = elsewhere.join("; ");
        help = Some(match help {
            Some(h) => format!("{h} ({extra})"),
            None => extra,
        });
    }
    let node = d
        .node
        .as_ref()
        .map(|n| format!(" (node `{n}`)"))
        .unwrap_or_default();
    Rendered {
        message: format!("{path}:{line}:{col}: {}{node}", d.message),
        code: format!("weft::policy::{}", d.rule.name()),
        src: NamedSource::new(path, file.text.to_string()),
        labels,
        help,
        severity: d.severity(),
    }
}

/// Every diagnostic of `err` as JSON: rule, message, node, where (file, line, column; 1-based),
/// the secondary labels with where they point, and the hint.
pub fn to_json(err: &PolicyError) -> Vec<serde_json::Value> {
    json_of(&err.diagnostics, &err.sources)
}

/// The warnings of a policy that compiled as JSON, as [`to_json`] gives errors.
pub fn warnings_json(p: &Program) -> Vec<serde_json::Value> {
    p.warnings
        .as_ref()
        .map_or_else(Vec::new, |w| json_of(&w.diagnostics, &w.sources))
}

fn json_of(diagnostics: &[Diagnostic], sources: &Sources) -> Vec<serde_json::Value> {
    let at = |span| {
        let (file, line, column) = sources.location(span);
        serde_json::json!({"file": file, "line": line, "column": column})
    };
    diagnostics
        .iter()
        .map(|d| {
            serde_json::json!({
                "rule": d.rule.name(),
                "message": d.message,
                "node": d.node,
                "at": at(d.span),
                "labels": d
                    .labels
                    .iter()
                    .map(|l| serde_json::json!({"text": l.text, "at": at(l.span)}))
                    .collect::<Vec<_>>(),
                "help": d.help,
            })
        })
        .collect()
}

/// Diagnostics printed at most; the rest are counted (`--json` lists them all).
const MAX_PRINTED: usize = 100;

/// Bytes of one printed diagnostic at most (a diagnostic that would quote megabytes of a
/// bad input is cut, saying how much was left out).
const MAX_DIAGNOSTIC_BYTES: usize = 4096;

/// A source line longer than this is not shown annotated (the diagnostic is printed in the
/// plain form, file, line and column).
const MAX_ANNOTATED_LINE: usize = 512;

/// `s` cut to [`MAX_DIAGNOSTIC_BYTES`] at a character boundary.
fn bounded(s: String) -> String {
    if s.len() <= MAX_DIAGNOSTIC_BYTES {
        return s;
    }
    let mut end = MAX_DIAGNOSTIC_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes left out)", &s[..end], s.len() - end)
}

/// Prints every diagnostic of `err` to stderr (at most [`MAX_PRINTED`], each bounded).
pub fn report(err: &PolicyError, plain: bool) {
    if plain {
        print_bounded(&err.diagnostics, |d| err.render_one(d));
        return;
    }
    render(&err.diagnostics, &err.sources, |d| err.render_one(d));
}

/// Prints `diagnostics` one by one with `one`, bounded in number and size.
fn print_bounded(diagnostics: &[Diagnostic], one: impl Fn(&Diagnostic) -> String) {
    for d in diagnostics.iter().take(MAX_PRINTED) {
        crate::out::errln!("{}", bounded(one(d)));
    }
    if diagnostics.len() > MAX_PRINTED {
        crate::out::errln!(
            "... and {} more diagnostics (`--json` lists them all)",
            diagnostics.len() - MAX_PRINTED
        );
    }
}

/// Prints the warnings of a policy that compiled to stderr (nothing when it has none), as
/// [`report`] prints errors: `warning[small-burst]` with the file, line and column, and the
/// hint.
pub fn warn(p: &Program, plain: bool) {
    let Some(w) = &p.warnings else {
        return;
    };
    if plain {
        print_bounded(&w.diagnostics, |d| Warnings::render_one(w, d));
        return;
    }
    render(&w.diagnostics, &w.sources, |d| Warnings::render_one(w, d));
}

/// Annotated source of each diagnostic (`plain` renders one that miette cannot).
fn render(diagnostics: &[Diagnostic], sources: &Sources, plain: impl Fn(&Diagnostic) -> String) {
    let theme = if std::io::stderr().is_terminal() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme);
    print_bounded(diagnostics, |d| {
        let text = &sources.file(d.span.file).text;
        let line_start = text[..d.span.offset.min(text.len())]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let line_len = text[line_start..]
            .find('\n')
            .unwrap_or(text.len() - line_start);
        if line_len > MAX_ANNOTATED_LINE || d.span.len > MAX_ANNOTATED_LINE {
            return plain(d);
        }
        let r = convert(sources, d);
        let mut s = String::new();
        if handler.render_report(&mut s, &r).is_err() {
            s = plain(d);
        }
        s
    });
}
