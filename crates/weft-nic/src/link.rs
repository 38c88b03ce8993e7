//! An interface's link state: weft-sys's ([`weft_sys::link`]), re-exported so
//! `weft_nic::link::LinkState` names it as before. The loop checks the uplink's every
//! [`crate::dataplane::LINK_CHECK_PS`]; a check allocates nothing.

pub use weft_sys::link::*;
