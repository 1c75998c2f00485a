//! Per-flow-class propagation delay (`--class-delay`): flows that match a class get the class's
//! one-way delay instead of the direction's default, so that a datacenter-RTT flow and a WAN-RTT
//! flow can share one bottleneck (Annulus, Nimbus, Inigo mixes).
//!
//! A class matches in the orientation of the data direction (down, sender → receiver): `dport`
//! is the destination port of a down packet, and an up packet (an ACK, a reply) of the same flow
//! is matched by its *source* port; likewise `sport`, `src` and `dst` swap for up packets. Both
//! directions of one flow therefore fall in the same class.
//!
//! The queue stays shared: the class only picks the delay line a packet enters after the link
//! (queue → link → delay). Each class has its own delay line, so ordering within a class is kept
//! and a packet with a short delay never waits behind one with a long delay
//! ([`crate::delay::ClassedDelayLine`]).
//!
//! Syntax of one class (`--class-delay`, repeatable): `MATCH[,MATCH…]:DELAY` where
//! * `MATCH` is `dport=P`, `dport=LO-HI`, `sport=…` (TCP or UDP ports), `dst=A.B.C.D[/LEN]`,
//!   `src=…` (IPv4 address or prefix) or `proto=tcp|udp`; several are ANDed, each key at most once;
//! * `DELAY` is `MS` (both directions) or `down=MS[,up=MS]` / `up=MS` (a direction left out keeps
//!   the default delay of that direction), milliseconds, 0..=10000.
//!
//! Classes must be disjoint (no packet may match two), checked exactly: two classes overlap when
//! every field they constrain admits a common value.

use std::fmt;
use std::net::Ipv4Addr;

use ccp_qdisc::{Nanos, NANOS_PER_MS};

use crate::args_to_config::{ms_to_ns, MAX_DELAY_MS};
use crate::error::{Error, Result};

/// The option that declares classes (errors name it).
pub const FLAG: &str = "--class-delay";
/// At most this many classes (each is a delay line scanned per release).
pub const MAX_CLASSES: usize = 64;

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// An inclusive TCP/UDP port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub fn contains(self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }

    fn overlaps(self, o: PortRange) -> bool {
        self.lo <= o.hi && o.lo <= self.hi
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// An IPv4 address with a prefix length (32: one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Net {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

impl Ipv4Net {
    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len.min(32)))
        }
    }

    pub fn contains(self, a: Ipv4Addr) -> bool {
        (u32::from(a) ^ u32::from(self.addr)) & Ipv4Net::mask(self.prefix_len) == 0
    }

    /// Two prefixes share an address exactly when they agree on the shorter prefix.
    fn overlaps(self, o: Ipv4Net) -> bool {
        (u32::from(self.addr) ^ u32::from(o.addr)) & Ipv4Net::mask(self.prefix_len.min(o.prefix_len)) == 0
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix_len == 32 {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix_len)
        }
    }
}

/// A transport protocol a class can require.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    fn number(self) -> u8 {
        match self {
            Proto::Tcp => IPPROTO_TCP,
            Proto::Udp => IPPROTO_UDP,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// What a class matches, in the data direction's orientation (see the module docs). Fields left
/// `None` match anything; a port constraint matches only TCP and UDP packets that carry ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowMatch {
    pub proto: Option<Proto>,
    pub sport: Option<PortRange>,
    pub dport: Option<PortRange>,
    pub src: Option<Ipv4Net>,
    pub dst: Option<Ipv4Net>,
}

impl FlowMatch {
    fn is_empty(&self) -> bool {
        *self == FlowMatch::default()
    }

    /// Whether a packet whose header fields are `k` (as read, in the direction `dir`) matches.
    pub fn matches(&self, dir: Dir, k: &FlowKey) -> bool {
        let k = match dir {
            Dir::Down => *k,
            Dir::Up => k.reversed(),
        };
        if self.proto.is_some_and(|p| k.proto != Some(p.number())) {
            return false;
        }
        if self.sport.is_some() || self.dport.is_some() {
            let Some((s, d)) = k.ports else { return false };
            if self.sport.is_some_and(|r| !r.contains(s)) || self.dport.is_some_and(|r| !r.contains(d)) {
                return false;
            }
        }
        let addr_ok = |net: Option<Ipv4Net>, a: Option<Ipv4Addr>| net.is_none_or(|n| a.is_some_and(|a| n.contains(a)));
        addr_ok(self.src, k.src) && addr_ok(self.dst, k.dst)
    }

