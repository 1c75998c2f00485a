//! End to end, in network namespaces this test creates: real kernel TCP flows through
//! `ccp-router`'s emulated bottleneck (10 Mbit/s, 10 ms each way, a 100-packet drop-tail queue
//! that a Cubic sender fills: its receive buffer is 4 MB, so the congestion window, not the
//! receive window, limits it), with the receiver enabled on the receiving namespace's TUN device.
//!
//! - marking mode: CE marks appear (the receiver's counters) and reach the sender (its
//!   TCP_INFO `delivered_ce` counts ECE-acknowledged packets); the data arrives intact;
//! - a connection without timestamps and a connection without ECN pass untouched;
//! - window mode (settings replaced in place): advertised windows are capped on the way out;
//! - enable twice, replace, disable: nothing is left (no link, program, map or pin).
//!
//! Everything created here (namespaces, links, pins, threads) is removed by name on drop.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ccp_inigo_receiver::{disable, enable, status, Capacity, Counter, Counters, EnableOutcome, Error, Mode, Settings, Target};
use ccp_qdisc::Limit;
use ccp_router::{Emulator, RouterConfig, Side, TopologyConfig};
use common::skip_without_root;

/// One test at a time: each moves real traffic or attaches programs.
static SERIAL: Mutex<()> = Mutex::new(());

fn tag(test: &str) -> String {
    format!("{test}{}", std::process::id() % 100_000)
}

/// Disables the receiver on drop, so a failing assertion leaves nothing attached.
struct Guard(Target);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = disable(&self.0);
    }
}

/// Payload byte at stream offset `i`: a prime period, so lost, duplicated or shifted bytes show.
fn pattern(i: u64) -> u8 {
    (i % 251) as u8
}

fn tcp_info(s: &TcpStream) -> libc::tcp_info {
    // SAFETY: tcp_info is plain old data.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid fd, buffer and length.
    let r = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut libc::tcp_info).cast(), &mut len)
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info
}

/// `tcpi_options` bits (<linux/tcp.h>).
const TCPI_OPT_TIMESTAMPS: u8 = 1;
const TCPI_OPT_ECN: u8 = 8;

struct FlowResult {
    sent: u64,
    received: u64,
    intact: bool,
    /// The sender's TCP_INFO once everything was acknowledged.
    info: libc::tcp_info,
    /// The sender's smoothed RTT, µs, sampled in the flow's second half.
    srtt_us: Vec<u32>,
}

fn write_sysctl(emu: &Emulator, side: Side, key: &str, value: &str) {
    let path = format!("/proc/sys/net/ipv4/{key}");
    let v = value.to_string();
    emu.topology().run_in(side, move || std::fs::write(&path, v)).unwrap().unwrap();
}

/// A bulk flow sender → receiver for `secs`, with a checked byte pattern.
fn flow(emu: &Emulator, port: u16, secs: f64) -> FlowResult {
    let topo = emu.topology();
    let dst = SocketAddr::from((topo.config().receiver_addr, port));
    let listener = topo.run_in(Side::Receiver, move || TcpListener::bind(dst)).unwrap().unwrap();
    // A receive buffer well above the path's BDP plus the whole queue: the flow is limited by
    // the sender's congestion window (which marks act on), not by the receive window.
    let rcvbuf: libc::c_int = 4 << 20;
    // SAFETY: valid fd and option buffer.
    let r = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    let receiver = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (mut n, mut ok) = (0u64, true);
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    ok &= buf[..k].iter().enumerate().all(|(j, b)| *b == pattern(n + j as u64));
                    n += k as u64;
                }
                Err(e) => panic!("receiving: {e}"),
            }
        }
        (n, ok)
    });
    let mut s = topo.run_in(Side::Sender, move || TcpStream::connect_timeout(&dst, Duration::from_secs(5))).unwrap().unwrap();
    // Cubic, which backs off (x0.7) on ECE; this host's default may ignore ECN (BBR does).
    ccp_router::tcp::set_congestion_control(&s, "cubic").unwrap();
    s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut srtt = Vec::new();
    let mut next_sample = secs / 2.0;
    while t0.elapsed().as_secs_f64() < secs {
        let chunk: Vec<u8> = (0..64 * 1024).map(|j| pattern(sent + j as u64)).collect();
        match s.write(&chunk) {
            Ok(k) => sent += k as u64,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("sending: {e}"),
        }
        if t0.elapsed().as_secs_f64() >= next_sample {
            srtt.push(tcp_info(&s).tcpi_rtt);
            next_sample += 0.1;
        }
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let (received, intact) = receiver.join().expect("the receiver thread");
    let info = tcp_info(&s);
    FlowResult { sent, received, intact, info, srtt_us: srtt }
}

