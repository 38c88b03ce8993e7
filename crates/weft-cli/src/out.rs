//! Standard output, where every command's data goes (tables, JSON, policies).
//!
//! A reader that stops early closes the pipe (`weft replay … | head -3`): weft then stops
//! quietly with status 141, what a shell reports for a program that SIGPIPE ended (Rust
//! ignores that signal, so `println!` would panic instead), having written its files
//! first. Any other failure to write (a full disk, `> /dev/full`) is an error, exit 1:
//! output is never lost without a word.
//!
//! Standard error, where diagnostics and progress go ([`errln!`]): a failure to write there
//! (`2>/dev/full`, a closed pipe) is ignored, as `eprintln!` would panic (exit 101): with
//! nowhere to say anything, the exit status still says how the command went.

use std::io::Write;

/// The exit status after a closed pipe: 128 + SIGPIPE.
pub const CLOSED_PIPE: u8 = 141;

/// What a failed write to stdout means for the exit: `(status, message)`, the message
/// empty for a closed pipe (nothing to say; the reader has gone).
pub fn failed(e: std::io::Error) -> (u8, String) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        (CLOSED_PIPE, String::new())
    } else {
        (1, format!("cannot write to standard output: {e}"))
    }
}

/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) -> Result<(), (u8, String)> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .map_err(failed)
}

/// `println!` that returns [`failed`]'s error instead of panicking: `outln!("{x}")?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::print(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

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

// Numbers for tables, the terminal's and the reports' pages alike.
pub use weft_sim::report::{count, number};

#[cfg(test)]
mod tests {
    use super::{count, number};

    /// Tables printed `3.86831e-16` and `1223416.0`: numbers for people now.
    #[test]
    fn table_numbers_read_as_people_write_them() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_223_416), "1,223,416");
        assert_eq!(count(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(number(3.86831e-16, 4), "0");
        assert_eq!(number(-1e-9, 3), "0");
        assert_eq!(number(0.0, 1), "0");
        assert_eq!(number(1_223_416.0, 0), "1,223,416");
        assert_eq!(number(112_700.04, 1), "112,700.0");
        assert_eq!(number(0.8214, 4), "0.8214");
        assert_eq!(number(-1234.5, 1), "-1,234.5");
        assert_eq!(number(999.96, 1), "1,000.0");
        assert_eq!(number(f64::NAN, 1), "-");
    }
}
