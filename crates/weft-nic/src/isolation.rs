//! What keeps one tenant of the software NIC from touching another's traffic or resources
//! (sans-IO: the dataplane calls it with frames' addresses and the time).
//!
//! * [`MacTable`]: which tenant port owns which source MAC address. A port's addresses are
//!   configured (`--tenant NAME=IFACE,mac=MAC`: only those) or learned from its frames and
//!   pinned: an address owned by one tenant is never taken by another, however many frames
//!   claim it, so a frame from port B with port A's source address is dropped and counted,
//!   and the return path keeps delivering A's traffic to A (and reported once per address
//!   and port: [`MacTable::first_spoof`]). Learned addresses are bounded per
//!   tenant ([`MacTable::new`]'s `per_tenant`); when a tenant has learned its bound, an
//!   address of its own idle for longer than the age makes room for its new one, else the
//!   new address is refused and counted. The return path looks destinations up here:
//!   unicast to an address nobody owns is dropped (never flooded to tenants); broadcast and
//!   multicast go to every tenant (ARP, neighbour discovery).
//! * [`Budget`]: a pool shared by tenants (flow queues, frame buffers, return-path buffers)
//!   with a reservation per tenant, as Loom §4.4 and PicNIC budget NIC resources per VM: a
//!   tenant may take a unit while it holds less than its reservation, or while the free
//!   units exceed what the other tenants' unmet reservations need. So a tenant that floods
//!   (random five-tuples, a burst of frames) takes at most what the others leave unreserved,
//!   and an idle tenant's share still serves the busy ones up to the others' reservations.
//!
//! Invariants: an address has one owner for as long as it is in the table; a tenant holds
//! at most `per_tenant` learned addresses; a budget's units taken never exceed its total
//! and each tenant's reservation is available to it whatever the others did (property tests
//! below). Cost: a hash lookup per frame and direction (FxHash: the keys are six bytes, and
//! a tenant flooding addresses is bounded by the table, not by the hash); O(1) a budget's
//! take or give;
//! making room for a new address scans that tenant's addresses (at most `per_tenant`).
//! Hand-written: a learning bridge's table with per-port ownership is a few lines over a
//! `HashMap`.

use rustc_hash::FxHashMap as HashMap;

/// A MAC address.
pub type Mac = [u8; 6];

/// Why a frame's source address was refused at its ingress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceReject {
    /// Another tenant owns it (`owner`: that tenant's index).
    Spoofed { owner: usize },
    /// A group (multicast or broadcast) address as a source.
    Group,
    /// The port has configured addresses and this is not one of them.
    NotConfigured,
    /// The port has learned as many addresses as it may, none of them idle long enough to
    /// make room.
    Full,
}

impl SourceReject {
    /// The counter's name in `ctl stats`.
    pub fn name(self) -> &'static str {
        match self {
            SourceReject::Spoofed { .. } => "spoofed_source",
            SourceReject::Group => "group_source",
            SourceReject::NotConfigured => "unconfigured_source",
            SourceReject::Full => "mac_table_full",
        }
    }

    /// Every reason's counter name, in [`Self::index`] order.
    pub const NAMES: [&'static str; 4] = [
        "spoofed_source",
        "group_source",
        "unconfigured_source",
        "mac_table_full",
    ];

    /// Position in [`Self::NAMES`].
    pub fn index(self) -> usize {
        match self {
            SourceReject::Spoofed { .. } => 0,
            SourceReject::Group => 1,
            SourceReject::NotConfigured => 2,
            SourceReject::Full => 3,
        }
    }
}

/// Where a frame on the return path goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// The tenant that owns the destination address.
    Tenant(usize),
    /// Broadcast or multicast: every tenant.
    Group,
    /// Unicast to an address no tenant owns: dropped.
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct Owner {
    tenant: usize,
    /// Last frame from it, ps (configured addresses never age).
    last_ps: u64,
    configured: bool,
}

/// Source addresses per tenant port (see the module doc).
#[derive(Debug, Clone)]
pub struct MacTable {
    owners: HashMap<Mac, Owner>,
    /// Per tenant: its learned addresses (at most `per_tenant`).
    learned: Vec<Vec<Mac>>,
    /// Per tenant: whether its addresses are configured (then it learns none).
    configured: Vec<bool>,
    per_tenant: usize,
    age_ps: u64,
    /// Per address another port was refused for using: those ports, each reported once
    /// ([`MacTable::first_spoof`]); gone with the address's owner.
    spoofers: HashMap<Mac, Vec<usize>>,
}

