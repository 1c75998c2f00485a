//! Many TCP connections on a chosen congestion control: the open-file limit to hold them, and a
//! connect that selects the congestion control before the handshake, so the flow starts on it.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::FromRawFd;

/// Raises the open-file limit to hold both ends of `n` connections.
pub fn raise_fd_limit(n: usize) -> anyhow::Result<()> {
    let want = (2 * n + 256) as libc::rlim_t;
    let lim = libc::rlimit { rlim_cur: want, rlim_max: want };
    // SAFETY: setrlimit with a valid struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        anyhow::bail!("raising RLIMIT_NOFILE to {want}: {}", io::Error::last_os_error());
    }
    Ok(())
}

/// A blocking connection to `addr` (IPv4) on congestion control `cc`. An unknown `cc` fails with
/// ENOENT (the name is not registered).
pub fn connect(addr: SocketAddr, cc: &str) -> io::Result<TcpStream> {
    let SocketAddr::V4(v4) = addr else { return Err(io::Error::new(io::ErrorKind::InvalidInput, "IPv4 only")) };
    // SAFETY: a plain socket, owned by the TcpStream below once created.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is ours; the stream closes it on every path from here.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: setsockopt with a valid buffer.
    if unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: connect with a valid sockaddr_in.
    if unsafe { libc::connect(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stream)
}
