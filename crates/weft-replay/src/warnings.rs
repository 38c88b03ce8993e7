//! What a replay warns about its input (to the caller's [`Diagnostics`]): policy fields that no packet of the
//! trace carries, and a capture's records out of order, its truncation, interfaces of link
//! types weft does not read and `--tenant` interfaces it does not have.
//!
//! Invariants: a note only for what lost nothing, a warning for the rest; a warning names at most [`WARNED_INTERFACES`] interfaces and counts the rest.

use super::source::{Source, TraceSource};
use super::trace::Col;
use super::{Diagnostics, Options};
use crate::capture::{self, Capture};
use weft_core::classifier::{Field, FieldMask, FIELDS};
use weft_core::policy::Program;

/// The fields `prog` matches on that no packet of `source` carries, as a warning: a CSV
/// trace's packets carry the fields it has columns for; a capture's every header field, and
/// `tenant` and `vm` only with `--tenant` (`tenants`), never `cgroup` or `tag`. Such a match
/// takes no packet, and every packet may end up dropped as `unclassified` without a word.
pub(super) fn unmatched_fields(
    prog: &Program,
    trace: &TraceSource,
    tenants: bool,
) -> Option<String> {
    let (source, trace_name) = (&trace.source, trace.name());
    let carried: FieldMask = match source {
        Source::Csv { cols, .. } => cols
            .iter()
            .filter_map(|(_, c, _)| match c {
                Col::Field(f) => Some(f.bit()),
                _ => None,
            })
            .fold(0, |m, b| m | b),
        Source::Capture(_) => {
            let mut never = Field::Cgroup.bit() | Field::Tag.bit();
            if !tenants {
                never |= Field::Tenant.bit() | Field::Vm.bit();
            }
            !never
        }
    };
    // Per field: the nodes and shaping classes whose own match names it.
    let matches = prog
        .nodes
        .iter()
        .map(|n| (&n.name, &n.matches))
        .chain(prog.shapers.iter().map(|s| (&s.name, &s.matches)));
    let mut missing: Vec<(Field, Vec<&str>)> = Vec::new();
    for (name, m) in matches {
        for f in FIELDS {
            if m.fields() & f.bit() & !carried == 0 {
                continue;
            }
            match missing.iter_mut().find(|(g, _)| *g == f) {
                Some((_, names)) => names.push(name),
                None => missing.push((f, vec![name])),
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    missing.sort_by_key(|(f, _)| *f);
    let fields: Vec<String> = missing
        .iter()
        .map(|(f, names)| {
            let shown = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
            let more = match names.len() {
                n if n > 3 => format!(" and {} more", n - 3),
                _ => String::new(),
            };
            format!("{} ({shown}{more})", f.name())
        })
        .collect();
    let lacks = match source {
        Source::Csv { .. } => format!("which {trace_name} has no column for"),
        Source::Capture(_) => format!(
            "which the packets of {trace_name} do not carry (a captured frame has no cgroup or \
             tag; tenant and vm come from --tenant)"
        ),
    };
    Some(format!(
        "{} matches on {}, {lacks}: no packet can match there, and a packet that no other \
         node takes is dropped as unclassified",
        prog.name,
        fields.join(" and ")
    ))
}

/// What a capture's replay tells `diagnostics`: records out of order (a note when the
/// reorder window put them back in order), a file that ends inside a record, interfaces of
/// link types weft does not read, and `--tenant` interfaces the capture does not have.
pub(super) fn capture_warnings(
    capture: Option<&Capture>,
    trace_name: &str,
    opts: &Options,
    diagnostics: &mut dyn Diagnostics,
) {
    let interfaces = capture.map(|c| c.interfaces());
    if let Some(c) = capture {
        let window = match opts.reorder_window {
            1 => "1 record".to_string(),
            w => format!("{w} records"),
        };
        match (c.out_of_order(), c.reordered()) {
            (0, _) => {}
            // Nothing lost: a note.
            (n, 0) => diagnostics.note(&format!(
                "{n} records of {trace_name} were earlier than one before them in the \
                 file (as in a capture of several interfaces); the reorder window ({window}) \
                 replayed them in time order (summary.json: capture_out_of_order)"
            )),
            (n, late) => diagnostics.warning(&format!(
                "{n} records of {trace_name} were earlier than one before them in the \
                 file, {late} of them more than the reorder window ({window}) away: \
                 each of those was replayed at the latest time seen so far \
                 (summary.json: capture_reordered; a larger --reorder-window sorts them)"
            )),
        }
        if let Some(r) = c.truncated_at() {
            diagnostics.warning(&format!(
                "{trace_name}: record {r}: the file ends inside this record (a \
                 capture still being written, or cut short); the {} records before it were \
                 replayed (summary.json: capture_truncated_at)",
                r - 1
            ));
        }
    }
    // At most `WARNED_INTERFACES` lines, then one for the rest.
    let skipped: Vec<&capture::InterfaceSeen> = interfaces
        .unwrap_or_default()
        .iter()
        .filter(|i| i.skipped > 0)
        .collect();
    for i in skipped.iter().take(WARNED_INTERFACES) {
        diagnostics.warning(&format!(
            "{trace_name}: interface {}{} has link type {}, which weft does not read \
             ({}): its {} records were skipped (summary.json: capture_interfaces)",
            i.index,
            i.name
                .as_ref()
                .map_or(String::new(), |n| format!(" (`{n}`)")),
            i.linktype,
            capture::LINK_TYPES,
            i.skipped
        ));
    }
    if let Some(rest) = skipped.get(WARNED_INTERFACES..).filter(|r| !r.is_empty()) {
        diagnostics.warning(&format!(
            "{trace_name}: {} more interfaces have link types weft does not read \
             ({}): their {} records were skipped (summary.json: capture_interfaces, \
             capture_interfaces_unlisted)",
            rest.len(),
            capture::LINK_TYPES,
            rest.iter().map(|i| i.skipped).sum::<u64>()
        ));
    }
    for (k, (name, iface)) in opts.tenants.iter().enumerate() {
        let tenant = Some(k as u32 + 1);
        if !interfaces.is_some_and(|is| is.iter().any(|i| i.tenant == tenant)) {
            let all = interfaces.unwrap_or_default();
            let mut names: Vec<String> = all
                .iter()
                .take(WARNED_INTERFACES)
                .map(|i| i.name.clone().unwrap_or_else(|| i.index.to_string()))
                .collect();
            if all.len() > WARNED_INTERFACES {
                names.push(format!("and {} more", all.len() - WARNED_INTERFACES));
            }
            diagnostics.warning(&format!(
                "--tenant {name}={iface}: {trace_name} has no interface {iface} \
                 (its interfaces: {}); no packet has tenant {k_1}",
                names.join(", "),
                k_1 = k + 1
            ));
        }
    }
}

/// The most interfaces a warning on stderr names (one line each for interfaces skipped, or
/// names in a list), interfaces; the rest are counted.
pub(super) const WARNED_INTERFACES: usize = 8;
