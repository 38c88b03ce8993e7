//! `weft run` (the software NIC on real Linux interfaces), `weft ctl` (live stats and
//! reload over its Unix socket) and `weft testbed` (namespaces, veth, real applications,
//! Linux HTB side by side). The work is done by the `weft-nic` crate; this module parses
//! arguments, prints, and maps failures to exit codes (2: usage or input, 1: the system).
//!
//! The files: `args.rs` (the three commands' grammar), `daemon.rs` (`weft run`: its flags
//! checked and turned into the dataplane's configuration), `ctl.rs` (`weft ctl`: requests
//! and the stats table) and `testbed.rs` (`weft testbed`: its experiments, benchmark and
//! report chart). Nothing here is on a packet's path: the cost is the command's own.

mod args;
mod ctl;
mod daemon;
mod testbed;

pub(crate) use args::NicCommand;

/// A failure: its exit code and message.
type Fail = (u8, String);

/// A usage or input error (exit 2).
fn usage(m: impl Into<String>) -> Fail {
    (2, m.into())
}

pub(crate) fn main(c: NicCommand) -> Result<(), Fail> {
    match c {
        NicCommand::Run(a) => daemon::run(*a),
        NicCommand::Ctl(c) => ctl::ctl_cmd(c),
        NicCommand::Testbed(t) => testbed::testbed_cmd(t),
    }
}
