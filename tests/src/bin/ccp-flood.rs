//! What an unprivileged local user can throw at the agent, for the flood test and its benchmark.
//!
//!   ccp-flood flows   --cc NAME --flows N --secs S [--uid U] [--chunk B --every-ms M] [--churn-per-s R]
//!                     N loopback flows on NAME in a user and network namespace of U's own (with
//!                     `--uid 0`: root's flows, in a network namespace of their own), each writing
//!                     without pause, or B bytes every M ms; R of them closed and replaced
//!                     by new ones every second
//!   ccp-flood netlink --group G --secs S [--uid U]             CREATE messages multicast to a
//!                                                             NETLINK_USERSOCK group
//!   ccp-flood connect --path SOCK --secs S [--uid U]           connections / datagrams to a unix socket
//!
//! Started as root, it raises its open-file limit, then drops to `--uid` (default 65534) with no
//! supplementary groups before doing anything else: from there on it has exactly an
//! unprivileged user's rights. It prints one JSON line of what it managed (and, for `flows`, a
//! `{"ready": N}` line on stderr once every flow is connected).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn need(args: &[String], name: &str) -> String {
    arg(args, name).unwrap_or_else(|| panic!("{name} is required"))
}

fn die(what: &str) -> ! {
    eprintln!("ccp-flood: {what}: {}", std::io::Error::last_os_error());
    std::process::exit(2)
}

/// Raises the open-file limit to `files` (within the hard limit), then becomes `uid`/`uid`
/// with no groups.
fn drop_to(uid: u32, files: u64) {
    // SAFETY: plain syscalls with valid arguments.
    unsafe {
        if uid == 0 {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            lim.rlim_cur = files.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            return;
        }
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if files > lim.rlim_max {
            eprintln!("ccp-flood: {files} files wanted, the hard limit is {}", lim.rlim_max);
            std::process::exit(2);
        }
        lim.rlim_cur = files;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            die("raising RLIMIT_NOFILE");
        }
        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
            die("dropping privileges");
        }
        if libc::geteuid() == 0 {
            die("still root");
        }
        // A credential change makes the process undumpable, which leaves /proc/self to root:
        // an ordinary user's process is dumpable (and can write its own uid_map).
        libc::prctl(libc::PR_SET_DUMPABLE, 1);
    }
}

/// A user namespace with a network namespace, as `unshare -rn` makes them.
fn own_namespaces(uid: u32) {
    let user = if uid == 0 { 0 } else { libc::CLONE_NEWUSER };
    // SAFETY: unshare with valid flags.
    if unsafe { libc::unshare(user | libc::CLONE_NEWNET) } != 0 {
        die("unshare(CLONE_NEWUSER | CLONE_NEWNET)");
    }
    if uid != 0 {
        let w = |p: &str, s: String| std::fs::write(p, s).unwrap_or_else(|e| panic!("{p}: {e}"));
        w("/proc/self/setgroups", "deny".into());
        w("/proc/self/uid_map", format!("0 {uid} 1"));
        w("/proc/self/gid_map", format!("0 {uid} 1"));
    }
    // Loopback up (ifreq: 16-byte name, then flags).
    let mut ifr = [0u8; 40];
    ifr[..2].copy_from_slice(b"lo");
    // SAFETY: ioctls on a datagram socket with a 40-byte ifreq.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if libc::ioctl(s, libc::SIOCGIFFLAGS, ifr.as_mut_ptr()) != 0 {
            die("SIOCGIFFLAGS lo");
        }
        let flags = i16::from_ne_bytes([ifr[16], ifr[17]]) | (libc::IFF_UP as i16) | (libc::IFF_RUNNING as i16);
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
        if libc::ioctl(s, libc::SIOCSIFFLAGS, ifr.as_mut_ptr()) != 0 {
            die("SIOCSIFFLAGS lo up");
        }
        libc::close(s);
    }
}

