//! The congestion control against real TCP flows on loopback, inside a network namespace of the
//! test's own. Needs root (BPF, namespaces); skips loudly without it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccp_ebpf::attach::{Attach, Attacher, Detach, Filter, Namespaces, Settings};
use ccp_ebpf::netns::Netns;
use ccp_ebpf::{Config, Control, Create, Instance, KernelReport, Knobs, PerAckRecord, Record, Records};

/// Serialises the tests: each registers a congestion control and moves real traffic.
static SERIAL: Mutex<()> = Mutex::new(());

fn skip(test: &str) -> bool {
    if !ccp_ebpf::is_root() {
        eprintln!("SKIPPED {test}: needs root (BPF programs, network namespaces)");
        return true;
    }
    false
}

/// A network namespace with loopback up, deleted on drop (by name, even if the test fails).
struct TestNetns {
    name: String,
    ns: Netns,
}

impl TestNetns {
    fn new(tag: &str) -> TestNetns {
        let name = format!("ccpebpf-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).stderr(std::process::Stdio::null()).status();
        assert!(Command::new("ip").args(["netns", "add", &name]).status().unwrap().success());
        assert!(Command::new("ip").args(["-n", &name, "link", "set", "lo", "up"]).status().unwrap().success());
        let ns = Netns::open(&PathBuf::from(format!("/run/netns/{name}"))).unwrap();
        TestNetns { name, ns }
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// The congestion control under a per-test name and pin directory, unpinned on drop.
struct TestInstance {
    inst: Instance,
}

impl TestInstance {
    fn load(tag: &str, knobs: Knobs) -> TestInstance {
        Self::load_with(tag, knobs, Records::Folded)
    }

    fn load_with(tag: &str, knobs: Knobs, records: Records) -> TestInstance {
        let cfg = Config {
            name: format!("ccpt{tag}{}", std::process::id() % 10_000),
            pin_dir: PathBuf::from(format!("/sys/fs/bpf/ccp-test-{tag}-{}", std::process::id())),
            ring_bytes: if records == Records::PerAck { 8 << 20 } else { 1 << 20 },
            max_flows: 1024,
            knobs,
        };
        TestInstance { inst: Instance::load_with(cfg, records).expect("load the congestion control") }
    }
}

impl Drop for TestInstance {
    fn drop(&mut self) {
        self.inst.unpin();
        let _ = std::fs::remove_dir(self.inst.pin_dir());
    }
}

fn set_cc(fd: i32, name: &str) -> i32 {
    // SAFETY: setsockopt with a valid buffer of the given length.
    unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_ptr().cast(), name.len() as u32) }
}

fn get_cc(fd: i32) -> String {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as u32;
    // SAFETY: getsockopt into a valid buffer.
    unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len) };
    String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap_or(16)]).into_owned()
}

/// A bulk TCP transfer over loopback in `ns`, until `stop`; `cc` is set on the sender before
/// connect when given. The sender's fd is published once connected.
fn bulk(
    ns: Netns,
    cc: Option<String>,
    stop: Arc<AtomicBool>,
    sender_fd: Arc<Mutex<Option<i32>>>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        ns.run(move || {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let sink = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = vec![0u8; 1 << 16];
                while s.read(&mut buf).is_ok_and(|n| n > 0) {}
            });
            let sock = socket2_connect(addr, cc.as_deref());
            *sender_fd.lock().unwrap() = Some(sock.as_raw_fd());
            let mut sock = sock;
            let chunk = vec![7u8; 1 << 16];
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match sock.write(&chunk) {
                    Ok(n) => sent += n as u64,
                    Err(_) => break,
                }
            }
            *sender_fd.lock().unwrap() = None;
            drop(sock);
            sink.join().unwrap();
            sent
        })
        .unwrap()
    })
}

/// Connects with the congestion control set before connect (the active-open path, where the
/// kernel calls cong_control before init).
fn socket2_connect(addr: std::net::SocketAddr, cc: Option<&str>) -> TcpStream {
    // SAFETY: a plain socket; ownership moves into the TcpStream below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    if let Some(cc) = cc {
        assert_eq!(set_cc(fd, cc), 0, "set {cc}: {}", std::io::Error::last_os_error());
    }
    let std::net::SocketAddr::V4(v4) = addr else { panic!("v4 only") };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: connect with a valid sockaddr_in.
    let rc = unsafe { libc::connect(fd, (&sin as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) };
    assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
    // SAFETY: fd is a connected TCP socket we own.
    unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) }
}

