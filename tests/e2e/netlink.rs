//! The netlink datapath adapter against a user-space peer that speaks ccp-kernel's framing.
//!
//! ccp-kernel cannot load on this kernel (no module support), so a test process takes its
//! place on NETLINK_USERSOCK: it multicasts to group 22 as the kernel does, and the agent
//! replies to the sender's port id (0 for the real kernel). The agent hears a user-space peer
//! only with `[datapath.netlink] allow_user_peers = true`; by default it is refused.

use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};

use ccp_agent::datapath::libccp::fold::Fold;
use ccp_integration_tests::{bin, is_root, Agent};
use ccp_wire::{implicit, Create, Measure, Msg, RegKind};

struct FakeKernel {
    fd: OwnedFd,
    /// The multicast group it sends to (ccp-kernel: 22).
    group: u32,
}

fn sockaddr(pid: u32, groups: u32) -> libc::sockaddr_nl {
    // SAFETY: plain old data.
    let mut sa: libc::sockaddr_nl = unsafe { zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    sa.nl_pid = pid;
    sa.nl_groups = groups;
    sa
}

impl FakeKernel {
    fn new() -> FakeKernel {
        FakeKernel::on_group(22)
    }

    fn on_group(group: u32) -> FakeKernel {
        // SAFETY: socket/bind with valid arguments; the fd is owned immediately.
        unsafe {
            let raw = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_USERSOCK);
            assert!(raw >= 0, "netlink socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(raw);
            let sa = sockaddr(0, 0);
            assert_eq!(libc::bind(raw, (&sa as *const libc::sockaddr_nl).cast(), size_of::<libc::sockaddr_nl>() as u32), 0);
            let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as u32,
            );
            FakeKernel { fd, group }
        }
    }

    /// Multicasts to ccp-kernel's group, as the kernel module does.
    fn send(&self, msg: &Msg) {
        let mut framed = Vec::new();
        ccp_wire::netlink::frame(&msg.to_bytes().unwrap(), &mut framed);
        self.send_raw(&framed);
    }

    fn send_raw(&self, bytes: &[u8]) {
        let sa = sockaddr(0, 1 << (self.group - 1));
        // SAFETY: valid buffer and address.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        // The broadcast reaches the group; the unicast half of the same send goes to port 0,
        // where no kernel socket listens without ccp-kernel, hence ECONNREFUSED.
        let err = std::io::Error::last_os_error();
        assert!(n >= 0 || err.raw_os_error() == Some(libc::ECONNREFUSED), "sendto: {err}");
    }

    /// Receives messages until `pred` accepts one or the deadline passes.
    fn expect(&self, what: &str, timeout: Duration, mut pred: impl FnMut(&Msg) -> bool) -> Msg {
        let t0 = Instant::now();
        let mut buf = vec![0u8; 65536];
        let mut seen = Vec::new();
        while t0.elapsed() < timeout {
            // SAFETY: valid buffer.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                continue;
            }
            let payload = ccp_wire::netlink::unframe(&buf[..n as usize]).expect("agent sends well-formed netlink frames");
            for m in ccp_wire::decode_all(payload) {
                let m = m.expect("agent sends well-formed libccp messages");
                if pred(&m) {
                    return m;
                }
                seen.push(m);
            }
        }
        panic!("no {what} within {timeout:?}; saw {seen:?}");
    }
}

/// A running agent on the netlink datapath (Reno), with `settings` under `[datapath.netlink]`;
/// the directory holds its config and must outlive it.
fn netlink_agent(settings: &str) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, format!("[datapath.netlink]\n{settings}\n")).unwrap();
    let mut cmd = Command::new(bin("ccp-agent"));
    cmd.args(["--log-level", "debug", "run", "--no-control", "--datapath", "netlink", "-a", "reno", "--config"]).arg(&config);
    let agent = Agent::spawn(cmd, None);
    agent.wait_log("listening", Duration::from_secs(10));
    (dir, agent)
}