/// Whether `m` is a group (multicast or broadcast) address.
pub fn is_group(m: &Mac) -> bool {
    m[0] & 1 != 0
}

impl MacTable {
    /// A table for `configured.len()` tenants: tenant `t` may use only `configured[t]` if
    /// that is not empty, else learns at most `per_tenant` addresses, one idle for
    /// `age_ps` making room for a new one. Errors name an address configured twice or a
    /// group address.
    pub fn new(
        configured: &[Vec<Mac>],
        per_tenant: usize,
        age_ps: u64,
    ) -> Result<MacTable, String> {
        let mut owners = HashMap::default();
        for (t, macs) in configured.iter().enumerate() {
            for m in macs {
                if is_group(m) {
                    return Err(format!(
                        "tenant {}: {} is a group address, not a port's",
                        t + 1,
                        fmt_mac(m)
                    ));
                }
                let o = Owner {
                    tenant: t,
                    last_ps: 0,
                    configured: true,
                };
                if let Some(prev) = owners.insert(*m, o) {
                    return Err(format!(
                        "{} is configured for tenants {} and {}",
                        fmt_mac(m),
                        prev.tenant + 1,
                        t + 1
                    ));
                }
            }
        }
        Ok(MacTable {
            owners,
            learned: vec![Vec::new(); configured.len()],
            configured: configured.iter().map(|m| !m.is_empty()).collect(),
            per_tenant: per_tenant.max(1),
            age_ps,
            spoofers: HashMap::default(),
        })
    }

    /// A frame from tenant `t`'s port with source `src` at `now`: `Ok` if `t` may use the
    /// address (learning it if new and there is room), else why not.
    pub fn check_source(&mut self, t: usize, src: Mac, now: u64) -> Result<(), SourceReject> {
        if is_group(&src) {
            return Err(SourceReject::Group);
        }
        if let Some(o) = self.owners.get_mut(&src) {
            if o.tenant != t {
                return Err(SourceReject::Spoofed { owner: o.tenant });
            }
            o.last_ps = now;
            return Ok(());
        }
        if self.configured[t] {
            return Err(SourceReject::NotConfigured);
        }
        if self.learned[t].len() >= self.per_tenant {
            // Room from this tenant's own addresses only: the one idle longest, if idle
            // past the age.
            let (i, idle) = self.learned[t]
                .iter()
                .enumerate()
                .map(|(i, m)| (i, now.saturating_sub(self.owners[m].last_ps)))
                .max_by_key(|&(_, idle)| idle)
                .expect("a full tenant has addresses");
            if idle < self.age_ps {
                return Err(SourceReject::Full);
            }
            let old = self.learned[t].swap_remove(i);
            self.owners.remove(&old);
            self.spoofers.remove(&old);
        }
        self.learned[t].push(src);
        self.owners.insert(
            src,
            Owner {
                tenant: t,
                last_ps: now,
                configured: false,
            },
        );
        Ok(())
    }

    /// Whether port `t`, just refused for using `src` (another tenant's address:
    /// [`SourceReject::Spoofed`]), is refused it for the first time since that tenant came to
    /// own it: a spoofed address is worth one log line per address and port, not one per
    /// frame or per second. False for an address `t` may use. Memory: at most the ports per
    /// address owned, released with the address.
    pub fn first_spoof(&mut self, t: usize, src: &Mac) -> bool {
        if self.owners.get(src).is_none_or(|o| o.tenant == t) {
            return false;
        }
        let ports = self.spoofers.entry(*src).or_default();
        if ports.contains(&t) {
            return false;
        }
        ports.push(t);
        true
    }

    /// Where a frame to `dst` goes on the return path.
    pub fn destination(&self, dst: &Mac) -> Destination {
        if is_group(dst) {
            return Destination::Group;
        }
        match self.owners.get(dst) {
            Some(o) => Destination::Tenant(o.tenant),
            None => Destination::Unknown,
        }
    }

    /// Addresses tenant `t` owns (configured and learned).
    pub fn owned(&self, t: usize) -> usize {
        self.owners.values().filter(|o| o.tenant == t).count()
    }

    /// Whether `m`'s owner was configured.
    pub fn is_configured(&self, m: &Mac) -> bool {
        self.owners.get(m).is_some_and(|o| o.configured)
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: &Mac) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff` (or with `-`).
pub fn parse_mac(s: &str) -> Option<Mac> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}

/// An IP prefix a port may send from (`--tenant NAME=IFACE,ip=PREFIX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: std::net::IpAddr,
    pub len: u8,
}

