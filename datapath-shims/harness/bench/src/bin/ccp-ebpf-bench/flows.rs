//! Many concurrent flows over a namespace's loopback, each sending a little every few ms: enough
//! ACKs per flow for a report every interval, without saturating the machine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccp_ebpf::netns::Netns;

/// Raises the open-file limit to hold both ends of `n` connections.
pub fn raise_fd_limit(n: usize) -> anyhow::Result<()> {
    let want = (2 * n + 256) as libc::rlim_t;
    let lim = libc::rlimit { rlim_cur: want, rlim_max: want };
    // SAFETY: setrlimit with a valid struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        bail!("raising RLIMIT_NOFILE to {want}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn connect(addr: SocketAddr, cc: &str) -> anyhow::Result<TcpStream> {
    // SAFETY: a plain socket, owned by the TcpStream below once connected.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        bail!("socket: {}", std::io::Error::last_os_error());
    }
    // SAFETY: fd is ours; the stream closes it on every path from here.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: setsockopt with a valid buffer.
    if unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as u32) } != 0 {
        bail!("TCP_CONGESTION {cc}: {}", std::io::Error::last_os_error());
    }
    let SocketAddr::V4(v4) = addr else { bail!("IPv4 only") };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: connect with a valid sockaddr_in.
    if unsafe { libc::connect(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } != 0 {
        bail!("connect: {}", std::io::Error::last_os_error());
    }
    Ok(stream)
}

/// Runs `n` flows on `cc` inside `ns` for `duration`, each writing `chunk` bytes every `every`.
/// Returns the bytes written.
pub fn run(ns: &Netns, n: usize, cc: &str, duration: Duration, every: Duration, chunk: usize) -> anyhow::Result<u64> {
    ns.run(|| -> anyhow::Result<u64> {
        let listener = TcpListener::bind("127.0.0.1:0").context("listen")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop_rx = Arc::clone(&stop);
        let sink = std::thread::spawn(move || -> anyhow::Result<()> {
            let mut conns = Vec::with_capacity(n);
            for _ in 0..n {
                let (s, _) = listener.accept()?;
                s.set_nonblocking(true)?;
                conns.push(s);
            }
            let mut fds: Vec<libc::pollfd> =
                conns.iter().map(|c| libc::pollfd { fd: c.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
            let mut buf = vec![0u8; 1 << 16];
            while !stop_rx.load(Ordering::Relaxed) {
                // SAFETY: poll over a valid array of pollfds.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
                if ready <= 0 {
                    continue;
                }
                for (i, p) in fds.iter_mut().enumerate() {
                    if p.revents != 0 {
                        p.revents = 0;
                        while conns[i].read(&mut buf).is_ok_and(|r| r > 0) {}
                    }
                }
            }
            Ok(())
        });
        let mut clients = Vec::with_capacity(n);
        for _ in 0..n {
            let c = connect(addr, cc)?;
            c.set_nonblocking(true)?;
            clients.push(c);
        }
        let data = vec![1u8; chunk];
        let mut written = 0u64;
        let t0 = Instant::now();
        let mut next = t0;
        while t0.elapsed() < duration {
            for c in clients.iter_mut() {
                if let Ok(w) = c.write(&data) {
                    written += w as u64;
                }
            }
            next += every;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        drop(clients);
        stop.store(true, Ordering::Relaxed);
        sink.join().map_err(|_| anyhow::anyhow!("the receiving thread panicked"))??;
        Ok(written)
    })?
}