#[test]
fn agent_serves_a_ccp_kernel_style_peer_over_netlink() {
    if !is_root() {
        eprintln!("SKIPPED: the netlink test needs root (NETLINK_USERSOCK multicast group membership); CI runs it as root");
        return;
    }
    let (_dir, agent) = netlink_agent("allow_user_peers = true");
    let kernel = FakeKernel::new();
    let fold = Fold::compile().unwrap();

    kernel.send(&Msg::Ready(ccp_wire::Ready { datapath_id: 7 }));
    let install = kernel.expect("INSTALL", Duration::from_secs(5), |m| matches!(m, Msg::Install(_)));
    let Msg::Install(install) = install else { unreachable!() };
    assert_eq!(install.program_uid, 1, "the fold is installed as uid 1 (wipes a stale table)");
    assert_eq!(install, fold.program.install(1));

    // ccp-kernel's CREATE carries network-byte-order addresses and ports.
    let create = Create {
        sid: 3,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: u32::from_le_bytes([10, 0, 0, 1]),
        src_port: u32::from(40000u16.to_be()),
        dst_ip: u32::from_le_bytes([10, 0, 0, 2]),
        dst_port: u32::from(5201u16.to_be()),
        cong_alg: Some("reno".into()),
    };
    kernel.send(&Msg::Create(create));
    kernel.expect("CHANGE_PROG", Duration::from_secs(5), |m| matches!(m, Msg::ChangeProg(c) if c.sid == 3 && c.program_uid == 1));
    let first = kernel.expect("UPDATE_FIELDS", Duration::from_secs(5), |m| matches!(m, Msg::UpdateFields(u) if u.sid == 3));
    let Msg::UpdateFields(first) = first else { unreachable!() };
    assert!(
        first.fields.iter().any(|f| f.kind == RegKind::Implicit && f.index == implicit::CWND && f.value == 14480),
        "{first:?}"
    );
    agent.wait_log("10.0.0.1", Duration::from_secs(5));
    assert!(agent.log().contains("5201"), "ports decoded from network byte order:\n{}", agent.log());

    // One window acknowledged in slow start: Reno doubles the window.
    let mut fields = vec![0u64; fold.program.report_fields().len()];
    let set = |f: &mut Vec<u64>, name: &str, v: u64| f[fold.program.report_index(name).unwrap()] = v;
    set(&mut fields, "acked_bytes", 14480);
    set(&mut fields, "acked_pkts", 10);
    set(&mut fields, "rtt_samples", 10);
    set(&mut fields, "rtt_sum_us", 10 * 20_000);
    set(&mut fields, "rtt_min_us", 20_000);
    set(&mut fields, "cwnd_bytes", 14480);
    set(&mut fields, "now_us", 20_000);
    // The window limited the sender (the fold's per-ACK test): a window only grows then.
    set(&mut fields, "cwnd_limited", 1);
    kernel.send(&Msg::Measure(Measure { sid: 3, program_uid: 1, fields: fields.clone() }));
    kernel.expect(
        "the doubled window",
        Duration::from_secs(5),
        |m| matches!(m, Msg::UpdateFields(u) if u.fields.iter().any(|f| f.index == implicit::CWND && f.value == 28960)),
    );

    // Garbage on the socket is logged and survived.
    kernel.send_raw(&[0xff; 7]);
    let mut bogus = Vec::new();
    ccp_wire::netlink::frame(&[1, 0, 9, 0, 3, 0, 0, 0, 1], &mut bogus);
    kernel.send_raw(&bogus);
    set(&mut fields, "acked_bytes", 28960);
    set(&mut fields, "now_us", 40_000);
    kernel.send(&Msg::Measure(Measure { sid: 3, program_uid: 1, fields }));
    kernel.expect(
        "a window after the garbage",
        Duration::from_secs(5),
        |m| matches!(m, Msg::UpdateFields(u) if u.fields.iter().any(|f| f.index == implicit::CWND && f.value == 57920)),
    );

    kernel.send(&Msg::Measure(Measure { sid: 3, program_uid: 0, fields: vec![] }));
    agent.wait_log("flow closed", Duration::from_secs(5));
    assert!(agent.stop().status.success());
}

