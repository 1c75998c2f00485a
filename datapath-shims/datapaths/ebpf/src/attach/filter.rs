//! Which flows an attach or detach selects.
//!
//! Semantics (implemented by the BPF programs, encoded here): `all` selects every flow.
//! Otherwise a filter has a port condition (a flow's local or remote port is in `ports`) and an
//! address condition (its local or remote address is in one of `nets`); a condition with no
//! entries holds, and both must hold. A filter with neither selects nothing, so an empty
//! command line cannot switch every flow of a host by accident. An IPv4 flow on a dual-stack
//! socket (::ffff:a.b.c.d) is an IPv4 flow.

use std::net::IpAddr;
use std::str::FromStr;

use crate::record::Pod;

/// Most ports one filter holds (the BPF side's fixed array).
pub const MAX_PORTS: usize = 8;
/// Most address prefixes one filter holds.
pub const MAX_NETS: usize = 4;

const AF_INET: u32 = libc::AF_INET as u32;
const AF_INET6: u32 = libc::AF_INET6 as u32;

/// An address prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Net {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

impl Net {
    /// A v4-mapped IPv6 prefix (::ffff:0:0/96 and longer) is the IPv4 prefix it maps.
    fn normalized(self) -> Net {
        if let IpAddr::V6(v6) = self.addr {
            if let (Some(v4), true) = (v6.to_ipv4_mapped(), self.prefix_len >= 96) {
                return Net { addr: IpAddr::V4(v4), prefix_len: self.prefix_len - 96 };
            }
        }
        self
    }

    #[cfg(test)]
    fn contains(&self, addr: IpAddr) -> bool {
        let (a, b, bits): (Vec<u8>, Vec<u8>, u8) = match (self.addr, addr) {
            (IpAddr::V4(n), IpAddr::V4(a)) => (n.octets().to_vec(), a.octets().to_vec(), 32),
            (IpAddr::V6(n), IpAddr::V6(a)) => (n.octets().to_vec(), a.octets().to_vec(), 128),
            _ => return false,
        };
        let plen = self.prefix_len.min(bits) as usize;
        (0..plen).all(|i| (a[i / 8] >> (7 - i % 8)) & 1 == (b[i / 8] >> (7 - i % 8)) & 1)
    }
}

impl FromStr for Net {
    type Err = String;

    /// `10.0.0.0/8`, `10.1.2.3` (a /32), `fd00::/8`, `::1`.
    fn from_str(s: &str) -> Result<Net, String> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| format!("{s:?} is not an address or prefix (e.g. 10.0.0.0/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix_len = match len {
            None => max,
            Some(l) => l.trim().parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| format!("{s:?}: bad prefix length"))?,
        };
        Ok(Net { addr, prefix_len }.normalized())
    }
}

