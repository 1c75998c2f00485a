//! Socket plumbing the standard library does not offer: TCP sockets whose congestion control is
//! set *before* `connect`/`listen` (so the flow is born with it — the eBPF datapath's new-flow
//! path, not a mid-flow switch as with iperf3's `-C`), and `TCP_INFO` snapshots.

use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::{Error, Result};

/// `tcpi_options` bit: ECN negotiated (<linux/tcp.h> TCPI_OPT_ECN).
const TCPI_OPT_ECN: u8 = 8;
/// Listen backlog (Poisson arrivals can bunch up).
const BACKLOG: libc::c_int = 256;

/// A snapshot of a TCP socket's `TCP_INFO`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpInfo {
    pub srtt_us: u32,
    pub cwnd_pkts: u32,
    /// bits/s, as the kernel's rate sampler last measured it.
    pub delivery_rate_bps: f64,
    pub pacing_rate_bps: f64,
    pub delivered: u32,
    pub delivered_ce: u32,
    /// CE-marked packets this socket received (counted by the AccECN-era kernel on receivers).
    pub received_ce: u32,
    pub total_retrans: u32,
    /// Segments sent, retransmissions and pure ACKs included (netstat's OutSegs for one socket).
    pub segs_out: u32,
    /// Data segments sent, retransmissions included.
    pub data_segs_out: u32,
    pub ecn_negotiated: bool,
}

fn setsockopt_bytes(fd: RawFd, level: libc::c_int, opt: libc::c_int, value: &[u8]) -> std::io::Result<()> {
    // SAFETY: valid fd, buffer and length.
    let r = unsafe { libc::setsockopt(fd, level, opt, value.as_ptr().cast(), value.len() as libc::socklen_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> std::io::Result<()> {
    setsockopt_bytes(fd, level, opt, &value.to_ne_bytes())
}

/// Sets a socket's congestion control; the error says how to see what is registered.
pub fn set_congestion_control(fd: RawFd, name: &str) -> Result<()> {
    setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes()).map_err(|e| {
        Error::Run(format!(
            "setting congestion control {name:?}: {e} (registered: {})",
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default().trim()
        ))
    })
}

fn tcp_socket() -> Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::last_os("socket"));
    }
    // SAFETY: fd is fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

/// Connects to `dst` from the calling thread's namespace, with congestion control `cc` set
/// before the SYN, giving up after `timeout`.
pub fn tcp_connect(dst: SocketAddrV4, cc: Option<&str>, timeout: Duration) -> Result<TcpStream> {
    let fd = tcp_socket()?;
    let raw = fd.as_raw_fd();
    if let Some(cc) = cc {
        set_congestion_control(raw, cc)?;
    }
    let sa = sockaddr(dst);
    // Non-blocking connect, so the timeout is ours rather than the kernel's SYN retries.
    // SAFETY: valid fd.
    unsafe { libc::fcntl(raw, libc::F_SETFL, libc::fcntl(raw, libc::F_GETFL) | libc::O_NONBLOCK) };
    // SAFETY: valid fd and address.
    let r = unsafe {
        libc::connect(raw, (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(Error::io(format!("connecting to {dst}"), e));
        }
        let mut pfd = libc::pollfd { fd: raw, events: libc::POLLOUT, revents: 0 };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n == 0 {
            return Err(Error::Run(format!("connecting to {dst}: no answer within {timeout:?}")));
        }
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid fd and buffer.
        unsafe { libc::getsockopt(raw, libc::SOL_SOCKET, libc::SO_ERROR, (&mut err as *mut libc::c_int).cast(), &mut len) };
        if n < 0 || err != 0 {
            return Err(Error::io(
                format!("connecting to {dst}"),
                std::io::Error::from_raw_os_error(if n < 0 { libc::EIO } else { err }),
            ));
        }
    }
    let stream = TcpStream::from(fd);
    stream.set_nonblocking(false).map_err(|e| Error::io("set_nonblocking", e))?;
    Ok(stream)
}

/// Listens on `addr` (in the calling thread's namespace); accepted sockets inherit `cc` (the
/// kernel copies a listener's explicitly set congestion control to its children).
pub fn tcp_listen(addr: SocketAddrV4, cc: Option<&str>) -> Result<TcpListener> {
    let fd = tcp_socket()?;
    let raw = fd.as_raw_fd();
    setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).map_err(|e| Error::io("SO_REUSEADDR", e))?;
    if let Some(cc) = cc {
        set_congestion_control(raw, cc)?;
    }
    let sa = sockaddr(addr);
    // SAFETY: valid fd and address.
    let r = unsafe {
        libc::bind(raw, (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
    };
    if r != 0 {
        return Err(Error::last_os(format!("binding {addr}")));
    }
    // SAFETY: valid, bound fd.
    if unsafe { libc::listen(raw, BACKLOG) } != 0 {
        return Err(Error::last_os(format!("listening on {addr}")));
    }
    Ok(TcpListener::from(fd))
}

/// Makes `close` abort the connection (RST) instead of draining the send buffer: a flow that
/// reaches its stop time ends at once, so its congestion control is released (and the agent sees
/// the flow close) before the run's agent and namespaces go away.
pub fn abort_on_close(stream: &TcpStream) -> Result<()> {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: linger is plain old data; valid fd.
    let bytes =
        unsafe { std::slice::from_raw_parts((&l as *const libc::linger).cast::<u8>(), std::mem::size_of::<libc::linger>()) };
    setsockopt_bytes(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, bytes).map_err(|e| Error::io("SO_LINGER", e))
}

/// Reads `TCP_INFO`.
pub fn tcp_info(stream: &TcpStream) -> std::io::Result<TcpInfo> {
    let info = ccp_router::tcp::raw_tcp_info(stream)?;
    Ok(TcpInfo {
        srtt_us: info.tcpi_rtt,
        cwnd_pkts: info.tcpi_snd_cwnd,
        delivery_rate_bps: info.tcpi_delivery_rate as f64 * 8.0,
        pacing_rate_bps: info.tcpi_pacing_rate as f64 * 8.0,
        delivered: info.tcpi_delivered,
        delivered_ce: info.tcpi_delivered_ce,
        received_ce: info.tcpi_received_ce,
        total_retrans: info.tcpi_total_retrans,
        segs_out: info.tcpi_segs_out,
        data_segs_out: info.tcpi_data_segs_out,
        ecn_negotiated: info.tcpi_options & TCPI_OPT_ECN != 0,
    })
}

/// The congestion control a socket actually has.
pub fn congestion_control(stream: &TcpStream) -> std::io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: valid fd, buffer and length.
    let r = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = buf[..len as usize].iter().position(|&b| b == 0).unwrap_or(len as usize);
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}
