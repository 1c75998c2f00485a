//! Congestion notification messages (CNMs) from QCN congestion points (annulus.md §8.3).
//!
//! A congestion point (ccp-router `--qdisc qcn`, a switch program) samples the packets it queues
//! and sends the sampled packet's source a UDP datagram carrying the quantized feedback and the
//! first bytes of the sampled packet (`ccp_cnm_wire`, the one definition of the format).
//! This module is the host end: one UDP socket, **off unless configured** (`[cnm] listen`,
//! `run --cnm-listen`), optionally bound inside another network namespace (`netns`: a CNM is
//! addressed to the sender's own address, so it arrives in the sender's namespace), served by the
//! runtime's event loop like the datapaths.
//!
//! Each datagram is checked in this order, and dropped with its reason counted:
//! 1. the source address is in `allow_from` (`not_allowed`), before a byte of the payload is
//!    parsed. The list is required: any local user can send UDP to the port, and a forged CNM
//!    would cut another user's flow. An unprivileged process cannot send from an address the
//!    host does not own, so listing the congestion points' own addresses (ccp-router's
//!    `--router-addr`, a switch's) keeps local users out; `bind` warns when a listed prefix holds
//!    one of the namespace's own addresses;
//! 2. it is a CNM whose sample holds an IP header and the TCP ports (`malformed`);
//! 3. the sampled packet is TCP (`not_tcp`) over IPv4 (`ipv6`: the flow table's addresses are
//!    IPv4, as every datapath reports them, v4-mapped IPv6 included).
//!
//! The runtime then finds the flow by the sample's 5-tuple as is (it is the sender's own outgoing
//! direction) and delivers the feedback as a report at once (`FlowTable::network_feedback`), or
//! counts `unknown_flow` (none, or closed), `other_netns` (an eBPF flow with that tuple lives in
//! another namespace than the socket) or `ambiguous_flow`.
//!
//! Floods: at most `max_per_pass` datagrams are read per pass of the event loop; the rest wait in
//! a receive buffer of bounded size (`recv_buffer_bytes`; what overflows it is dropped by the
//! kernel and counted, `socket_overflows`, from SO_RXQ_OVFL) while timers, the control socket and
//! the datapaths get their turn. Drops are logged at most once per reason every ten seconds, with
//! the number not logged.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccp_cnm_wire::Cnm;
use ccp_contract::NetworkFeedback;
use ipnet::IpNet;
use mio::{Interest, Registry, Token};
use serde::Serialize;
use serde_json::json;
use tracing::{info, warn};

use crate::clock::Now;
use crate::datapath::Tuple;
use crate::latency::Histogram;
use crate::log_limit::LogLimit;

pub const TOKEN: Token = Token(usize::MAX - 3);

/// Default receive buffer asked for, bytes (the kernel doubles it for bookkeeping): a few
/// hundred CNMs.
pub const DEFAULT_RECV_BUFFER_BYTES: usize = 128 * 1024;
pub const RECV_BUFFER_RANGE: (usize, usize) = (4096, 16 << 20);
/// Datagrams read per pass of the event loop unless configured.
pub const DEFAULT_MAX_PER_PASS: usize = 64;
pub const MAX_PER_PASS_RANGE: (usize, usize) = (1, 4096);
/// Larger than any CNM (32 + 64 bytes): a longer datagram is reported truncated and dropped.
const RECV_BYTES: usize = 256;
/// CNM sample times further from the agent's CLOCK_MONOTONIC than this are another host's clock.
const MAX_PLAUSIBLE_AGE: Duration = Duration::from_secs(10);
const IP_PROTO_TCP: u8 = 6;
/// From linux/asm-generic/socket.h (not exported by the libc crate on every target).
const SO_RXQ_OVFL: libc::c_int = 40;
const SO_NETNS_COOKIE: libc::c_int = 71;

/// `[cnm]` resolved: where to listen and whom to believe.
#[derive(Debug, Clone, PartialEq)]
pub struct CnmConfig {
    pub listen: SocketAddr,
    /// Bind inside this network namespace (/run/netns/NAME, /proc/PID/ns/net); none: the agent's.
    pub netns: Option<PathBuf>,
    /// Sources whose datagrams are read as CNMs (never empty).
    pub allow_from: Vec<IpNet>,
    pub max_per_pass: usize,
    pub recv_buffer_bytes: usize,
}

