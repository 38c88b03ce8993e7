//! Standard error, where a replay's warnings and notes go: a failure to write there
//! (`2>/dev/full`, a closed pipe) is ignored, as `eprintln!` would panic; with nowhere to
//! say anything, the caller's exit status still says how the replay went. Cost: one write
//! per line.

use std::io::Write;

/// Writes `text` to stderr; a failure to write is ignored (see the module doc).
pub fn err(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `eprintln!` that does not panic when stderr cannot be written: `errln!("warning: {x}")`.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::err(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use errln;
