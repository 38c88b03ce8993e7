//! The `--out` directory of a replay: made ready before anything is written, and cleaned up
//! after a failure.
//!
//! Invariants: an output never replaces one of the replay's inputs (the policy's files, the
//! trace; checked by path and by inode before anything is touched); a replay that fails once
//! `--out` is ready leaves neither its outputs ([`super::OUTPUTS`], `summary.json`) nor the
//! directories it created for `--out` behind, so a partial `departures.csv` never looks
//! complete.

use super::source::is_stdin;
use super::{Error, OUTPUTS};
use std::path::{Path, PathBuf};

/// "cannot write FILE: ERROR", an output error.
pub(super) fn cannot_write(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output(format!("cannot write {}: {e}", path.display()))
}

/// Removes the replay's outputs from `out` (those there are).
fn remove_outputs(out: &Path) -> Result<(), String> {
    for name in OUTPUTS {
        let path = out.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot remove {}: {e}", path.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A replay into `out` (made ready by [`replay`](super::replay)) failed with `e`: its outputs are
/// removed, so none is taken for a whole run's (a trace that fails at its millionth row left a
/// million departures and a `drops.csv` that read as complete), and `e` says so. So are the
/// directories it created for `out` (`created`, deepest first;
/// [`ReplaySummary::created`](super::ReplaySummary::created)), when nothing else was put in them
/// meanwhile: a failed replay into a new directory left it behind, empty, although the note said
/// nothing was kept. A directory that was there before stays, whatever it holds.
pub fn discard(out: &Path, created: &[PathBuf], e: Error) -> Error {
    let note = match remove_outputs(out) {
        Ok(()) => {
            remove_created(created);
            if out.exists() {
                format!(
                    "note: nothing was kept in {}: a replay that fails removes what it wrote",
                    out.display()
                )
            } else {
                format!(
                    "note: nothing was kept: a replay that fails removes what it wrote, and \
                     {} was removed (the replay had created it)",
                    out.display()
                )
            }
        }
        Err(r) => format!("note: {r}: its outputs may be partial"),
    };
    e.map(|m| format!("{m}\n{note}"))
}

/// Removes the directories in `created` (deepest first) that are empty, stopping at the
/// first that is not (it holds something else, so its parents do too).
fn remove_created(created: &[PathBuf]) {
    for dir in created {
        if std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

/// Makes `--out` ready: created if need be; refused if it is a file, or if an output would
/// replace an input (the trace, the policy); the outputs of an earlier replay removed, so a
/// replay that fails leaves no mixture of two runs (and no `summary.json`). Returns the
/// directories it created, deepest first (see [`discard`]).
pub(super) fn prepare_out(
    out: &Path,
    trace: &Path,
    inputs: &[PathBuf],
) -> Result<Vec<PathBuf>, Error> {
    if out.exists() && !out.is_dir() {
        return Err(Error::Input(format!(
            "--out {}: a file, not a directory",
            out.display()
        )));
    }
    // `out` and its parents that are not there yet, deepest first.
    let created: Vec<PathBuf> = out
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err())
        .map(Path::to_path_buf)
        .collect();
    if let Err(e) = std::fs::create_dir_all(out) {
        remove_created(&created);
        return Err(Error::Output(format!(
            "cannot create {}: {e}",
            out.display()
        )));
    }
    check_out(out, trace, inputs)
        .inspect_err(|_| remove_created(&created))
        .map(|()| created)
}

/// The rest of [`prepare_out`], once `out` is a directory.
fn check_out(out: &Path, trace: &Path, inputs: &[PathBuf]) -> Result<(), Error> {
    let same = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    };
    for name in OUTPUTS {
        let path = out.join(name);
        if let Some(input) = std::iter::once(trace)
            .filter(|t| !is_stdin(t))
            .chain(inputs.iter().map(PathBuf::as_path))
            .find(|i| same(&path, i))
        {
            return Err(Error::Input(format!(
                "--out {}: the replay would overwrite its own input {} with its {name}; \
                 choose another directory",
                out.display(),
                input.display()
            )));
        }
    }
    remove_outputs(out).map_err(Error::Output)
}