/// A loopback listener with the namespace's whole accept backlog: std's 128 overflows when the
/// accepting child is descheduled for a moment, and every SYN dropped then costs its connect the
/// 1 s initial RTO (10,000 flows took 18 s instead of 1.5 s on a busy 2-core machine).
fn listen_loopback() -> TcpListener {
    // SAFETY: a fresh socket, bound and put to listen with valid arguments, then owned by the
    // TcpListener.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            die("socket");
        }
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be() },
            sin_zero: [0; 8],
        };
        if libc::bind(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) != 0 {
            die("bind 127.0.0.1:0");
        }
        // The kernel caps the backlog at net.core.somaxconn (4,096 in a new namespace).
        if libc::listen(fd, i32::MAX) != 0 {
            die("listen");
        }
        TcpListener::from_raw_fd(fd)
    }
}

/// `n` loopback flows: this process holds the sending ends, a forked child the receiving ends
/// (each end count must fit an unprivileged open-file limit).
fn flows(cc: &str, n: usize, secs: f64, pace: Option<(usize, Duration)>, churn: f64) -> serde_json::Value {
    let listener = listen_loopback();
    let addr = listener.local_addr().unwrap();
    // SAFETY: fork in a single-threaded process; the child only uses its own copies.
    let child = unsafe { libc::fork() };
    if child < 0 {
        die("fork");
    }
    if child == 0 {
        let mut servers: Vec<TcpStream> = Vec::with_capacity(n);
        for _ in 0..n {
            let (s, _) = listener.accept().expect("accept");
            s.set_nonblocking(true).unwrap();
            servers.push(s);
        }
        // Churn: connections the sender replaces arrive later, and closed ones go.
        listener.set_nonblocking(true).unwrap();
        let mut inb = vec![0u8; 64 << 10];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < secs + 1.0 {
            while let Ok((s, _)) = listener.accept() {
                s.set_nonblocking(true).unwrap();
                servers.push(s);
            }
            servers.retain_mut(|s| loop {
                match s.read(&mut inb) {
                    Ok(0) => break false,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                    Err(_) => break false,
                }
            });
        }
        std::process::exit(0);
    }
    drop(listener);
    let mut clients = Vec::with_capacity(n);
    let mut refused_cc = 0;
    let mut cc_error: Option<String> = None;
    let mut cc_retries = 0u64;
    let mut open = || -> TcpStream {
        // SAFETY: a plain socket, owned by the TcpStream at once.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            die("socket");
        }
        // SAFETY: fd is ours.
        let client = unsafe { TcpStream::from_raw_fd(fd) };
        // SAFETY: setsockopt on our socket with a valid buffer.
        let set_cc =
            || unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as u32) };
        // Retried (and counted) in case the name is briefly not found; every ENOENT seen so
        // far came from a run whose agent had already stopped because setup overran it.
        let mut ok = set_cc() == 0;
        for _ in 0..20 {
            if ok {
                break;
            }
            cc_retries += 1;
            std::thread::sleep(Duration::from_millis(5));
            ok = set_cc() == 0;
        }
        if !ok {
            refused_cc += 1;
            cc_error.get_or_insert_with(|| std::io::Error::last_os_error().to_string());
        }
        let std::net::SocketAddr::V4(a) = addr else { unreachable!() };
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
            sin_zero: [0; 8],
        };
        // SAFETY: a valid sockaddr_in.
        if unsafe { libc::connect(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } != 0 {
            die("connect");
        }
        client.set_nonblocking(true).unwrap();
        client
    };
    for _ in 0..n {
        clients.push(open());
    }
    eprintln!("{}", serde_json::json!({ "ready": n }));
    let out = vec![0x5au8; pace.map_or(16 << 10, |(b, _)| b)];
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut next = Instant::now();
    let (mut replaced, mut cursor) = (0u64, 0usize);
    while t0.elapsed().as_secs_f64() < secs {
        // Short-lived connections: close the oldest and open new ones at `churn` per second.
        let due = (t0.elapsed().as_secs_f64() * churn) as u64;
        while replaced < due && !clients.is_empty() {
            clients[cursor] = open();
            cursor = (cursor + 1) % clients.len();
            replaced += 1;
        }
        for c in &mut clients {
            if let Ok(k) = c.write(&out) {
                bytes += k as u64;
            }
        }
        if let Some((_, every)) = pace {
            next += every;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }
    let took = t0.elapsed().as_secs_f64();
    drop(clients);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    serde_json::json!({ "flows": n, "replaced": replaced, "cc_refused": refused_cc, "cc_retries": cc_retries, "cc_error": cc_error, "bytes": bytes, "secs": took })
}

