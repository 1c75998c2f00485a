//! Kernel TCP bulk flows between the namespaces, for the demo and the tests: a receiver that
//! counts what it gets, a sender that writes as fast as the congestion control lets it, and
//! `TCP_INFO` samples (RTT, cwnd, delivery rate) of the sending socket.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::topology::{Side, Topology};

/// How often blocked socket calls wake up to check whether to stop.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// `tcpi_options` bit: timestamps negotiated (<linux/tcp.h>).
const TCPI_OPT_TIMESTAMPS: u8 = 1;
/// `TCPI_OPT_USEC_TS` (Linux 6.7): this end's TSvals are in microseconds.
const TCPI_OPT_USEC_TS: u8 = 64;
/// Bytes per write() of the bulk sender.
const WRITE_CHUNK_BYTES: usize = 128 * 1024;

/// A snapshot of a socket's `TCP_INFO`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpSample {
    pub rtt_us: u32,
    pub min_rtt_us: u32,
    pub cwnd_pkts: u32,
    pub mss: u32,
    pub bytes_acked: u64,
    pub delivery_rate_bps: f64,
    pub delivered_ce: u32,
    pub total_retrans: u32,
    /// Whether TCP timestamps were negotiated (12 more header bytes per segment).
    pub timestamps: bool,
    /// Whether this end sends microsecond timestamps (its route has `tcp_usec_ts`).
    pub usec_timestamps: bool,
}

/// The kernel's `TCP_INFO` of a TCP socket: the one unsafe `getsockopt` for it, shared with
/// `ccp-lab`, which reads other fields.
pub fn raw_tcp_info(stream: &TcpStream) -> std::io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid fd, buffer and length (the kernel writes at most `len` bytes).
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(info)
}

/// Reads `TCP_INFO` from a connected TCP socket.
pub fn tcp_info(stream: &TcpStream) -> std::io::Result<TcpSample> {
    let info = raw_tcp_info(stream)?;
    Ok(TcpSample {
        rtt_us: info.tcpi_rtt,
        min_rtt_us: info.tcpi_min_rtt,
        cwnd_pkts: info.tcpi_snd_cwnd,
        mss: info.tcpi_snd_mss,
        bytes_acked: info.tcpi_bytes_acked,
        delivery_rate_bps: info.tcpi_delivery_rate as f64 * 8.0,
        delivered_ce: info.tcpi_delivered_ce,
        total_retrans: info.tcpi_total_retrans,
        timestamps: info.tcpi_options & TCPI_OPT_TIMESTAMPS != 0,
        usec_timestamps: info.tcpi_options & TCPI_OPT_USEC_TS != 0,
    })
}

/// Sets the socket's congestion control (any algorithm the kernel has registered, including a
/// BPF struct_ops one such as the eBPF datapath's).
pub fn set_congestion_control(stream: &TcpStream, name: &str) -> Result<()> {
    // SAFETY: valid fd and buffer.
    let r = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(Error::param(
            "--cc",
            format!("{name:?}: {} (see /proc/sys/net/ipv4/tcp_available_congestion_control)", std::io::Error::last_os_error()),
        ));
    }
    Ok(())
}

/// A TCP sink in the receiver's namespace that counts payload bytes.
pub struct BulkReceiver {
    bytes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BulkReceiver {
    /// Listens on the receiver's address, `port`, and accepts one connection.
    pub fn listen(topology: &Topology, port: u16) -> Result<BulkReceiver> {
        BulkReceiver::listen_with_rcvbuf(topology, port, None)
    }

    /// As [`BulkReceiver::listen`], with the receive buffer (hence the advertised window) capped
    /// at `rcvbuf` bytes: a window a little above the path's BDP keeps the bottleneck busy with a
    /// standing queue that never overflows, so a kernel TCP flow saturates the link without loss.
    pub fn listen_with_rcvbuf(topology: &Topology, port: u16, rcvbuf: Option<usize>) -> Result<BulkReceiver> {
        let addr = SocketAddr::from((topology.config().receiver_addr, port));
        let listener = topology
            .run_in(Side::Receiver, move || TcpListener::bind(addr))?
            .map_err(|e| Error::io(format!("listening on {addr} in the receiver namespace"), e))?;
        if let Some(bytes) = rcvbuf {
            let v = libc::c_int::try_from(bytes).map_err(|_| Error::param("rcvbuf", "too large"))?;
            // SAFETY: valid fd and option buffer.
            let r = unsafe {
                libc::setsockopt(
                    listener.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUF,
                    (&v as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r != 0 {
                return Err(Error::last_os("SO_RCVBUF"));
            }
        }
        listener.set_nonblocking(true).map_err(|e| Error::io("set_nonblocking", e))?;
        let bytes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (Arc::clone(&bytes), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut conn = loop {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                match listener.accept() {
                    Ok((c, _)) => break c,
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            };
            let _ = conn.set_nonblocking(false);
            let _ = conn.set_read_timeout(Some(POLL_INTERVAL));
            let mut buf = vec![0u8; 256 * 1024];
            while !s.load(Ordering::Relaxed) {
                match conn.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        b.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => return,
                }
            }
        });
        Ok(BulkReceiver { bytes, stop, thread: Some(thread) })
    }

    /// Payload bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Drop for BulkReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A bulk TCP sender in the sender's namespace, writing until dropped.
pub struct BulkSender {
    stream: TcpStream,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BulkSender {
    /// Connects to the receiver's address, `port`, with congestion control `cc` (the namespace's
    /// default when `None`).
    pub fn connect(topology: &Topology, port: u16, cc: Option<&str>) -> Result<BulkSender> {
        let dst = SocketAddr::from((topology.config().receiver_addr, port));
        let stream = topology
            .run_in(Side::Sender, move || TcpStream::connect_timeout(&dst, Duration::from_secs(5)))?
            .map_err(|e| Error::io(format!("connecting to {dst} from the sender namespace"), e))?;
        if let Some(cc) = cc {
            set_congestion_control(&stream, cc)?;
        }
        let mut writer = stream.try_clone().map_err(|e| Error::io("dup of the sender socket", e))?;
        writer.set_write_timeout(Some(POLL_INTERVAL)).map_err(|e| Error::io("set_write_timeout", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let chunk = vec![0x5au8; WRITE_CHUNK_BYTES];
            while !s.load(Ordering::Relaxed) {
                match writer.write(&chunk) {
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => return,
                }
            }
        });
        Ok(BulkSender { stream, stop, thread: Some(thread) })
    }

    pub fn info(&self) -> std::io::Result<TcpSample> {
        tcp_info(&self.stream)
    }

    /// The connection's local port (to match QCN notifications to the flow).
    pub fn local_port(&self) -> Option<u16> {
        self.stream.local_addr().ok().map(|a| a.port())
    }
}

impl Drop for BulkSender {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// IP bytes on the wire per full-sized segment of a flow (payload + IPv4 + TCP + timestamps), to
/// convert goodput into link throughput.
pub fn wire_bytes_per_segment(sample: &TcpSample) -> u32 {
    const IPV4_TCP_HEADERS: u32 = 40;
    const TIMESTAMP_OPTION: u32 = 12;
    sample.mss + IPV4_TCP_HEADERS + if sample.timestamps { TIMESTAMP_OPTION } else { 0 }
}