fn median(v: &[u32]) -> u32 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn show(what: &str, c: &Counters, f: &FlowResult) {
    let i: Vec<String> = c.ingress().filter(|(_, v, _)| *v > 0).map(|(k, v, _)| format!("{k}={v}")).collect();
    let e: Vec<String> = c.egress().filter(|(_, v, _)| *v > 0).map(|(k, v, _)| format!("{k}={v}")).collect();
    eprintln!(
        "{what}: {} bytes intact={} delivered_ce={} retrans={} srtt p50 {} us | ingress {} | egress {}",
        f.received,
        f.intact,
        f.info.tcpi_delivered_ce,
        f.info.tcpi_total_retrans,
        median(&f.srtt_us),
        i.join(" "),
        e.join(" ")
    );
}

fn counters(t: &Target) -> Counters {
    status(t).expect("status").counters
}

#[test]
fn marks_through_a_real_bottleneck_and_leaves_other_connections_alone() {
    if skip_without_root("e2e marking") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prefix = tag("irx");
    let emu = Emulator::start(TopologyConfig::new(&prefix), RouterConfig::fixed(10e6, 10_000_000, Limit::Packets(100)))
        .expect("ccp-router's namespaces");
    let target = Target { netns: Path::new("/run/netns").join(emu.topology().receiver_ns()), dev: "ccp0".into() };
    write_sysctl(&emu, Side::Sender, "tcp_ecn", "1");

    // Without the receiver: Cubic fills the queue (the comparison for the log).
    let base = flow(&emu, 5201, 4.0);
    assert!(base.intact && base.received == base.sent);
    eprintln!("no receiver: delivered_ce={} srtt p50 {} us", base.info.tcpi_delivered_ce, median(&base.srtt_us));
    assert_eq!(base.info.tcpi_delivered_ce, 0, "nothing marks without the receiver");

    let r = enable(&target, &Settings::default(), Capacity::default()).expect("enable");
    assert_eq!(r.outcome, EnableOutcome::Created);
    let _guard = Guard(target.clone());

    // 1. ECN + timestamps: marked.
    let c0 = counters(&target);
    let f = flow(&emu, 5202, 5.0);
    let c = counters(&target).since(&c0);
    show("marking, ECN + timestamps", &c, &f);
    assert!(f.intact && f.received == f.sent, "data intact: sent {} received {}", f.sent, f.received);
    assert_ne!(f.info.tcpi_options & TCPI_OPT_ECN, 0, "ECN negotiated");
    assert_ne!(f.info.tcpi_options & TCPI_OPT_TIMESTAMPS, 0, "timestamps negotiated");
    assert!(c.get(Counter::InTimestamps) > 1000, "the RFD ran on the flow's segments");
    assert!(c.get(Counter::InLate) > 0 && c.get(Counter::InCeSet) > 0, "late segments were marked");
    assert!(f.info.tcpi_delivered_ce > 0, "the sender saw ECE: delivered_ce {}", f.info.tcpi_delivered_ce);
    assert_eq!(c.get(Counter::InNoTimestamps), 0);
    assert!(
        median(&f.srtt_us) < median(&base.srtt_us),
        "the marks keep the queue shorter than Cubic alone: srtt p50 {} us vs {} us",
        median(&f.srtt_us),
        median(&base.srtt_us)
    );
    let st = status(&target).unwrap();
    assert!(st.ingress_attached && st.egress_attached.is_none());
    assert_eq!(st.connections, 0, "state goes with the connection's FIN");

    // 2. No timestamps (the sender's namespace turns them off): untouched.
    write_sysctl(&emu, Side::Sender, "tcp_timestamps", "0");
    let c0 = counters(&target);
    let f = flow(&emu, 5203, 3.0);
    let c = counters(&target).since(&c0);
    show("marking, no timestamps", &c, &f);
    assert!(f.intact && f.received == f.sent);
    assert_eq!(f.info.tcpi_options & TCPI_OPT_TIMESTAMPS, 0);
    assert!(c.get(Counter::InNoTimestamps) > 500, "skipped as without timestamps");
    assert_eq!((c.get(Counter::InTimestamps), c.get(Counter::InCeSet)), (0, 0));
    assert_eq!(f.info.tcpi_delivered_ce, 0);
    write_sysctl(&emu, Side::Sender, "tcp_timestamps", "1");

    // 3. No ECN: untouched.
    write_sysctl(&emu, Side::Sender, "tcp_ecn", "0");
    let c0 = counters(&target);
    let f = flow(&emu, 5204, 3.0);
    let c = counters(&target).since(&c0);
    show("marking, no ECN", &c, &f);
    assert!(f.intact && f.received == f.sent);
    assert_eq!(f.info.tcpi_options & TCPI_OPT_ECN, 0);
    assert!(c.get(Counter::InNonEcn) > 500, "skipped as not ECN-capable");
    assert_eq!((c.get(Counter::InCeSet), c.get(Counter::InNoSocket)), (0, 0));
    assert_eq!(f.info.tcpi_delivered_ce, 0);

    // 4. Window mode, replacing the settings in place (no ECN needed).
    let r = enable(&target, &Settings { mode: Mode::Window, ..Settings::default() }, Capacity::default()).unwrap();
    assert_eq!(r.outcome, EnableOutcome::Replaced(vec!["mode mark -> window".into()]));
    assert_eq!(status(&target).unwrap().egress_attached, Some(true));
    let c0 = counters(&target);
    let f = flow(&emu, 5205, 5.0);
    let c = counters(&target).since(&c0);
    show("window mode, no ECN", &c, &f);
    eprintln!("window mode: srtt p50 {} us (no receiver: {} us)", median(&f.srtt_us), median(&base.srtt_us));
    assert!(f.intact && f.received == f.sent);
    assert!(c.get(Counter::InWindowUpdates) > 0 && c.get(Counter::OutAcks) > 0);
    assert!(c.get(Counter::OutCapped) > 0, "advertised windows were capped");

    let d = disable(&target).unwrap();
    assert_eq!(d.removed.len(), 5, "two links, three maps: {:?}", d.removed);
    assert!(!Path::new(ccp_inigo_receiver::PIN_BASE).join(emu.topology().receiver_ns()).exists());
    drop(emu);
}