impl Prefix {
    /// `10.0.0.0/24`, `fd00::1` (a whole address without `/LEN`).
    pub fn parse(s: &str) -> Option<Prefix> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: std::net::IpAddr = a.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            Some(l) => l.parse::<u8>().ok().filter(|&l| l <= max)?,
            None => max,
        };
        Some(Prefix { addr, len })
    }

    /// Whether `ip` lies in it.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr::{V4, V6};
        let (a, b, bits): (u128, u128, u32) = match (self.addr, ip) {
            (V4(a), V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
            (V6(a), V6(b)) => (u128::from(a), u128::from(b), 128),
            _ => return false,
        };
        let shift = bits - self.len as u32;
        shift >= 128 || (a >> shift) == (b >> shift)
    }
}

/// A frame's source IP address: IPv4's or IPv6's source, or an ARP packet's sender
/// protocol address (ARP spoofing claims another tenant's address just the same); after any
/// number of VLAN tags (a tag it skipped would let a tenant send from any address). `None`
/// for other frames and for frames too short to say. (The dataplane takes an IP frame's
/// source from its parse; this reads the frames the parse gives no address.)
pub fn source_ip(frame: &[u8]) -> Option<std::net::IpAddr> {
    let mut l3 = 14;
    let mut ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    while matches!(ty, 0x8100 | 0x88a8 | 0x9100) {
        ty = u16::from_be_bytes([*frame.get(l3 + 2)?, *frame.get(l3 + 3)?]);
        l3 += 4;
    }
    let b = |from: usize, n: usize| frame.get(l3 + from..l3 + from + n);
    match ty {
        0x0800 => {
            let a: [u8; 4] = b(12, 4)?.try_into().ok()?;
            Some(std::net::IpAddr::from(a))
        }
        0x86dd => {
            let a: [u8; 16] = b(8, 16)?.try_into().ok()?;
            Some(std::net::IpAddr::from(a))
        }
        0x0806 => {
            let a: [u8; 4] = b(14, 4)?.try_into().ok()?;
            Some(std::net::IpAddr::from(a))
        }
        _ => None,
    }
}

/// A pool of `total` units shared by tenants, each with a reservation (see the module doc).
#[derive(Debug, Clone)]
pub struct Budget {
    total: u32,
    reserve: u32,
    used: Vec<u32>,
    /// Units taken by all tenants.
    taken: u32,
    /// Σ over tenants of `reserve - used` where positive.
    unmet: u32,
}

impl Budget {
    /// `total` units for `tenants` tenants, `reserve` of them held for each (clamped so the
    /// reservations fit in the total).
    pub fn new(total: u32, tenants: usize, reserve: u32) -> Budget {
        let n = tenants.max(1) as u32;
        let reserve = reserve.min(total / n);
        Budget {
            total,
            reserve,
            used: vec![0; tenants.max(1)],
            taken: 0,
            unmet: reserve * n,
        }
    }

    /// The default reservation: half the pool, split evenly.
    pub fn default_reserve(total: u32, tenants: usize) -> u32 {
        total / 2 / tenants.max(1) as u32
    }

    /// Each tenant's reservation.
    pub fn reserve(&self) -> u32 {
        self.reserve
    }

    /// Units tenant `t` holds.
    pub fn used(&self, t: usize) -> u32 {
        self.used[t]
    }

    /// Takes a unit for tenant `t` if its reservation or the unreserved rest allows.
    pub fn try_take(&mut self, t: usize) -> bool {
        let own_unmet = self.reserve.saturating_sub(self.used[t]);
        let others_unmet = self.unmet - own_unmet;
        let free = self.total - self.taken;
        if own_unmet == 0 && free <= others_unmet {
            return false;
        }
        if free == 0 {
            return false;
        }
        self.used[t] += 1;
        self.taken += 1;
        if own_unmet > 0 {
            self.unmet -= 1;
        }
        true
    }