#[test]
fn a_user_space_peer_is_refused_by_default() {
    if !is_root() {
        eprintln!("SKIPPED: the netlink test needs root (NETLINK_USERSOCK multicast group membership); CI runs it as root");
        return;
    }
    // Its own multicast group, so the other test's agent (which hears user peers) stays out.
    let (_dir, agent) = netlink_agent("group = 21");
    let kernel = FakeKernel::on_group(21);
    kernel.send(&Msg::Ready(ccp_wire::Ready { datapath_id: 7 }));
    let create = Create {
        sid: 3,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: u32::from_le_bytes([10, 0, 0, 1]),
        src_port: u32::from(40000u16.to_be()),
        dst_ip: u32::from_le_bytes([10, 0, 0, 2]),
        dst_port: u32::from(5201u16.to_be()),
        cong_alg: Some("reno".into()),
    };
    for _ in 0..200 {
        kernel.send(&Msg::Create(create.clone()));
    }
    agent.wait_log("refusing datagrams", Duration::from_secs(5));
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: valid buffer; the socket has a 200 ms receive timeout.
    let n = unsafe { libc::recv(kernel.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert!(n < 0, "the agent answered a refused peer ({n} bytes)");
    let stopped = agent.stop();
    assert!(stopped.status.success());
    let log = stopped.log;
    assert_eq!(log.matches("refusing datagrams").count(), 1, "refusals are not logged one per datagram:\n{log}");
    assert!(!log.contains("flow started") && !log.contains("new datapath"), "{log}");
}

/// The netlink half of the flood figure: uid 65534 multicasts CREATEs to the agent's group as
/// fast as it can (NETLINK_USERSOCK lets any user send to any group). The agent refuses every
/// one (not the kernel), logs it once per 10 s, builds no flow, keeps answering its control
/// socket, and stops on SIGTERM within 1 s.
#[test]
fn an_unprivileged_netlink_flood_is_refused_without_cost() {
    if !is_root() {
        eprintln!("SKIPPED: the netlink flood test needs root (it drops to uid 65534 itself); CI runs it as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    let socket = dir.path().join("ctl.sock");
    std::fs::write(&config, format!("[control]\nsocket = \"{}\"\n[datapath.netlink]\ngroup = 23\n", socket.display())).unwrap();
    let mut cmd = Command::new(bin("ccp-agent"));
    cmd.args(["--log-level", "info", "run", "--datapath", "netlink", "-a", "reno", "--config"]).arg(&config);
    let agent = Agent::spawn(cmd, None);
    agent.wait_log("listening", Duration::from_secs(10));

    let secs = 6.0;
    let flood = Command::new(bin("ccp-flood"))
        .args(["netlink", "--group", "23", "--secs", &secs.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn ccp-flood netlink");
    let t0 = std::time::Instant::now();
    let (mut worst_ms, mut calls, mut rss_peak_kib) = (0.0f64, 0, 0u64);
    let mut refused = 0;
    while t0.elapsed().as_secs_f64() < secs - 0.5 {
        let t = std::time::Instant::now();
        let r = ccp_agent::control::client::call(
            &socket,
            &ccp_agent::control::protocol::Request::Status { summary: true, offset: None, limit: None },
        )
        .expect("ctl status answers under the flood");
        worst_ms = worst_ms.max(t.elapsed().as_secs_f64() * 1e3);
        calls += 1;
        refused = r.result["datapath_stats"][0]["refused_datagrams"].as_u64().unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap_or_default();
        let rss = status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
        rss_peak_kib = rss_peak_kib.max(rss.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    }
    let asked = std::time::Instant::now();
    let stopped = agent.stop();
    let stop_s = asked.elapsed().as_secs_f64();
    let out = flood.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).trim().to_string();
    eprintln!(
        "netlink flood figure: uid 65534 sent {out}; the agent refused {refused} by the last status, worst ctl status \
         {worst_ms:.1} ms over {calls} calls, peak RSS {} MiB, SIGTERM -> exit {stop_s:.3} s",
        rss_peak_kib / 1024
    );
    assert!(refused > 1000, "the flood reached the agent and was refused: {refused}");
    assert!(stopped.status.success());
    assert!(stop_s < 1.0, "SIGTERM took {stop_s:.3} s");
    assert!(worst_ms < 100.0, "ctl status took {worst_ms:.1} ms under the flood");
    assert!(rss_peak_kib < 64 * 1024, "peak RSS {} MiB", rss_peak_kib / 1024);
    let log = stopped.log;
    assert!(log.matches("refusing datagrams").count() <= 2, "refusals logged at most every 10 s:\n{log}");
    assert!(!log.contains("flow started"), "no flow from a refused peer");
}