#[derive(Default)]
struct Seen {
    creates: Vec<Create>,
    reports: Vec<KernelReport>,
    closes: Vec<u32>,
}

fn drain(inst: &mut Instance, seen: &mut Seen) {
    inst.drain(|r| match r.expect("records decode") {
        Record::Create(c) => seen.creates.push(c),
        Record::Report(r) => seen.reports.push(r),
        Record::Close(c) => seen.closes.push(c.fid),
    })
    .unwrap();
}

fn wait_until(inst: &mut Instance, seen: &mut Seen, timeout: Duration, what: &str, mut cond: impl FnMut(&Seen) -> bool) {
    let t0 = Instant::now();
    loop {
        drain(inst, seen);
        if cond(seen) {
            return;
        }
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_flow_reports_obeys_its_control_entry_and_falls_back_when_the_agent_is_silent() {
    if skip("a_flow_reports_obeys_its_control_entry_and_falls_back_when_the_agent_is_silent") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let knobs = Knobs { silence_timeout: Duration::from_millis(300), ..Knobs::default() };
    let mut t = TestInstance::load("k", knobs);
    let name = t.inst.name().to_string();
    let net = TestNetns::new("k");
    let stop = Arc::new(AtomicBool::new(false));
    let fd = Arc::new(Mutex::new(None));
    let flow = bulk(net.ns.clone(), Some(name.clone()), Arc::clone(&stop), Arc::clone(&fd));
    let inst = &mut t.inst;
    let mut seen = Seen::default();

    wait_until(inst, &mut seen, Duration::from_secs(5), "a create record", |s| !s.creates.is_empty());
    let c = seen.creates[0].clone();
    assert!(!c.existing, "a new flow: {c:?}");
    assert_eq!(c.local.unwrap().addr, "127.0.0.1".parse::<std::net::IpAddr>().unwrap());
    assert!(c.mss > 1000, "{c:?}");
    wait_until(inst, &mut seen, Duration::from_secs(5), "reports", |s| s.reports.len() >= 5);
    let r = seen.reports[seen.reports.len() - 1];
    assert!(r.fallback, "no control entry yet: the fallback steers");
    assert!(r.acked_bytes > 0 && r.rtt_samples > 0 && r.mss > 1000, "{r:?}");
    let interval = r.ts_ns - r.start_ns;
    assert!((9_000_000..40_000_000).contains(&interval), "default 10 ms interval, got {interval} ns");
    // The fastest rate sample of an interval is one, and at least as fast as its last.
    let sampled: Vec<_> = seen.reports.iter().filter(|r| r.rate_delivered > 0).collect();
    assert!(!sampled.is_empty(), "rate samples in {:?}", seen.reports);
    for r in sampled {
        let last_us = u64::from(r.rate_snd_us.max(r.rate_rcv_us));
        assert!(r.rate_max_delivered > 0 && r.rate_max_us > 0, "{r:?}");
        assert!(u64::from(r.rate_max_delivered) * last_us >= u64::from(r.rate_delivered) * u64::from(r.rate_max_us), "{r:?}");
    }
    assert!(seen.reports.iter().all(|r| r.extra_acked_pkts.is_none()), "no aggregation rate set, nothing measured");

    // The agent commands 10 packets and 2 ms reports, and ACK aggregation measured against
    // 1 kB/s: every delivery is beyond that rate, so the excess is the window's worth.
    inst.heartbeat().unwrap();
    let control = Control {
        // The MSS of the reports: the one at init can be smaller (32741 vs 65483 on lo).
        cwnd_bytes: Some(10 * u64::from(r.mss)),
        report: ccp_ebpf::ReportEvery::Micros(2_000),
        aggregation_bytes_per_s: 1_000,
        ..Control::default()
    };
    inst.set_control(c.fid, &control, 42).unwrap();
    seen.reports.clear();
    wait_until(inst, &mut seen, Duration::from_secs(5), "the control entry in force", |s| {
        s.reports.iter().any(|r| r.ctrl_seq == 42 && r.cwnd_pkts == 10 && !r.fallback)
    });
    let applied = seen.reports.iter().filter(|r| r.ctrl_seq == 42).count();
    let t_applied = Instant::now();
    seen.reports.clear();
    while t_applied.elapsed() < Duration::from_millis(100) {
        inst.heartbeat().unwrap();
        drain(inst, &mut seen);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(applied > 0);
    assert!(seen.reports.iter().all(|r| r.cwnd_pkts == 10 && r.ctrl_seq == 42), "the window is held");
    let delivering: Vec<_> = seen.reports.iter().filter(|r| r.acked_pkts + r.sacked_pkts > 0).collect();
    assert!(!delivering.is_empty());
    for r in &delivering {
        let extra = r.extra_acked_pkts.unwrap_or_else(|| panic!("measured in every delivering report: {r:?}"));
        assert!(extra <= 10, "never above the window: {r:?}");
    }
    assert!(delivering.iter().any(|r| r.extra_acked_pkts == Some(10)), "the epoch outgrows 1 kB/s by the window");
    let short = seen.reports.iter().filter(|r| (1_500_000..6_000_000).contains(&(r.ts_ns - r.start_ns))).count();
    assert!(
        short * 2 >= seen.reports.len(),
        "2 ms reports: {:?}",
        seen.reports.iter().map(|r| r.ts_ns - r.start_ns).collect::<Vec<_>>()
    );

    // The agent goes silent: after the timeout the fallback takes over and grows the window.
    seen.reports.clear();
    wait_until(inst, &mut seen, Duration::from_secs(5), "the fallback after silence", |s| {
        s.reports.iter().any(|r| r.fallback && r.cwnd_pkts > 10)
    });

    stop.store(true, Ordering::Relaxed);
    let sent = flow.join().unwrap();
    assert!(sent > 1 << 20);
    wait_until(inst, &mut seen, Duration::from_secs(5), "the close record", |s| s.closes.contains(&c.fid));
    let counters = inst.counters();
    assert!(counters.acks > 0 && counters.records > 0 && counters.fallback_acks > 0, "{counters:?}");
    assert_eq!(counters.ring_drops, 0);
    assert!(inst.flow_info(c.fid).is_none(), "release forgets the flow");
}

#[test]
fn per_ack_records_account_for_every_acked_byte_and_the_control_entry_applies() {
    if skip("per_ack_records_account_for_every_acked_byte_and_the_control_entry_applies") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut t = TestInstance::load_with("p", Knobs::default(), Records::PerAck);
    assert_eq!(t.inst.records(), Records::PerAck);
    let name = t.inst.name().to_string();
    let net = TestNetns::new("p");
    let stop = Arc::new(AtomicBool::new(false));
    let fd = Arc::new(Mutex::new(None));
    let flow = bulk(net.ns.clone(), Some(name), Arc::clone(&stop), Arc::clone(&fd));
    let inst = &mut t.inst;
    let mut seen = PerAckSeen::default();
    seen.drain_for(inst, Duration::from_millis(500), false);
    let fid = seen.creates.first().expect("a create record").fid;
    let before: Vec<ccp_ebpf::Ack> = seen.acks.iter().filter(|a| a.fid == fid).copied().collect();
    assert!(before.len() > 100, "one record per ACK: {}", before.len());
    assert!(before.iter().all(|a| a.fallback && a.mss > 1000 && !a.timeout), "no control entry: the fallback steers");
    assert!(before.iter().filter(|a| a.rtt_us.is_some()).count() * 2 > before.len(), "most ACKs carry an RTT sample");
    assert!(before.iter().any(|a| a.rate_delivered > 0 && a.rate_snd_us > 0 && a.rate_rcv_us > 0), "rate samples");

    // A command of 10 packets holds the window, as in folded mode.
    inst.heartbeat().unwrap();
    let mss = before.last().unwrap().mss;
    inst.set_control(fid, &Control { cwnd_bytes: Some(10 * u64::from(mss)), ..Control::default() }, 7).unwrap();
    let from = seen.acks.len();
    seen.drain_for(inst, Duration::from_millis(300), true);
    let held: Vec<ccp_ebpf::Ack> = seen.acks[from..].iter().filter(|a| a.fid == fid).copied().collect();
    let late = &held[held.len() / 2..];
    assert!(!late.is_empty() && late.iter().all(|a| a.cwnd_pkts == 10 && !a.fallback), "the window is held at 10");

    stop.store(true, Ordering::Relaxed);
    let _ = flow.join().unwrap();
    let t0 = Instant::now();
    while !seen.closes.iter().any(|c| c.fid == fid) {
        assert!(t0.elapsed() < Duration::from_secs(5), "the close record");
        seen.drain_for(inst, Duration::from_millis(5), false);
    }
    assert_eq!(seen.reports, 0, "no folded reports in per-ACK mode");
    assert_eq!(inst.counters().ring_drops, 0);
    // Every ACK is accounted for: the records' bytes add up to the flow's life total (less at
    // most the FIN's ACK).
    let life = seen.closes.iter().find(|c| c.fid == fid).unwrap().bytes_acked;
    let per_ack: u64 = seen.acks.iter().filter(|a| a.fid == fid).map(|a| a.bytes_acked).sum();
    assert!(per_ack <= life && life - per_ack <= u64::from(mss), "{per_ack} of {life} bytes");
}

#[derive(Default)]
struct PerAckSeen {
    creates: Vec<Create>,
    acks: Vec<ccp_ebpf::Ack>,
    closes: Vec<ccp_ebpf::Close>,
    reports: usize,
}

impl PerAckSeen {
    /// Drains the ring every 5 ms for `d` (refreshing the heartbeat if `beat`).
    fn drain_for(&mut self, inst: &mut Instance, d: Duration, beat: bool) {
        let t0 = Instant::now();
        loop {
            if beat {
                inst.heartbeat().unwrap();
            }
            inst.drain_per_ack(|r| match r.expect("records decode") {
                PerAckRecord::Ack(a) => self.acks.push(a),
                PerAckRecord::Record(Record::Create(c)) => self.creates.push(c),
                PerAckRecord::Record(Record::Close(c)) => self.closes.push(c),
                PerAckRecord::Record(Record::Report(_)) => self.reports += 1,
            })
            .unwrap();
            if t0.elapsed() >= d {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn attach_switches_a_running_flow_and_detach_restores_it() {
    if skip("attach_switches_a_running_flow_and_detach_restores_it") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut t = TestInstance::load("a", Knobs::default());
    let name = t.inst.name().to_string();
    let net = TestNetns::new("a");
    let state_dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cc_name: name.clone(),
        pin_dir: t.inst.pin_dir().to_path_buf(),
        state_file: state_dir.path().join("attach.json"),
        restore_cc: "reno".into(),
    };
    let attacher = Attacher::from_pins(settings);
    let stop = Arc::new(AtomicBool::new(false));
    let fd = Arc::new(Mutex::new(None));
    let flow = bulk(net.ns.clone(), Some("cubic".into()), Arc::clone(&stop), Arc::clone(&fd));
    let t0 = Instant::now();
    while fd.lock().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(5));
    }
    let sender = fd.lock().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(100));

    let ns = Namespaces { paths: vec![net.ns.path.clone()], all: false };
    let attach = Attach {
        existing: Some(Filter::all()),
        namespaces: ns.clone(),
        cgroups: Vec::new(),
        new_flows: Filter::all(),
        set_default: false,
    };
    let out = attacher.attach(&attach).unwrap();
    let ours: Vec<_> = out.switched.iter().filter(|s| s.errno.is_none()).collect();
    assert_eq!(ours.len(), 2, "both ends of the flow: {:?}", out.switched);
    assert!(ours.iter().any(|s| s.from == "cubic"), "{:?}", out.switched);
    assert_eq!(get_cc(sender), name);

    let mut seen = Seen::default();
    let inst = &mut t.inst;
    wait_until(inst, &mut seen, Duration::from_secs(5), "the switched flow's create and reports", |s| {
        s.creates.iter().any(|c| c.existing && c.prev_cc.as_deref() == Some("cubic")) && s.reports.len() > 3
    });

    let out = attacher.detach(&Detach { namespaces: ns, ..Detach::default() }).unwrap();
    assert!(out.switched.iter().all(|s| s.errno.is_none()), "{:?}", out.switched);
    assert!(out.switched.iter().any(|s| s.to == "cubic"), "the sender goes back to cubic: {:?}", out.switched);
    assert!(out.switched.iter().any(|s| s.to == "bbr"), "the receiver back to the netns default: {:?}", out.switched);
    assert_eq!(get_cc(sender), "cubic");
    wait_until(inst, &mut seen, Duration::from_secs(5), "close records", |s| s.closes.len() >= 2);
    assert!(!state_dir.path().join("attach.json").exists(), "nothing left to undo");
    stop.store(true, Ordering::Relaxed);
    flow.join().unwrap();
}

/// Drains `inst` (beating its heart, as a live agent does) until a report satisfies `cond`.
fn wait_for_report(inst: &mut Instance, timeout: Duration, what: &str, cond: impl Fn(&KernelReport) -> bool) {
    let t0 = Instant::now();
    let mut seen = Seen::default();
    loop {
        inst.heartbeat().unwrap();
        drain(inst, &mut seen);
        if seen.reports.iter().any(&cond) {
            return;
        }
        let last = seen.reports.last().copied();
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}; last report {last:?}");
        seen.reports.clear();
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Unpins a crashed agent's maps when the test ends, however it ends.
struct Pins(PathBuf);

impl Drop for Pins {
    fn drop(&mut self) {
        if let Ok(dir) = std::fs::read_dir(&self.0) {
            for e in dir.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn an_agent_restarted_on_its_predecessors_maps_is_obeyed_where_that_one_had_moved_the_flow() {
    let test = "an_agent_restarted_on_its_predecessors_maps_is_obeyed_where_that_one_had_moved_the_flow";
    if skip(test) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let pin_dir = PathBuf::from(format!("/sys/fs/bpf/ccp-test-restart-{pid}"));
    let pins = Pins(pin_dir.clone());
    // Four slots, so a flow is easily moved away from its home slot.
    let cfg = Config {
        name: format!("ccptr{}", pid % 10_000),
        pin_dir: pin_dir.clone(),
        ring_bytes: 1 << 20,
        max_flows: 4,
        knobs: Knobs { silence_timeout: Duration::from_millis(300), ..Knobs::default() },
    };
    let mut first = Instance::load(cfg.clone()).expect("load the congestion control");
    let net = TestNetns::new("restart");
    let stop = Arc::new(AtomicBool::new(false));
    let fd = Arc::new(Mutex::new(None));
    let flow = bulk(net.ns.clone(), Some(cfg.name.clone()), Arc::clone(&stop), Arc::clone(&fd));
    let mut seen = Seen::default();
    wait_until(&mut first, &mut seen, Duration::from_secs(5), "a create record", |s| !s.creates.is_empty());
    wait_until(&mut first, &mut seen, Duration::from_secs(5), "reports", |s| !s.reports.is_empty());
    let fid = seen.creates[0].fid;
    let mss = u64::from(seen.reports.last().unwrap().mss);

    // The first agent: another flow's entry holds this flow's home slot, so its entry is moved.
    let window = |pkts: u64| Control { cwnd_bytes: Some(pkts * mss), ..Control::default() };
    first.heartbeat().unwrap();
    first.set_control(fid.wrapping_add(4), &window(50), 1).unwrap();
    first.set_control(fid, &window(10), 2).unwrap();
    assert_eq!(ccp_ebpf::occupancy::pinned_occupancy(&pin_dir).unwrap().ctrl_moved, 1);
    wait_for_report(&mut first, Duration::from_secs(5), "the moved entry in force", |r| {
        r.ctrl_seq == 2 && r.cwnd_pkts == 10 && !r.fallback
    });

    // It crashes: its congestion control is unregistered, the flow keeps running the program,
    // and the pinned maps stay for the next agent.
    drop(first);
    let mut second = Instance::load(cfg).expect("load again on the pinned maps");
    assert!(second.adopted_maps());
    let o = ccp_ebpf::occupancy::pinned_occupancy(&pin_dir).unwrap();
    assert_eq!(o.ctrl_moved, 0, "the first agent's moved-slot records are gone");
    // The second agent knows nothing of the first one's slots: the flow goes home. The first
    // agent's entry, still where the flow's program last found it, must not hide this one.
    second.set_control(fid, &window(20), 3).unwrap();
    wait_for_report(&mut second, Duration::from_secs(5), "the second agent's entry in force", |r| {
        r.ctrl_seq == 3 && r.cwnd_pkts == 20 && !r.fallback
    });
    assert!(ccp_ebpf::occupancy::pinned_occupancy(&pin_dir).unwrap().commanded.contains(&fid));

    stop.store(true, Ordering::Relaxed);
    flow.join().unwrap();
    second.unpin();
    drop(second);
    drop(pins);
}