/// Why a datagram was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    NotAllowed,
    Malformed,
    NotTcp,
    Ipv6,
    UnknownFlow,
    OtherNetns,
    AmbiguousFlow,
    ReceiveError,
}

impl Reason {
    pub const ALL: [Reason; 8] = [
        Reason::NotAllowed,
        Reason::Malformed,
        Reason::NotTcp,
        Reason::Ipv6,
        Reason::UnknownFlow,
        Reason::OtherNetns,
        Reason::AmbiguousFlow,
        Reason::ReceiveError,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::NotAllowed => "not_allowed",
            Reason::Malformed => "malformed",
            Reason::NotTcp => "not_tcp",
            Reason::Ipv6 => "ipv6",
            Reason::UnknownFlow => "unknown_flow",
            Reason::OtherNetns => "other_netns",
            Reason::AmbiguousFlow => "ambiguous_flow",
            Reason::ReceiveError => "receive_error",
        }
    }
}

/// What the listener counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CnmCounters {
    /// Datagrams read.
    pub received: u64,
    /// CNMs delivered to a flow's controller.
    pub delivered: u64,
    /// Delivered CNMs whose decision changed the flow's settings (a command was sent).
    pub actions: u64,
    pub not_allowed: u64,
    pub malformed: u64,
    pub not_tcp: u64,
    pub ipv6: u64,
    pub unknown_flow: u64,
    pub other_netns: u64,
    pub ambiguous_flow: u64,
    pub receive_errors: u64,
    /// Datagrams the kernel dropped because the receive buffer was full.
    pub socket_overflows: u64,
    /// Passes that stopped at `max_per_pass` with datagrams possibly left for the next pass.
    pub deferred_passes: u64,
}

impl CnmCounters {
    fn slot(&mut self, r: Reason) -> &mut u64 {
        match r {
            Reason::NotAllowed => &mut self.not_allowed,
            Reason::Malformed => &mut self.malformed,
            Reason::NotTcp => &mut self.not_tcp,
            Reason::Ipv6 => &mut self.ipv6,
            Reason::UnknownFlow => &mut self.unknown_flow,
            Reason::OtherNetns => &mut self.other_netns,
            Reason::AmbiguousFlow => &mut self.ambiguous_flow,
            Reason::ReceiveError => &mut self.receive_errors,
        }
    }

    pub fn get(&self, r: Reason) -> u64 {
        match r {
            Reason::NotAllowed => self.not_allowed,
            Reason::Malformed => self.malformed,
            Reason::NotTcp => self.not_tcp,
            Reason::Ipv6 => self.ipv6,
            Reason::UnknownFlow => self.unknown_flow,
            Reason::OtherNetns => self.other_netns,
            Reason::AmbiguousFlow => self.ambiguous_flow,
            Reason::ReceiveError => self.receive_errors,
        }
    }
}

/// A CNM that passed the checks: feedback for the IPv4 TCP flow `tuple`.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub tuple: Tuple,
    pub feedback: NetworkFeedback,
    /// The congestion point that sent it.
    pub cpid: u32,
    pub from: IpAddr,
    /// When the agent read it: the start of the batch it was read in.
    pub received: Instant,
    /// From the congestion point's sample to the read, when the CNM's timestamp is on this
    /// host's CLOCK_MONOTONIC (a congestion point on this host, such as ccp-router).
    pub age_us: Option<u64>,
}

/// A datagram that is not delivered, and what to say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub reason: Reason,
    pub detail: String,
}

fn dropped(reason: Reason, detail: impl Into<String>) -> Dropped {
    Dropped { reason, detail: detail.into() }
}

/// A v4-mapped IPv6 address as the IPv4 address it is.
fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

fn v4(a: IpAddr) -> Option<Ipv4Addr> {
    match canonical(a) {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    }
}

