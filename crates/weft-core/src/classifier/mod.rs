//! Traffic classification: packet metadata → (leaf, shaping classes) (Loom §3, "Traffic
//! Classification").
//!
//! A policy's matches are conjunctions over the fields of [`Field`]; each field may list several
//! values (`dport: [80, 443]`) or, for addresses, prefixes. Siblings are tried in declaration
//! order and the **first match wins**; the compiler refuses a sibling that an earlier one covers
//! entirely (`shadowed-match`), so more specific rules must come first — for rules on a single
//! prefix field this makes first-match identical to longest-prefix match.
//!
//! Two twins implement one dispatch point (the children of one scheduling node, or the parallel
//! shaping nodes above one node):
//! * [`tss::Dispatch`] — tuple-space search: rules are grouped by their *shape* (which fields
//!   they constrain and, for prefixes, the prefix length); each shape is one table keyed by the
//!   masked packet fields — a direct array when the keys are dense values of one word (ids,
//!   ports, sibling prefixes of one length), else a hash table. A lookup costs one probe per
//!   shape, never per rule, and stops early once no remaining shape can hold an earlier rule;
//!   the common one-array dispatch is a few instructions inline. For prefix-only rules the
//!   shapes are the distinct prefix lengths, i.e. a table-per-length longest-prefix match.
//! * [`reference::ReferenceDispatch`] — a linear scan, obviously correct; property tests demand
//!   the two agree on random rules and packets.
//!
//! Addresses live in one 128-bit space: IPv4 `a.b.c.d` is the IPv4-mapped `::ffff:a.b.c.d`, so a
//! `/24` IPv4 prefix is a `/120` in that space.