    /// The protocols a packet matching this can have, as a set: bit 0 TCP, bit 1 UDP, bit 2
    /// anything else.
    fn protocols(&self) -> u8 {
        let mut set = match self.proto {
            Some(Proto::Tcp) => 0b001,
            Some(Proto::Udp) => 0b010,
            None => 0b111,
        };
        if self.sport.is_some() || self.dport.is_some() {
            set &= 0b011;
        }
        set
    }

    /// Whether some packet could match both (every constrained field admits a common value).
    pub fn overlaps(&self, o: &FlowMatch) -> bool {
        fn both<T: Copy>(a: Option<T>, b: Option<T>, f: impl Fn(T, T) -> bool) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => f(a, b),
                _ => true,
            }
        }
        self.protocols() & o.protocols() != 0
            && both(self.sport, o.sport, PortRange::overlaps)
            && both(self.dport, o.dport, PortRange::overlaps)
            && both(self.src, o.src, Ipv4Net::overlaps)
            && both(self.dst, o.dst, Ipv4Net::overlaps)
    }
}

impl fmt::Display for FlowMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(p) = self.proto {
            parts.push(format!("proto={}", p.name()));
        }
        if let Some(r) = self.sport {
            parts.push(format!("sport={r}"));
        }
        if let Some(r) = self.dport {
            parts.push(format!("dport={r}"));
        }
        if let Some(n) = self.src {
            parts.push(format!("src={n}"));
        }
        if let Some(n) = self.dst {
            parts.push(format!("dst={n}"));
        }
        f.write_str(&parts.join(","))
    }
}

/// Which way a packet crosses the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Sender → receiver (the data direction classes are written for).
    Down,
    /// Receiver → sender: classes match with source and destination swapped.
    Up,
}

/// The header fields classes look at, as read from a raw IP packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowKey {
    /// IP protocol (IPv4) or next header (IPv6, extension headers not followed).
    pub proto: Option<u8>,
    /// IPv4 source and destination (IPv6 packets never match an address class).
    pub src: Option<Ipv4Addr>,
    pub dst: Option<Ipv4Addr>,
    /// (source, destination) ports of a TCP or UDP packet that carries them (not a non-first
    /// fragment, not truncated).
    pub ports: Option<(u16, u16)>,
}

impl FlowKey {
    /// Reads the fields from an IP packet; anything unreadable is `None`.
    pub fn of(data: &[u8]) -> FlowKey {
        let ports_at = |proto: u8, off: usize| {
            ((proto == IPPROTO_TCP || proto == IPPROTO_UDP) && data.len() >= off + 4)
                .then(|| (u16::from_be_bytes([data[off], data[off + 1]]), u16::from_be_bytes([data[off + 2], data[off + 3]])))
        };
        match data.first().map(|b| b >> 4) {
            Some(4) if data.len() >= 20 => {
                let ihl = usize::from(data[0] & 0x0f) * 4;
                let proto = data[9];
                let fragment_offset = u16::from_be_bytes([data[6] & 0x1f, data[7]]);
                FlowKey {
                    proto: Some(proto),
                    src: Some(Ipv4Addr::new(data[12], data[13], data[14], data[15])),
                    dst: Some(Ipv4Addr::new(data[16], data[17], data[18], data[19])),
                    ports: if ihl >= 20 && fragment_offset == 0 { ports_at(proto, ihl) } else { None },
                }
            }
            Some(6) if data.len() >= 40 => FlowKey { proto: Some(data[6]), src: None, dst: None, ports: ports_at(data[6], 40) },
            _ => FlowKey::default(),
        }
    }

    fn reversed(self) -> FlowKey {
        FlowKey { proto: self.proto, src: self.dst, dst: self.src, ports: self.ports.map(|(s, d)| (d, s)) }
    }
}

/// One class: what it matches and its one-way delay per direction (`None`: that direction's
/// default delay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassDelay {
    pub matcher: FlowMatch,
    pub down: Option<Nanos>,
    pub up: Option<Nanos>,
}