/// Checks one datagram from `from` (the allow-list first, then the payload) and turns it into
/// a notice. `truncated`: the datagram was longer than any CNM; `now`: when it was read.
pub fn classify(from: IpAddr, payload: &[u8], truncated: bool, allow_from: &[IpNet], now: Now) -> Result<Notice, Dropped> {
    let from = canonical(from);
    if !allow_from.iter().any(|n| n.contains(&from)) {
        return Err(dropped(Reason::NotAllowed, "source not in cnm.allow_from"));
    }
    if truncated {
        return Err(dropped(Reason::Malformed, format!("datagram longer than {RECV_BYTES} bytes; no CNM is")));
    }
    let cnm = Cnm::decode(payload).map_err(|e| dropped(Reason::Malformed, e.to_string()))?;
    let Some(flow) = cnm.flow() else {
        return Err(dropped(Reason::Malformed, format!("the {}-byte sample holds no complete IP header", cnm.sample.len())));
    };
    if flow.protocol != IP_PROTO_TCP {
        return Err(dropped(Reason::NotTcp, format!("sampled packet is IP protocol {}", flow.protocol)));
    }
    let (Some(src), Some(dst)) = (v4(flow.src), v4(flow.dst)) else {
        return Err(dropped(Reason::Ipv6, format!("sampled packet {} -> {} is IPv6; flows are IPv4", flow.src, flow.dst)));
    };
    if flow.src_port == 0 && flow.dst_port == 0 {
        return Err(dropped(Reason::Malformed, "the sample ends before the TCP ports"));
    }
    let age_us = {
        let age = now.mono_ns.checked_sub(cnm.timestamp_ns).map(Duration::from_nanos);
        age.filter(|a| *a <= MAX_PLAUSIBLE_AGE).map(|a| a.as_micros() as u64)
    };
    Ok(Notice {
        tuple: ((src.into(), flow.src_port), (dst.into(), flow.dst_port)),
        feedback: NetworkFeedback::Qcn {
            fb_quantized: cnm.qfb,
            q_off_bytes: i64::from(cnm.q_off_bytes),
            q_delta_bytes: i64::from(cnm.q_delta_bytes),
        },
        cpid: cnm.cpid,
        from,
        received: now.instant,
        age_us,
    })
}

pub struct CnmListener {
    socket: mio::net::UdpSocket,
    local: SocketAddr,
    netns: Option<PathBuf>,
    netns_cookie: Option<u64>,
    allow_from: Vec<IpNet>,
    max_per_pass: usize,
    recv_buffer_bytes: usize,
    /// The last pass stopped at its budget: the next loop pass reads again without waiting.
    pending: bool,
    /// SO_RXQ_OVFL's running count, as last seen.
    overflows_seen: u32,
    pub counters: CnmCounters,
    throttle: [LogLimit; Reason::ALL.len()],
    /// Read → the flow's decision applied.
    latency: Histogram,
    /// The congestion point's sample → read (same-host congestion points only).
    age: Histogram,
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid int option value of the size given.
    let r = unsafe { libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), size_of::<libc::c_int>() as u32) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn getsockopt<T: Copy + Default>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: writes at most `len` bytes into `v`.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut T).cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Every address of the calling thread's network namespace, loopback included.
fn local_addrs() -> Vec<IpAddr> {
    let mut out = vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)];
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below.
    if unsafe { libc::getifaddrs(&mut ifa) } != 0 {
        return out;
    }
    let mut cur = ifa;
    while !cur.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let a = unsafe { (*cur).ifa_addr };
        if !a.is_null() {
            // SAFETY: ifa_addr points to a sockaddr of the family it names.
            match i32::from(unsafe { (*a).sa_family }) {
                libc::AF_INET => {
                    // SAFETY: an AF_INET address is a sockaddr_in.
                    let sin = unsafe { &*(a as *const libc::sockaddr_in) };
                    out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                }
                libc::AF_INET6 => {
                    // SAFETY: an AF_INET6 address is a sockaddr_in6.
                    let sin6 = unsafe { &*(a as *const libc::sockaddr_in6) };
                    out.push(IpAddr::V6(sin6.sin6_addr.s6_addr.into()));
                }
                _ => {}
            }
        }
        // SAFETY: as above.
        cur = unsafe { (*cur).ifa_next };
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(ifa) };
    out
}