    /// Gives back a unit of tenant `t`.
    pub fn give(&mut self, t: usize) {
        debug_assert!(
            self.used[t] > 0,
            "budget: tenant {t} gives back a unit it does not hold"
        );
        self.used[t] -= 1;
        self.taken -= 1;
        if self.used[t] < self.reserve {
            self.unmet += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: Mac = [2, 0, 0, 0, 0, 1];
    const B: Mac = [2, 0, 0, 0, 0, 2];

    #[test]
    fn an_address_is_never_taken_by_another_tenant() {
        let mut t = MacTable::new(&[vec![], vec![]], 4, 1_000).unwrap();
        assert_eq!(t.check_source(0, A, 0), Ok(()));
        // However long A is idle, tenant 1 cannot have it.
        assert_eq!(
            t.check_source(1, A, 1 << 50),
            Err(SourceReject::Spoofed { owner: 0 })
        );
        assert_eq!(t.destination(&A), Destination::Tenant(0));
        assert_eq!(t.destination(&B), Destination::Unknown);
        assert_eq!(t.destination(&[0xff; 6]), Destination::Group);
        assert_eq!(t.check_source(1, [0xff; 6], 0), Err(SourceReject::Group));
    }

    #[test]
    fn a_tenant_learns_at_most_its_bound_and_only_its_own_idle_addresses_make_room() {
        let mut t = MacTable::new(&[vec![], vec![]], 2, 1_000).unwrap();
        let m = |i: u8| [2, 0, 0, 0, 1, i];
        assert_eq!(t.check_source(0, m(1), 0), Ok(()));
        assert_eq!(t.check_source(0, m(2), 500), Ok(()));
        assert_eq!(t.check_source(0, m(3), 900), Err(SourceReject::Full));
        // m(1) idle 1,000 ps: it goes, m(3) comes.
        assert_eq!(t.check_source(0, m(3), 1_000), Ok(()));
        assert_eq!(t.destination(&m(1)), Destination::Unknown);
        assert_eq!(t.owned(0), 2);
        // Tenant 1's table is its own.
        assert_eq!(t.check_source(1, m(4), 1_000), Ok(()));
    }

    /// Another tenant's address is reported once per address and port however many frames
    /// carry it; another port, or another address, is a report of its own; an address that
    /// changes owner (aged out and learned by another tenant) is reported anew.
    #[test]
    fn a_spoofed_address_is_reported_once_per_address_and_port() {
        let mut t = MacTable::new(&[vec![], vec![], vec![]], 1, 1_000).unwrap();
        assert_eq!(t.check_source(0, A, 0), Ok(()));
        assert_eq!(t.check_source(1, B, 0), Ok(()));
        for i in 0..3 {
            assert_eq!(
                t.check_source(1, A, i),
                Err(SourceReject::Spoofed { owner: 0 })
            );
            assert_eq!(t.first_spoof(1, &A), i == 0, "frame {i}");
        }
        assert!(t.first_spoof(2, &A), "another port");
        assert!(!t.first_spoof(2, &A));
        assert!(t.first_spoof(0, &B), "another address");
        assert!(!t.first_spoof(0, &A), "the owner's own address");
        assert!(!t.first_spoof(1, &[2, 0, 0, 0, 0, 9]), "nobody's address");
        // A idle past the age gives way to tenant 0's new address; tenant 2 learns A.
        assert_eq!(t.check_source(0, [2, 0, 0, 0, 0, 7], 2_000), Ok(()));
        assert_eq!(t.check_source(2, A, 2_000), Ok(()));
        assert!(t.first_spoof(1, &A), "A has a new owner");
        assert!(!t.first_spoof(1, &A));
    }

    #[test]
    fn configured_addresses_are_the_only_ones_a_port_may_use() {
        let mut t = MacTable::new(&[vec![A], vec![]], 4, 1_000).unwrap();
        assert!(t.is_configured(&A));
        assert_eq!(t.check_source(0, A, 0), Ok(()));
        assert_eq!(t.check_source(0, B, 0), Err(SourceReject::NotConfigured));
        assert_eq!(
            t.check_source(1, A, 0),
            Err(SourceReject::Spoofed { owner: 0 })
        );
        assert!(MacTable::new(&[vec![A], vec![A]], 4, 0).is_err());
        assert!(MacTable::new(&[vec![[1, 0, 0, 0, 0, 0]]], 4, 0).is_err());
    }

    #[test]
    fn prefixes_parse_and_contain() {
        let p = Prefix::parse("10.1.2.0/24").unwrap();
        assert!(p.contains("10.1.2.200".parse().unwrap()));
        assert!(!p.contains("10.1.3.1".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
        let all = Prefix::parse("0.0.0.0/0").unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        let one = Prefix::parse("fd00::7").unwrap();
        assert_eq!(one.len, 128);
        assert!(one.contains("fd00::7".parse().unwrap()));
        assert!(!one.contains("fd00::8".parse().unwrap()));
        assert_eq!(Prefix::parse("10.0.0.0/33"), None);
        assert_eq!(Prefix::parse("nonsense"), None);
    }

    #[test]
    fn source_ips_of_ipv4_ipv6_arp_and_vlan_tags() {
        let v4 = {
            let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv4([10, 0, 0, 9], [10, 0, 0, 1], 64)
                .udp(1, 2);
            let mut v = Vec::new();
            b.write(&mut v, &[0; 4]).unwrap();
            v
        };
        assert_eq!(source_ip(&v4), Some("10.0.0.9".parse().unwrap()));
        let mut tagged = v4[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&v4[12..]);
        assert_eq!(source_ip(&tagged), Some("10.0.0.9".parse().unwrap()));
        let mut twice = v4[..12].to_vec();
        twice.extend_from_slice(&[0x88, 0xa8, 0x00, 0x05, 0x81, 0x00, 0x00, 0x07]);
        twice.extend_from_slice(&v4[12..]);
        assert_eq!(source_ip(&twice), Some("10.0.0.9".parse().unwrap()));
        let v6 = {
            let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv6([0xfd; 16], [0xfe; 16], 64)
                .udp(1, 2);
            let mut v = Vec::new();
            b.write(&mut v, &[0; 4]).unwrap();
            v
        };
        assert_eq!(source_ip(&v6), Some(std::net::IpAddr::from([0xfd; 16])));
        let mut arp = vec![0xff; 6];
        arp.extend_from_slice(&[2; 6]);
        arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
        arp.extend_from_slice(&[2; 6]);
        arp.extend_from_slice(&[10, 0, 0, 42]);
        arp.extend_from_slice(&[0; 10]);
        assert_eq!(source_ip(&arp), Some("10.0.0.42".parse().unwrap()));
        assert_eq!(source_ip(&arp[..20]), None);
        assert_eq!(source_ip(&[0u8; 10]), None);
    }

    #[test]
    fn macs_parse_and_print() {
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("02-00-00-00-00-0A"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:0g"), None);
        assert_eq!(fmt_mac(&[2, 0, 0, 0, 0, 10]), "02:00:00:00:00:0a");
    }

    proptest! {
        /// Whatever the tenants take and give: units taken never exceed the total, and a
        /// tenant below its reservation can always take one more.
        #[test]
        fn every_tenant_keeps_its_reservation(
            total in 1u32..200,
            tenants in 1usize..6,
            ops in prop::collection::vec((0usize..6, any::<bool>()), 0..600),
        ) {
            let mut b = Budget::new(total, tenants, Budget::default_reserve(total, tenants));
            let mut held = vec![0u32; tenants];
            for (t, take) in ops {
                let t = t % tenants;
                if take {
                    let below = held[t] < b.reserve();
                    let ok = b.try_take(t);
                    if below {
                        prop_assert!(ok, "tenant {} below its reservation {} refused", t, b.reserve());
                    }
                    if ok {
                        held[t] += 1;
                    }
                } else if held[t] > 0 {
                    b.give(t);
                    held[t] -= 1;
                }
                prop_assert!(held.iter().sum::<u32>() <= total);
                for (u, &h) in held.iter().enumerate() {
                    prop_assert_eq!(b.used(u), h);
                }
            }
        }

        /// A table of random frames from random tenants: a frame never changes the owner of
        /// an address the table holds (only its owner's own newer address may push it out),
        /// and no tenant holds more than its bound.
        #[test]
        fn owners_never_change(
            frames in prop::collection::vec((0usize..3, 0u8..12, 0u64..5_000), 0..400),
        ) {
            let mut t = MacTable::new(&[vec![], vec![], vec![]], 3, 1_000).unwrap();
            let mut now = 0;
            for (tenant, low, dt) in frames {
                now += dt;
                let mac = [2, 0, 0, 0, 0, low];
                let before: Vec<Destination> =
                    (0..12).map(|i| t.destination(&[2, 0, 0, 0, 0, i])).collect();
                let r = t.check_source(tenant, mac, now);
                for (i, b) in before.iter().enumerate() {
                    let after = t.destination(&[2, 0, 0, 0, 0, i as u8]);
                    match (*b, after) {
                        (Destination::Tenant(o), Destination::Tenant(n)) => prop_assert_eq!(o, n),
                        // Forgotten: only to make room for its own tenant's new address.
                        (Destination::Tenant(o), Destination::Unknown) => {
                            prop_assert_eq!(o, tenant);
                            prop_assert!(r.is_ok());
                        }
                        _ => {}
                    }
                }
                if let Destination::Tenant(o) = before[low as usize] {
                    if o != tenant {
                        prop_assert_eq!(r, Err(SourceReject::Spoofed { owner: o }));
                    }
                }
                for u in 0..3 {
                    prop_assert!(t.owned(u) <= 3);
                }
            }
        }
    }
}