/// A namespace with a veth pair in it, deleted on drop.
struct VethNs {
    name: String,
}

impl VethNs {
    fn new(name: &str) -> VethNs {
        let quiet = || std::process::Stdio::null();
        let _ = Command::new("ip").args(["netns", "del", name]).stderr(quiet()).status();
        let ip = |args: &[&str]| {
            let ok = Command::new("ip").args(args).status().map(|s| s.success()).unwrap_or(false);
            assert!(ok, "ip {}", args.join(" "));
        };
        ip(&["netns", "add", name]);
        let ns = VethNs { name: name.to_string() };
        ip(&["-n", name, "link", "add", "dev", "irx-a", "type", "veth", "peer", "name", "irx-b"]);
        ip(&["-n", name, "link", "set", "dev", "irx-a", "up"]);
        ip(&["-n", name, "link", "set", "dev", "irx-b", "up"]);
        ns
    }

    fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.name)
    }
}

impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

fn bpftool(args: &[&str]) -> Option<serde_json::Value> {
    let out = Command::new("bpftool").arg("-j").args(args).output().expect("bpftool (scripts/setup.sh installs it)");
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// (kind, id) of every link, program and map behind an instance's pins.
fn objects(dir: &Path) -> Vec<(&'static str, u64)> {
    let mut v = Vec::new();
    for l in ["link-ingress", "link-egress"] {
        let p = dir.join(l);
        if let Some(j) = bpftool(&["link", "show", "pinned", p.to_str().unwrap()]) {
            v.push(("link", j["id"].as_u64().unwrap()));
            v.push(("prog", j["prog_id"].as_u64().unwrap()));
        }
    }
    for m in ["settings", "conns", "counters"] {
        let p = dir.join(m);
        let j = bpftool(&["map", "show", "pinned", p.to_str().unwrap()]).expect("a pinned map");
        v.push(("map", j["id"].as_u64().unwrap()));
    }
    v
}

fn in_ns(ns: &str, cmd: &[&str]) -> String {
    let out = Command::new("ip").args(["netns", "exec", ns]).args(cmd).output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn enable_twice_replace_and_disable_leave_nothing_behind() {
    if skip_without_root("e2e enable/disable") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = VethNs::new(&tag("irxv"));
    let target = Target { netns: ns.path(), dev: "irx-a".into() };
    let _guard = Guard(target.clone());

    let first = enable(&target, &Settings::default(), Capacity::default()).unwrap();
    assert_eq!(first.outcome, EnableOutcome::Created);
    assert_eq!(first.pin_dir, Path::new(ccp_inigo_receiver::PIN_BASE).join(&ns.name).join("irx-a"));
    let again = enable(&target, &Settings::default(), Capacity::default()).unwrap();
    assert_eq!(again.outcome, EnableOutcome::Unchanged);
    // Window mode: settings replaced, the egress link added (the same maps).
    let w = Settings { mode: Mode::Window, threshold_pct: 25, ..Settings::default() };
    let r = enable(&target, &w, Capacity::default()).unwrap();
    assert_eq!(r.outcome, EnableOutcome::Replaced(vec!["mode mark -> window".into(), "threshold-pct 17 -> 25".into()]));
    let st = status(&target).unwrap();
    assert_eq!((st.settings.clone(), st.ingress_attached, st.egress_attached), (w.clone(), true, Some(true)));
    // What cannot change while it runs is refused, by name.
    let e = enable(&target, &w, Capacity { max_conns: 100 }).unwrap_err();
    assert!(matches!(e, Error::AlreadyEnabled { .. }) && e.to_string().contains("max-conns 16384"), "{e}");
    // The namespace reached by another path is the same instance.
    let pid_path = {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let nsfile = std::fs::File::open(ns.path()).unwrap();
        let h = std::thread::spawn(move || {
            // SAFETY: setns on this thread only.
            assert_eq!(unsafe { libc::setns(nsfile.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            tx.send(PathBuf::from(format!("/proc/{}/task/{tid}/ns/net", std::process::id()))).unwrap();
            let _ = done_rx.recv();
        });
        let p = rx.recv().unwrap();
        let other = Target { netns: p.clone(), dev: "irx-a".into() };
        let st2 = status(&other).unwrap();
        assert_eq!(st2.pin_dir, st.pin_dir, "found through the recorded namespace");
        assert_eq!(enable(&other, &w, Capacity::default()).unwrap().outcome, EnableOutcome::Unchanged);
        done_tx.send(()).unwrap();
        h.join().unwrap();
        p
    };
    let _ = pid_path;
    // Back to marking: the egress link goes.
    enable(&target, &Settings::default(), Capacity::default()).unwrap();
    assert!(!st.pin_dir.join("link-egress").exists());
    enable(&target, &w, Capacity::default()).unwrap();

    let objs = objects(&st.pin_dir);
    assert_eq!(objs.iter().filter(|(k, _)| *k == "link").count(), 2, "{objs:?}");
    let d = disable(&target).unwrap();
    assert_eq!(d.removed.len(), 5);
    assert!(!st.pin_dir.exists() && !st.pin_dir.parent().unwrap().exists(), "the directories go too");
    // The kernel frees programs and maps with their last reference (maps after an RCU grace).
    let t0 = Instant::now();
    let alive = || objs.iter().filter(|(k, id)| bpftool(&[k, "show", "id", &id.to_string()]).is_some()).count();
    while alive() > 0 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<_> = objs.iter().filter(|(k, id)| bpftool(&[k, "show", "id", &id.to_string()]).is_some()).collect();
    assert!(left.is_empty(), "still loaded after disable: {left:?}");
    for dir in ["ingress", "egress"] {
        let tc = in_ns(&ns.name, &["tc", "filter", "show", "dev", "irx-a", dir]);
        assert!(tc.trim().is_empty(), "tc filter show {dir}: {tc}");
    }
    let net = in_ns(&ns.name, &["bpftool", "net", "show", "dev", "irx-a"]);
    assert!(!net.contains("inigo"), "bpftool net show: {net}");
    let d = disable(&target).unwrap();
    assert!(d.not_enabled && d.removed.is_empty(), "a second disable has nothing to do");
    assert!(matches!(status(&target), Err(Error::NotEnabled { .. })));
}

#[test]
fn missing_namespaces_and_devices_are_named() {
    if skip_without_root("e2e errors") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = VethNs::new(&tag("irxe"));
    let missing = Target { netns: ns.path(), dev: "nope0".into() };
    let e = enable(&missing, &Settings::default(), Capacity::default()).unwrap_err();
    assert!(matches!(e, Error::DeviceMissing { .. }) && e.to_string().contains("nope0"), "{e}");
    let gone = Target { netns: Path::new("/run/netns").join(tag("irxnone")), dev: "irx-a".into() };
    let e = enable(&gone, &Settings::default(), Capacity::default()).unwrap_err();
    assert!(matches!(e, Error::NamespaceMissing(_)), "{e}");
    let e = enable(&Target { netns: ns.path(), dev: "../x".into() }, &Settings::default(), Capacity::default()).unwrap_err();
    assert!(matches!(e, Error::Settings(_)), "{e}");

    // A namespace deleted under an enabled receiver: disable removes its pins by name.
    let target = Target { netns: ns.path(), dev: "irx-a".into() };
    let r = enable(&target, &Settings::default(), Capacity::default()).unwrap();
    let _guard = Guard(target.clone());
    drop(ns);
    assert!(matches!(status(&target), Err(Error::NamespaceMissing(_))));
    let d = disable(&target).unwrap();
    assert!(d.note.is_some() && d.removed.len() == 4, "{d:?}");
    assert!(!r.pin_dir.exists());
}