/// The bind's error with what to do about it.
fn bind_error(e: io::Error, cfg: &CnmConfig) -> anyhow::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EADDRINUSE) => format!(
            " (another process holds UDP port {} and would get the CNMs instead: `ss -ulpn 'sport = :{}'` names it)",
            cfg.listen.port(),
            cfg.listen.port()
        ),
        Some(libc::EACCES) => " (ports below 1024 need CAP_NET_BIND_SERVICE; the default CNM port is 7470)".to_string(),
        Some(libc::EADDRNOTAVAIL) => {
            " (no interface of that namespace has the address: set cnm.netns to the sender's namespace?)".to_string()
        }
        _ => String::new(),
    };
    anyhow::anyhow!("binding the CNM listener {}: {e}{hint}", cfg.listen)
}

impl CnmListener {
    /// Binds the socket (inside `cfg.netns` when set), sizes its receive buffer and turns on
    /// overflow counting. Warns when the allow-list admits addresses local users can send from.
    pub fn bind(cfg: &CnmConfig) -> anyhow::Result<CnmListener> {
        let listen = cfg.listen;
        let make = move || std::net::UdpSocket::bind(listen).map(|s| (s, local_addrs()));
        let (sock, locals) = match &cfg.netns {
            None => make().map_err(|e| bind_error(e, cfg))?,
            Some(path) => {
                let ns = ccp_ebpf::netns::Netns::open(path)
                    .with_context(|| format!("cnm.netns {}: not a network namespace we can open", path.display()))?;
                ns.run(make)
                    .with_context(|| format!("entering network namespace {} (needs CAP_SYS_ADMIN)", path.display()))?
                    .map_err(|e| bind_error(e, cfg))?
            }
        };
        sock.set_nonblocking(true).context("CNM socket: non-blocking")?;
        let fd = sock.as_raw_fd();
        let want = cfg.recv_buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, want).context("CNM socket: SO_RCVBUF")?;
        let recv_buffer_bytes = getsockopt::<libc::c_int>(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).map_or(0, |v| v.max(0) as usize);
        setsockopt_int(fd, libc::SOL_SOCKET, SO_RXQ_OVFL, 1).context("CNM socket: SO_RXQ_OVFL")?;
        // Kernels before 5.14 have no SO_NETNS_COOKIE: flows are then matched by tuple alone.
        let netns_cookie = getsockopt::<u64>(fd, libc::SOL_SOCKET, SO_NETNS_COOKIE).ok();
        let local = sock.local_addr().context("CNM socket address")?;
        for net in &cfg.allow_from {
            if let Some(a) = locals.iter().find(|a| net.contains(*a)) {
                warn!(
                    allow_from = %net, local_address = %a,
                    "cnm.allow_from admits an address of the listening namespace: any local user can send CNMs from it and cut \
                     other users' flows; list only the congestion points' own addresses"
                );
            }
        }
        info!(
            addr = %local,
            netns = %cfg.netns.as_ref().map_or("(the agent's)".to_string(), |p| p.display().to_string()),
            allow_from = ?cfg.allow_from.iter().map(ToString::to_string).collect::<Vec<_>>(),
            recv_buffer_bytes,
            max_per_pass = cfg.max_per_pass,
            "CNM listener"
        );
        Ok(CnmListener {
            socket: mio::net::UdpSocket::from_std(sock),
            local,
            netns: cfg.netns.clone(),
            netns_cookie,
            allow_from: cfg.allow_from.clone(),
            max_per_pass: cfg.max_per_pass.max(1),
            recv_buffer_bytes,
            pending: false,
            overflows_seen: 0,
            counters: CnmCounters::default(),
            throttle: [LogLimit::default(); Reason::ALL.len()],
            latency: Histogram::default(),
            age: Histogram::default(),
        })
    }

    pub fn register(&mut self, registry: &Registry) -> io::Result<()> {
        registry.register(&mut self.socket, TOKEN, Interest::READABLE)
    }

    pub fn owns(token: Token) -> bool {
        token == TOKEN
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The cookie of the namespace the socket lives in, where the kernel tells it.
    pub fn netns_cookie(&self) -> Option<u64> {
        self.netns_cookie
    }

    /// Datagrams may be waiting that the last pass left for this one.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Reads at most `max_per_pass` datagrams: notices go to `out`, the rest are counted and
    /// dropped. Sets `pending` when it stopped at the budget rather than on an empty socket.
    /// `now`: when the runtime started the batch, the read time of every datagram in it.
    pub fn read_batch(&mut self, out: &mut Vec<Notice>, now: Now) {
        self.pending = false;
        let mut buf = [0u8; RECV_BYTES];
        for _ in 0..self.max_per_pass {
            match self.recv(&mut buf) {
                Ok((n, from, truncated)) => {
                    self.counters.received += 1;
                    match classify(from.ip(), &buf[..n], truncated, &self.allow_from, now) {
                        Ok(notice) => out.push(notice),
                        Err(d) => self.drop_one(d.reason, Some(from.ip()), &d.detail, now),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.drop_one(Reason::ReceiveError, None, &e.to_string(), now),
            }
        }
        self.pending = true;
        self.counters.deferred_passes += 1;
    }

    /// recvmsg: the payload, its source, whether it was truncated; SO_RXQ_OVFL's count on the side.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, bool)> {
        let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut control = [0u64; 8];
        // SAFETY: zeroed msghdr is a valid empty header; every pointer set below outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = name.as_mut_ptr().cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: recvmsg on our socket with the buffers described by `msg`.
        let n = unsafe { libc::recvmsg(self.socket.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: walking the control messages recvmsg wrote, within msg_controllen.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !c.is_null() {
            // SAFETY: c points into `control`, at a header the kernel wrote.
            let h = unsafe { &*c };
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == SO_RXQ_OVFL {
                // SAFETY: SO_RXQ_OVFL's payload is one u32.
                let count = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()) };
                self.counters.socket_overflows += u64::from(count.wrapping_sub(self.overflows_seen));
                self.overflows_seen = count;
            }
            // SAFETY: as above.
            c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
        }
        // SAFETY: recvmsg filled in a sockaddr of msg_namelen bytes.
        let from = sockaddr(unsafe { name.assume_init_ref() })
            .ok_or_else(|| io::Error::other("a datagram from an address that is neither IPv4 nor IPv6"))?;
        Ok((n as usize, from, msg.msg_flags & libc::MSG_TRUNC != 0))
    }

    /// Counts a datagram that is not delivered; logs it unless this reason logged recently.
    pub fn drop_one(&mut self, reason: Reason, from: Option<IpAddr>, detail: &str, now: Now) {
        *self.counters.slot(reason) += 1;
        let Some(suppressed) = self.throttle[Reason::ALL.iter().position(|r| *r == reason).unwrap_or(0)].allow(now.instant)
        else {
            return;
        };
        let from = from.map_or_else(|| "-".to_string(), |a| a.to_string());
        let count = self.counters.get(reason);
        match reason {
            // Expected now and then: a flow that just closed, a flow not on the agent.
            Reason::UnknownFlow | Reason::NotTcp => {
                info!(reason = reason.name(), %from, detail, total = count, not_logged = suppressed, "CNM dropped")
            }
            _ => warn!(reason = reason.name(), %from, detail, total = count, not_logged = suppressed, "CNM dropped"),
        }
    }

    /// A notice reached its flow: `latency` from the read to the decision applied.
    pub fn delivered(&mut self, notice: &Notice, latency: Duration, action: bool) {
        self.counters.delivered += 1;
        self.counters.actions += u64::from(action);
        self.latency.record(latency.as_micros() as u64);
        if let Some(a) = notice.age_us {
            self.age.record(a);
        }
    }

    /// `ctl status`'s `cnm` object.
    pub fn status_json(&self) -> serde_json::Value {
        json!({
            "listen": self.local.to_string(),
            "netns": self.netns.as_ref().map(|p| p.display().to_string()),
            "netns_cookie": self.netns_cookie,
            "allow_from": self.allow_from.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "max_per_pass": self.max_per_pass,
            "recv_buffer_bytes": self.recv_buffer_bytes,
            "counters": self.counters,
            "read_to_action_us": self.latency.summary(),
            "sample_to_read_us": self.age.summary(),
        })
    }

    pub fn latency_summary(&self) -> crate::latency::Summary {
        self.latency.summary()
    }
}

/// A socket address from what recvmsg wrote.
fn sockaddr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in, which fits in sockaddr_storage.
            let sin = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::from((Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, sockaddr_in6.
            let sin6 = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::from((std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr), u16::from_be(sin6.sin6_port))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