pub mod reference;
pub mod tss;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A packet field a match can constrain. The discriminant is the bit in a [`FieldMask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Field {
    /// Tenant id (set by the hypervisor or the ingress interface).
    Tenant = 0,
    /// Virtual machine / VNIC id.
    Vm = 1,
    /// cgroup id of the sending process.
    Cgroup = 2,
    /// Free integer tag (socket priority, mark, ...).
    Tag = 3,
    /// L4 source port.
    Sport = 4,
    /// L4 destination port (the usual way to name an application).
    Dport = 5,
    /// IP protocol number.
    Proto = 6,
    /// DSCP code point, 0..=63.
    Dscp = 7,
    /// Source address prefix.
    Src = 8,
    /// Destination address prefix.
    Dst = 9,
}

/// All fields, in the canonical order used for output.
pub const FIELDS: [Field; 10] = [
    Field::Tenant,
    Field::Vm,
    Field::Cgroup,
    Field::Tag,
    Field::Sport,
    Field::Dport,
    Field::Proto,
    Field::Dscp,
    Field::Src,
    Field::Dst,
];

impl Field {
    /// The name used in policy files, traces and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Field::Tenant => "tenant",
            Field::Vm => "vm",
            Field::Cgroup => "cgroup",
            Field::Tag => "tag",
            Field::Sport => "sport",
            Field::Dport => "dport",
            Field::Proto => "proto",
            Field::Dscp => "dscp",
            Field::Src => "src",
            Field::Dst => "dst",
        }
    }

    /// Looks a field up by name; `app` is an alias of `dport`.
    pub fn from_name(name: &str) -> Option<Field> {
        Some(match name {
            "tenant" => Field::Tenant,
            "vm" => Field::Vm,
            "cgroup" => Field::Cgroup,
            "tag" => Field::Tag,
            "sport" => Field::Sport,
            "dport" | "app" => Field::Dport,
            "proto" => Field::Proto,
            "dscp" => Field::Dscp,
            "src" => Field::Src,
            "dst" => Field::Dst,
            _ => return None,
        })
    }

    /// Largest value an integer field can hold.
    pub fn max_value(self) -> u64 {
        match self {
            Field::Tenant | Field::Vm | Field::Tag => u32::MAX as u64,
            Field::Cgroup => u64::MAX,
            Field::Sport | Field::Dport => u16::MAX as u64,
            Field::Proto => u8::MAX as u64,
            Field::Dscp => 63,
            Field::Src | Field::Dst => 0,
        }
    }

    /// The bit of this field in a [`FieldMask`].
    pub fn bit(self) -> FieldMask {
        1 << (self as u8)
    }

    fn is_prefix(self) -> bool {
        matches!(self, Field::Src | Field::Dst)
    }
}

/// A set of [`Field`]s, one bit each.
pub type FieldMask = u16;

/// An address prefix in the unified 128-bit space (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    /// Address bits; bits beyond `len` are zero.
    pub addr: u128,
    /// Prefix length in the 128-bit space, 0..=128.
    pub len: u8,
}

/// Maps an address into the unified 128-bit space.
pub fn addr_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The network mask of a prefix length in the 128-bit space.
pub fn prefix_mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

impl Prefix {
    /// Builds a prefix, clearing host bits.
    pub fn new(addr: u128, len: u8) -> Prefix {
        Prefix {
            addr: addr & prefix_mask(len),
            len,
        }
    }

    /// True when `addr` lies inside this prefix.
    pub fn contains(&self, addr: u128) -> bool {
        addr & prefix_mask(self.len) == self.addr
    }

    /// True when every address of `other` lies inside `self`.
    pub fn covers(&self, other: &Prefix) -> bool {
        self.len <= other.len && self.contains(other.addr)
    }

    fn is_v4(&self) -> bool {
        self.len >= 96 && (self.addr >> 32) == 0xffff
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_v4() {
            let v4 = Ipv4Addr::from(self.addr as u32);
            if self.len == 128 {
                write!(f, "{v4}")
            } else {
                write!(f, "{v4}/{}", self.len - 96)
            }
        } else {
            let v6 = Ipv6Addr::from(self.addr);
            if self.len == 128 {
                write!(f, "{v6}")
            } else {
                write!(f, "{v6}/{}", self.len)
            }
        }
    }
}

impl FromStr for Prefix {
    type Err = String;

    /// Parses `10.0.0.0/8`, `10.0.2.7` (a /32), `2001:db8::/32` or `::1`.
    fn from_str(s: &str) -> Result<Prefix, String> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not an IPv4 or IPv6 address or prefix"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len: u8 = match len {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("`{s}`: prefix length must be 0..={max}"))?,
        };
        let offset = if ip.is_ipv4() { 96 } else { 0 };
        let bits = addr_bits(ip);
        let p = Prefix::new(bits, len + offset);
        if p.addr != bits {
            // Host bits set below the prefix length: `10.0.0.1/8` is almost always a typo.
            return Err(format!("`{s}` has host bits set; did you mean `{p}`?"));
        }
        Ok(p)
    }
}

/// A conjunction over fields; each field lists the values it accepts (empty = any value).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Match {
    /// Tenant ids accepted.
    pub tenant: Vec<u32>,
    /// VM ids accepted.
    pub vm: Vec<u32>,
    /// cgroup ids accepted.
    pub cgroup: Vec<u64>,
    /// Driver-assigned tags accepted.
    pub tag: Vec<u32>,
    /// Transport source ports accepted.
    pub sport: Vec<u16>,
    /// Transport destination ports accepted.
    pub dport: Vec<u16>,
    /// IP protocol numbers accepted (6 TCP, 17 UDP, ...).
    pub proto: Vec<u8>,
    /// DSCP values accepted (0-63).
    pub dscp: Vec<u8>,
    /// Source address prefixes accepted (IPv4 or IPv6).
    pub src: Vec<Prefix>,
    /// Destination address prefixes accepted (IPv4 or IPv6).
    pub dst: Vec<Prefix>,
}

impl Match {
    /// The match that accepts every packet.
    pub fn any() -> Match {
        Match::default()
    }

    /// True when no field is constrained.
    pub fn is_any(&self) -> bool {
        self.fields() == 0
    }

    /// The fields this match constrains.
    pub fn fields(&self) -> FieldMask {
        let mut m = 0;
        for f in FIELDS {
            if self.count(f) > 0 {
                m |= f.bit();
            }
        }
        m
    }

    /// Number of values listed for `field`.
    pub fn count(&self, field: Field) -> usize {
        match field {
            Field::Tenant => self.tenant.len(),
            Field::Vm => self.vm.len(),
            Field::Cgroup => self.cgroup.len(),
            Field::Tag => self.tag.len(),
            Field::Sport => self.sport.len(),
            Field::Dport => self.dport.len(),
            Field::Proto => self.proto.len(),
            Field::Dscp => self.dscp.len(),
            Field::Src => self.src.len(),
            Field::Dst => self.dst.len(),
        }
    }

    /// Adds an integer value to an integer field. Panics on a prefix field (a programming error).
    pub fn push_int(&mut self, field: Field, v: u64) {
        match field {
            Field::Tenant => self.tenant.push(v as u32),
            Field::Vm => self.vm.push(v as u32),
            Field::Cgroup => self.cgroup.push(v),
            Field::Tag => self.tag.push(v as u32),
            Field::Sport => self.sport.push(v as u16),
            Field::Dport => self.dport.push(v as u16),
            Field::Proto => self.proto.push(v as u8),
            Field::Dscp => self.dscp.push(v as u8),
            Field::Src | Field::Dst => panic!("push_int on prefix field {}", field.name()),
        }
    }

    /// The integer values of an integer field, widened.
    pub fn ints(&self, field: Field) -> Vec<u64> {
        match field {
            Field::Tenant => self.tenant.iter().map(|&v| v as u64).collect(),
            Field::Vm => self.vm.iter().map(|&v| v as u64).collect(),
            Field::Cgroup => self.cgroup.clone(),
            Field::Tag => self.tag.iter().map(|&v| v as u64).collect(),
            Field::Sport => self.sport.iter().map(|&v| v as u64).collect(),
            Field::Dport => self.dport.iter().map(|&v| v as u64).collect(),
            Field::Proto => self.proto.iter().map(|&v| v as u64).collect(),
            Field::Dscp => self.dscp.iter().map(|&v| v as u64).collect(),
            Field::Src | Field::Dst => Vec::new(),
        }
    }

    /// The prefixes of a prefix field.
    pub fn prefixes(&self, field: Field) -> &[Prefix] {
        match field {
            Field::Src => &self.src,
            Field::Dst => &self.dst,
            _ => &[],
        }
    }

    /// Number of (field value) combinations: the atoms this match expands into.
    pub fn combinations(&self) -> u128 {
        FIELDS
            .iter()
            .map(|&f| self.count(f).max(1) as u128)
            .product()
    }

    /// Does the packet satisfy this match? (Reference semantics, used by the linear twin.)
    pub fn matches(&self, p: &PacketMeta) -> bool {
        fn ok<T: PartialEq + Copy>(vals: &[T], present: bool, v: T) -> bool {
            vals.is_empty() || (present && vals.contains(&v))
        }
        let has = |f: Field| p.present & f.bit() != 0;
        ok(&self.tenant, has(Field::Tenant), p.tenant)
            && ok(&self.vm, has(Field::Vm), p.vm)
            && ok(&self.cgroup, has(Field::Cgroup), p.cgroup)
            && ok(&self.tag, has(Field::Tag), p.tag)
            && ok(&self.sport, has(Field::Sport), p.sport)
            && ok(&self.dport, has(Field::Dport), p.dport)
            && ok(&self.proto, has(Field::Proto), p.proto)
            && ok(&self.dscp, has(Field::Dscp), p.dscp)
            && (self.src.is_empty()
                || (has(Field::Src) && self.src.iter().any(|q| q.contains(p.src))))
            && (self.dst.is_empty()
                || (has(Field::Dst) && self.dst.iter().any(|q| q.contains(p.dst))))
    }

    /// Field-wise intersection of two scopes (used when a sub-policy's root inherits the
    /// attachment point's match). `None` when both constrain one field with disjoint values.
    pub fn intersect(&self, other: &Match) -> Option<Match> {
        fn both<T: PartialEq + Copy>(a: &[T], b: &[T]) -> Option<Vec<T>> {
            match (a.is_empty(), b.is_empty()) {
                (true, _) => Some(b.to_vec()),
                (_, true) => Some(a.to_vec()),
                _ => {
                    let v: Vec<T> = a.iter().copied().filter(|x| b.contains(x)).collect();
                    (!v.is_empty()).then_some(v)
                }
            }
        }
        fn pre(a: &[Prefix], b: &[Prefix]) -> Option<Vec<Prefix>> {
            match (a.is_empty(), b.is_empty()) {
                (true, _) => Some(b.to_vec()),
                (_, true) => Some(a.to_vec()),
                _ => {
                    let mut v = Vec::new();
                    for x in a {
                        for y in b {
                            if x.covers(y) {
                                v.push(*y);
                            } else if y.covers(x) {
                                v.push(*x);
                            }
                        }
                    }
                    (!v.is_empty()).then_some(v)
                }
            }
        }
        Some(Match {
            tenant: both(&self.tenant, &other.tenant)?,
            vm: both(&self.vm, &other.vm)?,
            cgroup: both(&self.cgroup, &other.cgroup)?,
            tag: both(&self.tag, &other.tag)?,
            sport: both(&self.sport, &other.sport)?,
            dport: both(&self.dport, &other.dport)?,
            proto: both(&self.proto, &other.proto)?,
            dscp: both(&self.dscp, &other.dscp)?,
            src: pre(&self.src, &other.src)?,
            dst: pre(&self.dst, &other.dst)?,
        })
    }
}

impl fmt::Display for Match {
    /// `{vm: 1, dport: [80, 443]}` or `any`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("any");
        }
        let mut parts = Vec::new();
        for field in FIELDS {
            if self.count(field) == 0 {
                continue;
            }
            let vals: Vec<String> = if field.is_prefix() {
                self.prefixes(field).iter().map(|p| p.to_string()).collect()
            } else if field == Field::Proto {
                self.proto.iter().map(|&p| proto_name(p)).collect()
            } else {
                self.ints(field).iter().map(|v| v.to_string()).collect()
            };
            if vals.len() == 1 {
                parts.push(format!("{}: {}", field.name(), vals[0]));
            } else {
                parts.push(format!("{}: [{}]", field.name(), vals.join(", ")));
            }
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

/// Protocol names accepted in matches and packets.
pub fn proto_number(name: &str) -> Option<u8> {
    match name.to_ascii_lowercase().as_str() {
        "icmp" => Some(1),
        "tcp" => Some(6),
        "udp" => Some(17),
        "icmpv6" => Some(58),
        "sctp" => Some(132),
        other => other.parse().ok(),
    }
}

/// The conventional name of a protocol number, or the number.
pub fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        n => n.to_string(),
    }
}

/// The classifier's view of one packet. Fields absent from the packet never satisfy a match
/// that constrains them; `present` records which ones were given.
///
/// Laid out (`repr(C)`, 64 bytes, no padding before the addresses) in the order of
/// [`PacketMeta::words`], so that function compiles to a copy of the 64 bytes (plus one
/// masking load: `present` shares the protocol/DSCP word) rather than loads, shifts and ors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PacketMeta {
    /// The sending tenant's id.
    pub tenant: u32,
    /// The sending VM's id.
    pub vm: u32,
    /// The sending cgroup's id.
    pub cgroup: u64,
    /// A tag the driver assigns (a queue, an application, a test's leaf).
    pub tag: u32,
    /// Transport source port.
    pub sport: u16,
    /// Transport destination port.
    pub dport: u16,
    /// IP protocol number.
    pub proto: u8,
    /// DSCP (the top six bits of the IP traffic class).
    pub dscp: u8,
    /// Which fields carry a value.
    pub present: FieldMask,
    /// Source address in the unified 128-bit space.
    pub src: u128,
    /// Destination address in the unified 128-bit space.
    pub dst: u128,
}

impl PacketMeta {
    /// Sets an integer field (truncating to the field's width) and marks it present.
    pub fn set_int(&mut self, field: Field, v: u64) {
        match field {
            Field::Tenant => self.tenant = v as u32,
            Field::Vm => self.vm = v as u32,
            Field::Cgroup => self.cgroup = v,
            Field::Tag => self.tag = v as u32,
            Field::Sport => self.sport = v as u16,
            Field::Dport => self.dport = v as u16,
            Field::Proto => self.proto = v as u8,
            Field::Dscp => self.dscp = v as u8,
            Field::Src => self.src = v as u128,
            Field::Dst => self.dst = v as u128,
        }
        self.present |= field.bit();
    }

    /// Sets an address field and marks it present.
    pub fn set_addr(&mut self, field: Field, ip: IpAddr) {
        let bits = addr_bits(ip);
        match field {
            Field::Src => self.src = bits,
            Field::Dst => self.dst = bits,
            _ => return,
        }
        self.present |= field.bit();
    }

    /// Sets one field, named, from text: integers, protocol names, addresses.
    pub fn set_field(&mut self, name: &str, value: &str) -> Result<(), String> {
        let field = Field::from_name(name).ok_or_else(|| {
            format!(
                "unknown packet field `{name}`; known fields: {}",
                FIELDS.map(Field::name).join(", ")
            )
        })?;
        self.set_text(field, value)
    }

    /// Sets `field` from text: integers, protocol names, addresses (what
    /// [`Self::set_field`] does once it knows the field: a trace reader looks its columns'
    /// fields up once).
    pub fn set_text(&mut self, field: Field, value: &str) -> Result<(), String> {
        let name = field.name();
        match field {
            Field::Src | Field::Dst => {
                let ip: IpAddr = value
                    .parse()
                    .map_err(|_| format!("`{name}={value}`: not an IP address"))?;
                self.set_addr(field, ip);
            }
            Field::Proto => {
                let p = proto_number(value)
                    .ok_or_else(|| format!("`proto={value}`: not a protocol name or number"))?;
                self.set_int(field, p as u64);
            }
            _ => {
                let v: u64 = value
                    .parse()
                    .ok()
                    .filter(|&v| v <= field.max_value())
                    .ok_or_else(|| {
                        format!(
                            "`{name}={value}`: expected an integer 0..={}",
                            field.max_value()
                        )
                    })?;
                self.set_int(field, v);
            }
        }
        Ok(())
    }

    /// The packet as eight 64-bit words, the layout tuple keys are masked from: tenant and
    /// vm, cgroup, tag and ports, protocol and DSCP, then each address low half first. The
    /// struct's `repr(C)` layout matches it, so this compiles to a copy of the 64 bytes.
    #[inline]
    pub fn words(&self) -> [u64; 8] {
        [
            self.tenant as u64 | (self.vm as u64) << 32,
            self.cgroup,
            self.tag as u64 | (self.sport as u64) << 32 | (self.dport as u64) << 48,
            self.proto as u64 | (self.dscp as u64) << 8,
            self.src as u64,
            (self.src >> 64) as u64,
            self.dst as u64,
            (self.dst >> 64) as u64,
        ]
    }
}

impl FromStr for PacketMeta {
    type Err = String;

    /// Parses `tenant=3,dport=11211,dst=10.0.2.7`.
    fn from_str(s: &str) -> Result<PacketMeta, String> {
        let mut p = PacketMeta::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected FIELD=VALUE"))?;
            let before = p.present;
            p.set_field(k.trim(), v.trim())?;
            // The same field twice (`vm=1,vm=2`, or `app` and `dport`): which was meant?
            if p.present == before {
                return Err(format!("`{part}`: {} is given twice", k.trim()));
            }
        }
        Ok(p)
    }
}

impl fmt::Display for PacketMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for field in FIELDS {
            if self.present & field.bit() == 0 {
                continue;
            }
            let v = match field {
                Field::Tenant => self.tenant.to_string(),
                Field::Vm => self.vm.to_string(),
                Field::Cgroup => self.cgroup.to_string(),
                Field::Tag => self.tag.to_string(),
                Field::Sport => self.sport.to_string(),
                Field::Dport => self.dport.to_string(),
                Field::Proto => proto_name(self.proto),
                Field::Dscp => self.dscp.to_string(),
                Field::Src => Prefix::new(self.src, 128).to_string(),
                Field::Dst => Prefix::new(self.dst, 128).to_string(),
            };
            parts.push(format!("{}={v}", field.name()));
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_and_print() {
        let p: Prefix = "10.0.2.0/24".parse().unwrap();
        assert_eq!(p.len, 120);
        assert_eq!(p.to_string(), "10.0.2.0/24");
        let host: Prefix = "10.0.2.7".parse().unwrap();
        assert!(p.covers(&host));
        assert_eq!(host.to_string(), "10.0.2.7");
        let v6: Prefix = "2001:db8::/32".parse().unwrap();
        assert_eq!(v6.to_string(), "2001:db8::/32");
        assert!("10.0.0.1/8"
            .parse::<Prefix>()
            .unwrap_err()
            .contains("host bits"));
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("banana".parse::<Prefix>().is_err());
    }

    #[test]
    fn packet_meta_parses() {
        let p: PacketMeta = "tenant=3,dport=11211,dst=10.0.2.7,proto=udp"
            .parse()
            .unwrap();
        assert_eq!(p.tenant, 3);
        assert_eq!(p.dport, 11211);
        assert_eq!(p.proto, 17);
        assert_eq!(p.to_string(), "tenant=3,dport=11211,proto=udp,dst=10.0.2.7");
        assert!("dport=70000".parse::<PacketMeta>().is_err());
        assert!("colour=red".parse::<PacketMeta>().is_err());
        // One field given twice, under one name or two: refused, not the last one kept.
        for twice in ["vm=1,vm=2", "app=80,dport=81", "tag=1,tag=1"] {
            let e = twice.parse::<PacketMeta>().unwrap_err();
            assert!(e.contains("given twice"), "{twice}: {e}");
        }
    }

    #[test]
    fn packet_meta_is_laid_out_like_its_words() {
        assert_eq!(std::mem::size_of::<PacketMeta>(), 64);
        let mut p: PacketMeta = "tenant=1,vm=2,cgroup=3,tag=4,sport=5,dport=6,proto=7,dscp=8"
            .parse()
            .unwrap();
        p.src = 0x1111 << 64 | 0x2222;
        p.dst = 0x3333 << 64 | 0x4444;
        assert_eq!(
            p.words(),
            [
                1 | 2 << 32,
                3,
                4 | 5 << 32 | 6 << 48,
                7 | 8 << 8,
                0x2222,
                0x1111,
                0x4444,
                0x3333
            ]
        );
    }

    #[test]
    fn absent_fields_never_match() {
        let m = Match {
            vm: vec![1],
            ..Match::default()
        };
        assert!(!m.matches(&PacketMeta::default()));
        assert!(Match::any().matches(&PacketMeta::default()));
    }
}
