//! A capture's interfaces: each one described (its framing, clock and tenant) as the
//! reader goes, as the summary lists it ([`InterfaceSeen`]), and the bounded list a
//! summary shows ([`listed`]).
//!
//! Invariants: a tenant is matched on an interface's whole name, then on its number
//! ([`tenant_of`]); a kept name is at most [`MAX_INTERFACE_NAME_BYTES`] (cut at a
//! character); a summary lists at most [`LISTED_INTERFACES`] interfaces and adds up the
//! rest. Cost: about 300 bytes an interface; [`listed`] sorts only past the bound.

use super::frames::Framing;
use super::{LISTED_INTERFACES, MAX_INTERFACE_NAME_BYTES};

/// An interface name as kept: at most [`MAX_INTERFACE_NAME_BYTES`] of it (cut at a
/// character), then `…` if it was longer.
pub(super) fn kept_name(name: &str) -> String {
    if name.len() <= MAX_INTERFACE_NAME_BYTES {
        return name.to_string();
    }
    let mut end = MAX_INTERFACE_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

/// What a summary leaves out of a capture's interfaces ([`listed`]): how many, and their
/// records and skipped records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unlisted {
    pub interfaces: u64,
    pub records: u64,
    pub skipped: u64,
}

/// The interfaces a summary lists, in the capture's order: all of them up to
/// [`LISTED_INTERFACES`], else that many chosen: those with a tenant first, then those with
/// the most records (ties: the first in the capture). And what the rest add up to.
pub fn listed(all: &[InterfaceSeen]) -> (Vec<&InterfaceSeen>, Unlisted) {
    let mut chosen: Vec<(usize, &InterfaceSeen)> = all.iter().enumerate().collect();
    if chosen.len() > LISTED_INTERFACES {
        chosen.sort_by_key(|&(k, i)| (i.tenant.is_none(), std::cmp::Reverse(i.records), k));
        chosen.truncate(LISTED_INTERFACES);
        chosen.sort_by_key(|&(k, _)| k);
    }
    let total = |f: fn(&InterfaceSeen) -> u64| -> u64 {
        all.iter().map(f).sum::<u64>() - chosen.iter().map(|(_, i)| f(i)).sum::<u64>()
    };
    let unlisted = Unlisted {
        interfaces: (all.len() - chosen.len()) as u64,
        records: total(|i| i.records),
        skipped: total(|i| i.skipped),
    };
    (chosen.into_iter().map(|(_, i)| i).collect(), unlisted)
}

/// A pcapng interface: its framing, timestamp units per second and offset (seconds).
#[derive(Debug, Clone, Copy)]
pub(super) struct Interface {
    pub(super) framing: Option<Framing>,
    pub(super) linktype: i32,
    pub(super) per_second: u64,
    pub(super) offset_s: i64,
    /// Its tenant id (`--tenant`, 1-based), if listed.
    pub(super) tenant: Option<u32>,
    /// Its entry in [`State::seen`](super::blocks::State::seen).
    pub(super) seen: usize,
}

/// An interface of the capture, as the summary lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceSeen {
    /// pcapng section, from 0 (a legacy pcap has one).
    pub section: u32,
    /// Its number in its section (a legacy pcap's is 0).
    pub index: u32,
    /// `if_name`, if the capture gives one (cut to [`MAX_INTERFACE_NAME_BYTES`]).
    pub name: Option<String>,
    pub linktype: i32,
    /// Packet records captured on it.
    pub records: u64,
    /// Of them, records skipped: the interface's link type is one weft does not read (a
    /// pcapng interface beside others; a legacy pcap's only link type is an error instead).
    pub skipped: u64,
    /// Its tenant id (the position in the `--tenant` list, 1-based), if listed.
    pub tenant: Option<u32>,
}

/// Which tenant `--tenant NAME=IFACE` pairs give an interface: the first pair whose IFACE is
/// its name, else the first whose IFACE is its number.
pub(super) fn tenant_of(
    tenants: &[(String, String)],
    name: Option<&str>,
    index: u32,
) -> Option<u32> {
    let by = |want: &str| {
        tenants
            .iter()
            .position(|(_, iface)| iface == want)
            .map(|k| k as u32 + 1)
    };
    name.and_then(by).or_else(|| by(&index.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_by_interface_name_then_number() {
        let t = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let list = t(&[("a", "veth1"), ("b", "1"), ("c", "0")]);
        assert_eq!(tenant_of(&list, Some("veth1"), 5), Some(1));
        // Named `1` or numbered 1: tenant 2; a name not listed falls back to the number.
        assert_eq!(tenant_of(&list, Some("1"), 0), Some(2));
        assert_eq!(tenant_of(&list, Some("eth0"), 1), Some(2));
        assert_eq!(tenant_of(&list, None, 0), Some(3));
        assert_eq!(tenant_of(&list, Some("eth0"), 7), None);
        assert_eq!(tenant_of(&[], None, 0), None);
    }

    /// The summary's interfaces: every one up to 64; past that, those with a tenant, then
    /// the busiest, in the capture's order, and the rest added up.
    #[test]
    fn listed_interfaces_are_bounded_and_the_rest_counted() {
        let iface = |k: u32, records: u64, tenant: Option<u32>| InterfaceSeen {
            section: 0,
            index: k,
            name: None,
            linktype: 1,
            records,
            skipped: records / 2,
            tenant,
        };
        let few: Vec<InterfaceSeen> = (0..10).map(|k| iface(k, 0, None)).collect();
        let (shown, rest) = listed(&few);
        assert_eq!(shown.len(), 10);
        assert_eq!(rest, Unlisted::default());
        // 1,000 interfaces, k with k records; interface 3 has a tenant.
        let many: Vec<InterfaceSeen> = (0..1000)
            .map(|k| iface(k, k as u64, (k == 3).then_some(1)))
            .collect();
        let (shown, rest) = listed(&many);
        let ids: Vec<u32> = shown.iter().map(|i| i.index).collect();
        let mut expected = vec![3];
        expected.extend(937..1000);
        assert_eq!(ids, expected);
        assert_eq!(rest.interfaces, 1000 - 64);
        let total: u64 = (0..1000).sum();
        let records: u64 = expected.iter().map(|&k| k as u64).sum();
        assert_eq!(rest.records, total - records);
        let skipped: u64 = many.iter().map(|i| i.skipped).sum::<u64>()
            - shown.iter().map(|i| i.skipped).sum::<u64>();
        assert_eq!(rest.skipped, skipped);
    }
}