fn netlink(group: u32, secs: f64) -> serde_json::Value {
    // SAFETY: socket/bind with valid arguments.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_USERSOCK) };
    if fd < 0 {
        die("netlink socket");
    }
    // SAFETY: fd is ours; plain old data.
    let sock = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    sa.nl_groups = 1 << (group - 1);
    let (mut sent, mut failed, mut sid) = (0u64, 0u64, 1u32);
    let t0 = Instant::now();
    let mut framed = Vec::new();
    while t0.elapsed().as_secs_f64() < secs {
        sid = sid.wrapping_add(1).max(1);
        let create = ccp_wire::Create {
            sid,
            init_cwnd: 14480,
            mss: 1448,
            src_ip: sid,
            src_port: 40000,
            dst_ip: 2,
            dst_port: 5201,
            cong_alg: Some("reno".into()),
        };
        framed.clear();
        ccp_wire::netlink::frame(&ccp_wire::Msg::Create(create).to_bytes().unwrap(), &mut framed);
        // SAFETY: valid buffer and address.
        let n = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                framed.as_ptr().cast(),
                framed.len(),
                libc::MSG_DONTWAIT,
                (&sa as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::ECONNREFUSED) {
            sent += 1;
        } else {
            failed += 1;
        }
    }
    serde_json::json!({ "sent": sent, "failed": failed, "secs": t0.elapsed().as_secs_f64() })
}

fn connect(path: &str, secs: f64) -> serde_json::Value {
    let t0 = Instant::now();
    let (mut stream_ok, mut stream_err, mut dgram_ok, mut dgram_err) = (0u64, 0u64, 0u64, 0u64);
    let mut errors = std::collections::BTreeMap::<String, u64>::new();
    let mut held = Vec::new();
    while t0.elapsed().as_secs_f64() < secs {
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(mut s) => {
                stream_ok += 1;
                let _ = s.set_nonblocking(true);
                let _ = s.write(b"{\"cmd\":\"status\"}\n");
                // Hold it, never read: what the server must bound.
                if held.len() < 512 {
                    held.push(s);
                }
            }
            Err(e) => {
                stream_err += 1;
                *errors.entry(e.to_string()).or_default() += 1;
            }
        }
        let d = std::os::unix::net::UnixDatagram::unbound().expect("datagram socket");
        match d.send_to(b"\x02\x00\x08\x00garbage!", path) {
            Ok(_) => dgram_ok += 1,
            Err(e) => {
                dgram_err += 1;
                *errors.entry(e.to_string()).or_default() += 1;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    serde_json::json!({ "stream_ok": stream_ok, "stream_err": stream_err, "dgram_ok": dgram_ok, "dgram_err": dgram_err, "errors": errors })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).cloned().unwrap_or_default();
    let uid: u32 = arg(&args, "--uid").map_or(65534, |u| u.parse().expect("--uid"));
    let secs: f64 = need(&args, "--secs").parse().expect("--secs");
    let out = match what.as_str() {
        "flows" => {
            let n: usize = need(&args, "--flows").parse().expect("--flows");
            drop_to(uid, n as u64 + 2048);
            own_namespaces(uid);
            let pace = arg(&args, "--every-ms").map(|ms| {
                let b: usize = need(&args, "--chunk").parse().expect("--chunk");
                (b, Duration::from_millis(ms.parse().expect("--every-ms")))
            });
            let churn = arg(&args, "--churn-per-s").map_or(0.0, |c| c.parse().expect("--churn-per-s"));
            flows(&need(&args, "--cc"), n, secs, pace, churn)
        }
        "netlink" => {
            drop_to(uid, 1024);
            netlink(need(&args, "--group").parse().expect("--group"), secs)
        }
        "connect" => {
            drop_to(uid, 2048);
            connect(&need(&args, "--path"), secs)
        }
        other => {
            eprintln!("ccp-flood: unknown mode {other:?} (flows, netlink, connect)");
            std::process::exit(2)
        }
    };
    println!("{out}");
}