impl std::fmt::Display for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// A flow selection; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Filter {
    pub all: bool,
    pub ports: Vec<u16>,
    pub nets: Vec<Net>,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct RawNet {
    pub family: u32,
    pub prefix_len: u32,
    pub addr: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct RawFilter {
    pub all: u32,
    pub nports: u32,
    pub ports: [u16; MAX_PORTS],
    pub nnets: u32,
    pub nets: [RawNet; MAX_NETS],
}
const _: () = assert!(size_of::<RawFilter>() == 124);
// SAFETY: repr(C) integers and byte arrays, no implicit padding (sizes add up to 124).
unsafe impl Pod for RawFilter {}

impl Filter {
    /// Every flow.
    pub fn all() -> Filter {
        Filter { all: true, ..Filter::default() }
    }

    /// True when the filter can select anything.
    pub fn selects_something(&self) -> bool {
        self.all || !self.ports.is_empty() || !self.nets.is_empty()
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.selects_something() {
            return Err("select flows with --port or --addr, or every flow with --all".into());
        }
        if self.ports.len() > MAX_PORTS {
            return Err(format!("at most {MAX_PORTS} ports per filter (got {})", self.ports.len()));
        }
        if self.nets.len() > MAX_NETS {
            return Err(format!("at most {MAX_NETS} addresses per filter (got {})", self.nets.len()));
        }
        Ok(())
    }

    /// The BPF programs' form of the filter.
    pub(crate) fn encode(&self) -> Result<RawFilter, String> {
        self.validate()?;
        let mut raw = RawFilter { all: u32::from(self.all), nports: self.ports.len() as u32, ..RawFilter::default() };
        raw.ports[..self.ports.len()].copy_from_slice(&self.ports);
        raw.nnets = self.nets.len() as u32;
        for (slot, net) in raw.nets.iter_mut().zip(&self.nets) {
            let net = net.normalized();
            *slot = match net.addr {
                IpAddr::V4(a) => {
                    let mut addr = [0; 16];
                    addr[..4].copy_from_slice(&a.octets());
                    RawNet { family: AF_INET, prefix_len: u32::from(net.prefix_len), addr }
                }
                IpAddr::V6(a) => RawNet { family: AF_INET6, prefix_len: u32::from(net.prefix_len), addr: a.octets() },
            };
        }
        Ok(raw)
    }

    /// The selection semantics, spelled out in Rust for the tests that hold the BPF programs to it.
    #[cfg(test)]
    pub(crate) fn matches(&self, local: (IpAddr, u16), remote: (IpAddr, u16)) -> bool {
        if self.all {
            return true;
        }
        if !self.selects_something() {
            return false;
        }
        let port_ok = self.ports.is_empty() || self.ports.iter().any(|p| *p == local.1 || *p == remote.1);
        let net_ok = self.nets.is_empty() || self.nets.iter().any(|n| n.contains(local.0) || n.contains(remote.0));
        port_ok && net_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nets_parse_with_and_without_a_length() {
        assert_eq!("10.0.0.0/8".parse::<Net>().unwrap(), Net { addr: "10.0.0.0".parse().unwrap(), prefix_len: 8 });
        assert_eq!("10.1.2.3".parse::<Net>().unwrap().prefix_len, 32);
        assert_eq!("fd00::/8".parse::<Net>().unwrap().prefix_len, 8);
        assert_eq!("::1".parse::<Net>().unwrap().prefix_len, 128);
        // A v4-mapped prefix is the IPv4 one.
        assert_eq!("::ffff:10.0.0.0/104".parse::<Net>().unwrap(), "10.0.0.0/8".parse::<Net>().unwrap());
        for bad in ["10.0.0.0/33", "fd00::/129", "nonsense", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Net>().is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn an_empty_filter_is_refused() {
        assert!(Filter::default().validate().is_err());
        assert!(Filter::all().validate().is_ok());
        assert!(Filter { ports: vec![5201], ..Filter::default() }.validate().is_ok());
        let too_many = Filter { ports: (1..=9).collect(), ..Filter::default() };
        assert!(too_many.validate().is_err());
        let too_many = Filter { nets: vec!["10.0.0.0/8".parse().unwrap(); 5], ..Filter::default() };
        assert!(too_many.encode().is_err());
    }

    #[test]
    fn encoding_lays_out_ports_and_prefixes() {
        let f =
            Filter { all: false, ports: vec![5201, 80], nets: vec!["10.1.0.0/16".parse().unwrap(), "fd00::/8".parse().unwrap()] };
        let raw = f.encode().unwrap();
        assert_eq!((raw.all, raw.nports, raw.nnets), (0, 2, 2));
        assert_eq!(&raw.ports[..3], &[5201, 80, 0]);
        assert_eq!(raw.nets[0].family, AF_INET);
        assert_eq!(raw.nets[0].prefix_len, 16);
        assert_eq!(&raw.nets[0].addr[..4], &[10, 1, 0, 0]);
        assert_eq!(raw.nets[1].family, AF_INET6);
        assert_eq!(raw.nets[1].addr[0], 0xfd);
        assert_eq!(raw.nets[2], RawNet::default());
    }

    fn ep(s: &str) -> (IpAddr, u16) {
        let (a, p) = s.rsplit_once(':').unwrap();
        (a.trim_matches(['[', ']']).parse().unwrap(), p.parse().unwrap())
    }

    #[test]
    fn ports_and_addresses_must_both_hold() {
        let f = Filter { all: false, ports: vec![5201], nets: vec!["10.0.0.0/8".parse().unwrap()] };
        assert!(f.matches(ep("10.0.0.1:40000"), ep("192.168.1.1:5201")));
        assert!(f.matches(ep("192.168.1.1:5201"), ep("10.9.9.9:40000")));
        assert!(!f.matches(ep("10.0.0.1:40000"), ep("10.0.0.2:80")));
        assert!(!f.matches(ep("192.168.1.1:40000"), ep("192.168.1.2:5201")));
        let ports = Filter { ports: vec![80, 443], ..Filter::default() };
        assert!(ports.matches(ep("1.1.1.1:443"), ep("2.2.2.2:9999")));
        assert!(!ports.matches(ep("1.1.1.1:8443"), ep("2.2.2.2:9999")));
        let v6 = Filter { nets: vec!["fd00::/8".parse().unwrap()], ..Filter::default() };
        assert!(v6.matches(ep("[fd12::1]:1"), ep("[2001:db8::1]:2")));
        assert!(!v6.matches(ep("10.0.0.1:1"), ep("10.0.0.2:2")));
        assert!(Filter::all().matches(ep("1.1.1.1:1"), ep("2.2.2.2:2")));
        assert!(!Filter::default().matches(ep("1.1.1.1:1"), ep("2.2.2.2:2")));
    }
}