impl ClassDelay {
    /// The delay of direction `dir` for this class, given the direction's default.
    pub fn delay(&self, dir: Dir, default: Nanos) -> Nanos {
        match dir {
            Dir::Down => self.down,
            Dir::Up => self.up,
        }
        .unwrap_or(default)
    }
}

impl fmt::Display for ClassDelay {
    /// The class in `--class-delay` syntax (canonical form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |ns: Nanos| ns as f64 / NANOS_PER_MS as f64;
        write!(f, "{}:", self.matcher)?;
        match (self.down, self.up) {
            (Some(d), Some(u)) if d == u => write!(f, "{}", ms(d)),
            (Some(d), Some(u)) => write!(f, "down={},up={}", ms(d), ms(u)),
            (Some(d), None) => write!(f, "down={}", ms(d)),
            (None, Some(u)) => write!(f, "up={}", ms(u)),
            (None, None) => Ok(()),
        }
    }
}

/// The index of the class a packet belongs to in direction `dir` (`None`: the default delay).
/// Classes are disjoint ([`validate`]), so the first match is the only one.
pub fn classify(classes: &[ClassDelay], dir: Dir, data: &[u8]) -> Option<usize> {
    if classes.is_empty() {
        return None;
    }
    let k = FlowKey::of(data);
    classes.iter().position(|c| c.matcher.matches(dir, &k))
}

fn bad(spec: &str, message: impl fmt::Display) -> Error {
    Error::param(FLAG, format!("{spec:?}: {message}"))
}

const SYNTAX: &str = "expected MATCH[,MATCH…]:DELAY, e.g. dport=5201-5299:20 or dst=10.77.0.2,proto=udp:down=1,up=1";

fn parse_port(spec: &str, key: &str, s: &str) -> Result<u16> {
    s.trim().parse::<u16>().map_err(|_| bad(spec, format!("{key}: {s:?} is not a port number (0..=65535)")))
}

fn parse_ports(spec: &str, key: &str, v: &str) -> Result<PortRange> {
    let (lo, hi) = match v.split_once('-') {
        Some((lo, hi)) => (parse_port(spec, key, lo)?, parse_port(spec, key, hi)?),
        None => {
            let p = parse_port(spec, key, v)?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(bad(spec, format!("{key}: the range {lo}-{hi} is empty (give LOW-HIGH)")));
    }
    Ok(PortRange { lo, hi })
}

fn parse_net(spec: &str, key: &str, v: &str) -> Result<Ipv4Net> {
    let (a, len) = match v.split_once('/') {
        Some((a, l)) => {
            let len = l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= 32)
                .ok_or_else(|| bad(spec, format!("{key}: {l:?} is not a prefix length (0..=32)")))?;
            (a, len)
        }
        None => (v, 32),
    };
    let addr: Ipv4Addr =
        a.trim().parse().map_err(|_| bad(spec, format!("{key}: {a:?} is not an IPv4 address (IPv6 is not supported)")))?;
    let net = Ipv4Net { addr, prefix_len: len };
    let base = Ipv4Addr::from(u32::from(addr) & Ipv4Net::mask(len));
    if base != addr {
        return Err(bad(spec, format!("{key}: {v} has bits set beyond the /{len} prefix; did you mean {base}/{len}?")));
    }
    Ok(net)
}

fn parse_ms(spec: &str, what: &str, v: &str) -> Result<Nanos> {
    let ms: f64 = v.trim().parse().map_err(|_| bad(spec, format!("{what}: {v:?} is not a number of milliseconds")))?;
    ms_to_ns(FLAG, ms, MAX_DELAY_MS).map_err(|_| bad(spec, format!("{what}: {ms} ms is outside 0..={MAX_DELAY_MS} ms")))
}

