//! Many TCP flows over the loopback of a namespace of our own, sending without pause, so every
//! flow is window-limited and its window moves the moment nothing holds it. The namespace's
//! loopback runs at MTU 1500 (a 64 KiB loopback MSS would make small windows meaningless).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One flow: the sending end (on the congestion control under test) and the receiving end.
pub struct Pair {
    pub client: TcpStream,
    server: TcpStream,
    pub v6: bool,
}

pub struct Farm {
    pub ns: String,
    cc: String,
    pub listen4: SocketAddr,
    listen6: SocketAddr,
    listeners: Arc<(TcpListener, TcpListener)>,
    pub pairs: Arc<Mutex<Vec<Option<Pair>>>>,
    stop: Arc<AtomicBool>,
    pump: Option<JoinHandle<()>>,
}

/// Runs `f` on a thread that joined the network namespace `ns`.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("open the namespace");
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: setns on this thread only, with a valid nsfs fd.
            assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns");
            f()
        })
        .join()
        .expect("thread in the namespace")
    })
}

fn socket_on(family: i32, cc: &str) -> TcpStream {
    // SAFETY: a plain socket, owned by the TcpStream at once.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: fd is ours.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: setsockopt with a valid buffer.
    let rc = unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as u32) };
    assert_eq!(rc, 0, "TCP_CONGESTION {cc}: {}", std::io::Error::last_os_error());
    s
}

fn connect(s: &TcpStream, addr: SocketAddr) {
    let rc = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: a valid sockaddr_in.
            unsafe {
                libc::connect(s.as_raw_fd(), (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32)
            }
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as u16,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: 0,
            };
            // SAFETY: a valid sockaddr_in6.
            unsafe {
                libc::connect(s.as_raw_fd(), (&sin6 as *const libc::sockaddr_in6).cast(), size_of::<libc::sockaddr_in6>() as u32)
            }
        }
    };
    assert_eq!(rc, 0, "connect {addr}: {}", std::io::Error::last_os_error());
}

/// The sender's window, packets (TCP_INFO).
pub fn snd_cwnd(fd: RawFd) -> u32 {
    // SAFETY: an all-zero tcp_info is valid; getsockopt fills at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: as above.
    let rc =
        unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut libc::tcp_info).cast(), &mut len) };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_snd_cwnd
}

impl Farm {
    /// A namespace `ns` (created here, deleted on drop) with loopback up at MTU 1500, listeners
    /// on 127.0.0.1 and ::1, and a pump thread.
    pub fn new(ns: &str, cc: &str) -> Farm {
        let _ = Command::new("ip").args(["netns", "del", ns]).stderr(std::process::Stdio::null()).status();
        assert!(Command::new("ip").args(["netns", "add", ns]).status().unwrap().success(), "ip netns add {ns}");
        let up = Command::new("ip").args(["-n", ns, "link", "set", "lo", "mtu", "1500", "up"]).status().unwrap();
        assert!(up.success(), "loopback up in {ns}");
        let listeners = in_netns(ns, || {
            let l4 = TcpListener::bind("127.0.0.1:0").expect("listen on 127.0.0.1");
            let l6 = TcpListener::bind("[::1]:0").expect("listen on ::1 (IPv6 loopback)");
            (l4, l6)
        });
        let (listen4, listen6) = (listeners.0.local_addr().unwrap(), listeners.1.local_addr().unwrap());
        let pairs: Arc<Mutex<Vec<Option<Pair>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (pairs.clone(), stop.clone());
        let pump = std::thread::spawn(move || {
            let out = vec![0x5au8; 64 << 10];
            let mut inb = vec![0u8; 64 << 10];
            while !s.load(Ordering::Relaxed) {
                // A few flows per lock, so that sampling the windows never waits long.
                let n = p.lock().unwrap().len();
                for start in (0..n).step_by(32) {
                    let mut pairs = p.lock().unwrap();
                    let end = (start + 32).min(pairs.len());
                    for pair in pairs[start..end].iter_mut().flatten() {
                        let _ = pair.client.write(&out);
                        while pair.server.read(&mut inb).is_ok_and(|n| n > 0) {}
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        Farm {
            ns: ns.to_string(),
            cc: cc.to_string(),
            listen4,
            listen6,
            listeners: Arc::new(listeners),
            pairs,
            stop,
            pump: Some(pump),
        }
    }

    /// Opens `v4` IPv4 and `v6` IPv6 flows on the congestion control; returns their indexes.
    pub fn add(&self, v4: usize, v6: usize) -> Vec<usize> {
        let (cc, l4, l6, listeners) = (self.cc.clone(), self.listen4, self.listen6, self.listeners.clone());
        let new = in_netns(&self.ns, move || {
            let mut new = Vec::new();
            for i in 0..v4 + v6 {
                let v6 = i >= v4;
                let client = socket_on(if v6 { libc::AF_INET6 } else { libc::AF_INET }, &cc);
                connect(&client, if v6 { l6 } else { l4 });
                let (server, _) = if v6 { listeners.1.accept() } else { listeners.0.accept() }.expect("accept");
                client.set_nonblocking(true).unwrap();
                server.set_nonblocking(true).unwrap();
                new.push(Pair { client, server, v6 });
            }
            new
        });
        let mut pairs = self.pairs.lock().unwrap();
        let first = pairs.len();
        pairs.extend(new.into_iter().map(Some));
        (first..pairs.len()).collect()
    }

    /// Closes the flows at `idx`.
    pub fn close(&self, idx: &[usize]) {
        let mut pairs = self.pairs.lock().unwrap();
        for i in idx {
            pairs[*i] = None;
        }
    }

    /// (index, IPv6?, window in packets) of every open flow.
    pub fn cwnds(&self) -> Vec<(usize, bool, u32)> {
        let pairs = self.pairs.lock().unwrap();
        pairs.iter().enumerate().filter_map(|(i, p)| p.as_ref().map(|p| (i, p.v6, snd_cwnd(p.client.as_raw_fd())))).collect()
    }

    /// The sending socket's fd of flow `i`.
    pub fn client_fd(&self, i: usize) -> RawFd {
        self.pairs.lock().unwrap()[i].as_ref().expect("open flow").client.as_raw_fd()
    }
}

impl Drop for Farm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self.pump.take() {
            let _ = p.join();
        }
        self.pairs.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}