/// Parses one `--class-delay` value.
pub fn parse_class_delay(spec: &str) -> Result<ClassDelay> {
    let (m, d) = spec.rsplit_once(':').ok_or_else(|| bad(spec, SYNTAX))?;
    let mut matcher = FlowMatch::default();
    for part in m.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad(spec, format!("an empty match; {SYNTAX}")));
        }
        let (key, v) = part
            .split_once('=')
            .ok_or_else(|| bad(spec, format!("{part:?} is not KEY=VALUE (keys: proto, sport, dport, src, dst)")))?;
        let key = key.trim();
        let v = v.trim();
        let dup = || bad(spec, format!("{key} is given twice"));
        match key {
            "proto" => {
                let p = match v.to_ascii_lowercase().as_str() {
                    "tcp" => Proto::Tcp,
                    "udp" => Proto::Udp,
                    _ => return Err(bad(spec, format!("proto: {v:?} is not tcp or udp"))),
                };
                if matcher.proto.replace(p).is_some() {
                    return Err(dup());
                }
            }
            "sport" | "dport" => {
                let r = parse_ports(spec, key, v)?;
                let slot = if key == "sport" { &mut matcher.sport } else { &mut matcher.dport };
                if slot.replace(r).is_some() {
                    return Err(dup());
                }
            }
            "src" | "dst" => {
                let n = parse_net(spec, key, v)?;
                let slot = if key == "src" { &mut matcher.src } else { &mut matcher.dst };
                if slot.replace(n).is_some() {
                    return Err(dup());
                }
            }
            other => return Err(bad(spec, format!("unknown match key {other:?} (keys: proto, sport, dport, src, dst)"))),
        }
    }
    let (mut down, mut up) = (None, None);
    let d = d.trim();
    if d.is_empty() {
        return Err(bad(spec, format!("no delay after ':'; {SYNTAX}")));
    }
    if d.contains('=') {
        for part in d.split(',') {
            let (key, v) = part.split_once('=').ok_or_else(|| bad(spec, format!("{part:?}: expected down=MS or up=MS")))?;
            let slot = match key.trim() {
                "down" => &mut down,
                "up" => &mut up,
                other => return Err(bad(spec, format!("unknown delay key {other:?} (down or up)"))),
            };
            if slot.replace(parse_ms(spec, key.trim(), v)?).is_some() {
                return Err(bad(spec, format!("{} is given twice", key.trim())));
            }
        }
    } else {
        let ns = parse_ms(spec, "delay", d)?;
        (down, up) = (Some(ns), Some(ns));
    }
    let c = ClassDelay { matcher, down, up };
    check_one(spec, &c)?;
    Ok(c)
}

fn check_one(name: &str, c: &ClassDelay) -> Result<()> {
    if c.matcher.is_empty() {
        return Err(bad(name, "a class needs at least one match (proto, sport, dport, src or dst)"));
    }
    if c.down.is_none() && c.up.is_none() {
        return Err(bad(name, "a class needs a delay (down, up or both)"));
    }
    for ns in [c.down, c.up].into_iter().flatten() {
        if ns as f64 > MAX_DELAY_MS * NANOS_PER_MS as f64 {
            return Err(bad(name, format!("{} ms is above {MAX_DELAY_MS} ms", ns as f64 / NANOS_PER_MS as f64)));
        }
    }
    Ok(())
}

/// Checks a set of classes however it was built: each well-formed, at most [`MAX_CLASSES`], and
/// no two overlapping.
pub fn validate(classes: &[ClassDelay]) -> Result<()> {
    if classes.len() > MAX_CLASSES {
        return Err(Error::param(FLAG, format!("{} classes; at most {MAX_CLASSES} are supported", classes.len())));
    }
    for (i, c) in classes.iter().enumerate() {
        check_one(&c.to_string(), c)?;
        if let Some(j) = classes[..i].iter().position(|o| o.matcher.overlaps(&c.matcher)) {
            return Err(Error::param(
                FLAG,
                format!(
                    "classes {} ({}) and {} ({}) overlap: some packet would match both; make their ports, addresses or \
                     protocols disjoint",
                    j + 1,
                    classes[j].matcher,
                    i + 1,
                    c.matcher
                ),
            ));
        }
    }
    Ok(())
}

/// Parses and validates every `--class-delay` value.
pub fn parse_all<S: AsRef<str>>(specs: &[S]) -> Result<Vec<ClassDelay>> {
    let classes = specs.iter().map(|s| parse_class_delay(s.as_ref())).collect::<Result<Vec<_>>>()?;
    validate(&classes)?;
    Ok(classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NANOS_PER_MS;

    /// An IPv4 packet of protocol `proto` with the given addresses and ports.
    fn pkt(proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x45;
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    const SND: [u8; 4] = [10, 77, 0, 1];
    const RCV: [u8; 4] = [10, 77, 0, 2];

    fn err(spec: &str) -> String {
        parse_class_delay(spec).unwrap_err().to_string()
    }

    #[test]
    fn syntax() {
        let c = parse_class_delay("dport=5201-5299:down=20,up=20").unwrap();
        assert_eq!(c.matcher.dport, Some(PortRange { lo: 5201, hi: 5299 }));
        assert_eq!((c.down, c.up), (Some(20 * MS), Some(20 * MS)));
        assert_eq!(c.to_string(), "dport=5201-5299:20");
        let c = parse_class_delay(" dst = 10.77.0.0/24 , proto=UDP , sport=7 :up=0.5").unwrap();
        assert_eq!(c.matcher.dst, Some(Ipv4Net { addr: Ipv4Addr::new(10, 77, 0, 0), prefix_len: 24 }));
        assert_eq!(c.matcher.proto, Some(Proto::Udp));
        assert_eq!(c.matcher.sport, Some(PortRange { lo: 7, hi: 7 }));
        assert_eq!((c.down, c.up), (None, Some(MS / 2)));
        assert_eq!(c.to_string(), "proto=udp,sport=7,dst=10.77.0.0/24:up=0.5");
        let c = parse_class_delay("src=10.77.0.1:1.5").unwrap();
        assert_eq!((c.down, c.up), (Some(1_500_000), Some(1_500_000)));
        // The canonical form parses back to the same class.
        assert_eq!(parse_class_delay(&c.to_string()).unwrap(), c);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, needle) in [
            ("dport=5201", "expected MATCH"),
            (":20", "empty match"),
            ("dport=5299-5201:20", "range 5299-5201 is empty"),
            ("dport=70000:20", "not a port number"),
            ("dport=x:20", "not a port number"),
            ("port=80:20", "unknown match key \"port\""),
            ("dport=80,dport=81:20", "dport is given twice"),
            ("dport=80:", "no delay"),
            ("dport=80:-1", "outside 0..=10000 ms"),
            ("dport=80:20000", "outside 0..=10000 ms"),
            ("dport=80:NaN", "outside"),
            ("dport=80:fast", "not a number of milliseconds"),
            ("dport=80:down=1,side=2", "unknown delay key"),
            ("dport=80:down=1,down=2", "down is given twice"),
            ("dst=10.77.0.300:1", "not an IPv4 address"),
            ("dst=10.77.0.1/33:1", "not a prefix length"),
            ("dst=10.77.0.1/24:1", "did you mean 10.77.0.0/24"),
            ("proto=icmp:1", "not tcp or udp"),
            ("dport80:1", "not KEY=VALUE"),
        ] {
            let e = err(spec);
            assert!(e.starts_with("--class-delay: "), "{spec}: {e}");
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn overlapping_classes_are_refused() {
        let overlap = |a: &str, b: &str| parse_all(&[a, b]).is_err();
        assert!(overlap("dport=5201-5299:1", "dport=5299-5400:2"));
        assert!(overlap("dport=5201:1", "dst=10.77.0.2:2"), "a port class and an address class share packets");
        assert!(overlap("dst=10.77.0.0/16:1", "dst=10.77.3.4:2"));
        assert!(overlap("dport=80:1", "sport=1000:2"));
        assert!(overlap("proto=tcp:1", "dport=80:2"));
        assert!(!overlap("dport=5201-5299:1", "dport=5300-5400:2"));
        assert!(!overlap("proto=tcp,dport=80:1", "proto=udp,dport=80:2"));
        assert!(!overlap("proto=udp:1", "proto=tcp,dport=80:2"));
        assert!(!overlap("dst=10.77.0.0/24:1", "dst=10.78.0.0/24:2"));
        assert!(!overlap("dport=80,sport=1-1000:1", "dport=80,sport=1001-2000:2"));
        let e = parse_all(&["dport=5201-5299:1", "dport=5300:1", "dport=5250:2"]).unwrap_err().to_string();
        assert!(e.contains("classes 1 (dport=5201-5299) and 3 (dport=5250) overlap"), "{e}");
        let many: Vec<String> = (0..=MAX_CLASSES).map(|i| format!("dport={}:1", 1000 + i)).collect();
        assert!(parse_all(&many).unwrap_err().to_string().contains("at most 64"));
        // Library-built classes are held to the same rules.
        let empty = ClassDelay { matcher: FlowMatch::default(), down: Some(MS), up: None };
        assert!(validate(&[empty]).unwrap_err().to_string().contains("at least one match"));
        let no_delay =
            ClassDelay { matcher: FlowMatch { proto: Some(Proto::Tcp), ..FlowMatch::default() }, down: None, up: None };
        assert!(validate(&[no_delay]).unwrap_err().to_string().contains("needs a delay"));
    }

    #[test]
    fn both_directions_of_a_flow_match_the_same_class() {
        let classes =
            parse_all(&["proto=tcp,dport=5201-5299:20", "dst=10.77.0.2,proto=udp:1", "proto=tcp,sport=40000,dport=1-5200:3"])
                .unwrap();
        let data = pkt(IPPROTO_TCP, SND, RCV, 33000, 5250);
        let ack = pkt(IPPROTO_TCP, RCV, SND, 5250, 33000);
        assert_eq!(classify(&classes, Dir::Down, &data), Some(0));
        assert_eq!(classify(&classes, Dir::Up, &ack), Some(0));
        // Read in the wrong orientation, the ACK is not the flow's.
        assert_eq!(classify(&classes, Dir::Down, &ack), None);
        // UDP to the receiver: the address class, both ways.
        assert_eq!(classify(&classes, Dir::Down, &pkt(IPPROTO_UDP, SND, RCV, 9, 9)), Some(1));
        assert_eq!(classify(&classes, Dir::Up, &pkt(IPPROTO_UDP, RCV, SND, 9, 9)), Some(1));
        // The sender's source port.
        assert_eq!(classify(&classes, Dir::Down, &pkt(IPPROTO_TCP, SND, RCV, 40000, 80)), Some(2));
        assert_eq!(classify(&classes, Dir::Up, &pkt(IPPROTO_TCP, RCV, SND, 80, 40000)), Some(2));
        // Unmatched: the default delay.
        assert_eq!(classify(&classes, Dir::Down, &pkt(IPPROTO_TCP, SND, RCV, 33000, 80)), None);
        assert_eq!(classify(&[], Dir::Down, &data), None);
    }

    #[test]
    fn headers_without_ports_match_only_address_classes() {
        let classes = parse_all(&["dport=5201,dst=10.77.0.2:20", "dst=10.77.0.9:1"]).unwrap();
        // ICMP to the port class's destination: no ports, so not the port class.
        assert_eq!(classify(&classes, Dir::Down, &pkt(1, SND, RCV, 0, 5201)), None);
        // A non-first fragment of a TCP packet carries no ports.
        let mut frag = pkt(IPPROTO_TCP, SND, RCV, 1, 5201);
        frag[6..8].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(FlowKey::of(&frag).ports, None);
        assert_eq!(classify(&classes, Dir::Down, &frag), None);
        // ICMP to an address class's host matches it.
        assert_eq!(classify(&classes, Dir::Down, &pkt(1, SND, [10, 77, 0, 9], 0, 0)), Some(1));
        // IP options shift the ports.
        let mut opts = pkt(IPPROTO_TCP, SND, RCV, 0, 0);
        opts[0] = 0x46;
        opts[24..28].copy_from_slice(&[0x13, 0x88, 0x14, 0x51]);
        assert_eq!(FlowKey::of(&opts).ports, Some((5000, 5201)));
        // IPv6: ports yes, addresses no; garbage: nothing.
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        v6[6] = IPPROTO_UDP;
        v6[42..44].copy_from_slice(&5201u16.to_be_bytes());
        assert_eq!(FlowKey::of(&v6).ports, Some((0, 5201)));
        assert_eq!(FlowKey::of(&v6).dst, None);
        assert_eq!(classify(&classes, Dir::Down, &v6), None, "the class also needs an IPv4 destination");
        let v6_classes = parse_all(&["dport=5201:20"]).unwrap();
        assert_eq!(classify(&v6_classes, Dir::Down, &v6), Some(0));
        assert_eq!(FlowKey::of(&[0x45, 0, 0]), FlowKey::default());
        assert_eq!(classify(&classes, Dir::Down, &pkt(IPPROTO_TCP, SND, RCV, 0, 5201)), Some(0));
        assert_eq!(classify(&classes, Dir::Down, &pkt(IPPROTO_TCP, SND, RCV, 0, 5201)[..22]), None, "truncated ports");
    }
}
