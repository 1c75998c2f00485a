//! The flood figure: an unprivileged user (uid 65534, in a user and network namespace of its
//! own, as `unshare -rn` gives any user) drives reports from thousands of loopback flows on the
//! agent's congestion control, and hammers the control socket; meanwhile the heartbeat never
//! lapses, `ctl status` answers, SIGTERM stops the agent within 1 s, and its memory stays bounded.
//!
//! CI runs 10,000 flows for ~12 s at 10 ms reports; `CCP_FLOOD_FLOWS`, `CCP_FLOOD_SECS` and
//! `CCP_FLOOD_INTERVAL_US` make the benchmark variant bigger, longer or denser (run it with
//! `--release`: the figures in docs/performance.md are from that).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccp_agent::control::client;
use ccp_agent::control::protocol::Request;
use ccp_integration_tests::bin;

use super::support::*;

/// The agent's last heartbeat (CLOCK_MONOTONIC ns), read from its pinned knobs map.
fn heartbeat_ns(pin_dir: &Path) -> Option<u64> {
    let path = std::ffi::CString::new(pin_dir.join("knobs").to_str()?).ok()?;
    let mut attr = [0u64; 16];
    attr[0] = path.as_ptr() as u64;
    // SAFETY: BPF_OBJ_GET (7) with a valid attr.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 7, attr.as_mut_ptr(), 128) } as i32;
    if fd < 0 {
        return None;
    }
    let key = 0u32;
    let mut value = [0u8; 56];
    let mut attr = [0u64; 16];
    attr[0] = fd as u64;
    attr[1] = &key as *const u32 as u64;
    attr[2] = value.as_mut_ptr() as u64;
    // SAFETY: BPF_MAP_LOOKUP_ELEM (1) into a buffer of the value's size.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, 1, attr.as_mut_ptr(), 128) };
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    (rc == 0).then(|| u64::from_ne_bytes(value[..8].try_into().unwrap()))
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

fn env_or(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn an_unprivileged_flood_leaves_heartbeat_control_and_sigterm_working() {
    if skip_without_root("an_unprivileged_flood_leaves_heartbeat_control_and_sigterm_working") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The attack needs unprivileged user namespaces; where the kernel forbids them, so is it.
    let probe =
        Command::new(bin("ccp-flood")).args(["flows", "--cc", "cubic", "--flows", "1", "--secs", "0.1"]).output().unwrap();
    if !probe.status.success() && String::from_utf8_lossy(&probe.stderr).contains("unshare") {
        eprintln!(
            "SKIPPED an_unprivileged_flood_leaves_heartbeat_control_and_sigterm_working: this kernel refuses unprivileged user \
             namespaces ({}), so the flood's route to the agent does not exist here",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return;
    }
    assert!(probe.status.success(), "ccp-flood probe: {}", String::from_utf8_lossy(&probe.stderr));
    let flows = env_or("CCP_FLOOD_FLOWS", 10_000.0) as usize;
    let secs = env_or("CCP_FLOOD_SECS", 12.0);
    let tag = tag("flood");
    let interval_us = env_or("CCP_FLOOD_INTERVAL_US", 10_000.0) as u64;
    let setup = AgentSetup::new(&tag, &format!("[default]\nalgorithm = \"reno\"\n[reports]\ninterval_us = {interval_us}\n"));
    let agent = setup.start_with("info", &[]);
    let pin_dir = setup.pin_dir();
    let socket = setup.control_socket();

    let mut flood = Command::new(bin("ccp-flood"))
        .args(["flows", "--cc", &setup.name, "--flows", &flows.to_string(), "--secs", &secs.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ccp-flood flows");
    // The measured window starts once every flow is connected (`{"ready": N}` on the flood's
    // stderr): the figure is about the agent under the flood, not how fast this machine opens
    // sockets, and an agent stopped mid-setup would leave the rest of the flows refused.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let flood_stderr = flood.stderr.take().unwrap();
    let stderr_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(flood_stderr)).map_while(Result::ok) {
            if line.contains("\"ready\"") {
                let _ = ready_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let setup_started = Instant::now();
    if ready_rx.recv_timeout(Duration::from_secs(120)).is_err() {
        let _ = flood.kill();
        let _ = flood.wait();
        panic!(
            "the flood's {flows} flows were not all connected within {:.0} s: {}",
            setup_started.elapsed().as_secs_f64(),
            stderr_reader.join().unwrap_or_default()
        );
    }
    eprintln!("flood setup: {flows} flows connected in {:.2} s", setup_started.elapsed().as_secs_f64());
    let hammer = Command::new(bin("ccp-flood"))
        .args(["connect", "--path", socket.to_str().unwrap(), "--secs", &(secs - 2.0).to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ccp-flood connect");

    // The heartbeat, read every 10 ms: the longest time it stood still.
    let stop = Arc::new(AtomicBool::new(false));
    let (s, p) = (stop.clone(), pin_dir.clone());
    let watcher = std::thread::spawn(move || {
        let (mut last, mut since, mut max_gap) = (None, Instant::now(), Duration::ZERO);
        while !s.load(Ordering::Relaxed) {
            let hb = heartbeat_ns(&p);
            if hb != last {
                last = hb;
                since = Instant::now();
            }
            max_gap = max_gap.max(since.elapsed());
            std::thread::sleep(Duration::from_millis(10));
        }
        max_gap
    });

    // `ctl status` every 100 ms once the flows are up, until the flood ends.
    let t0 = Instant::now();
    let mut latencies_ms = Vec::new();
    let mut full_ms = Vec::new();
    let mut most_flows = 0;
    let mut rss_peak = 0;
    while t0.elapsed().as_secs_f64() < secs - 1.0 {
        let t = Instant::now();
        let reply = client::call(&socket, &Request::Status { summary: true, offset: None, limit: None });
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let reply = reply.expect("ctl status answers under the flood");
        most_flows = most_flows.max(reply.result["flow_count"].as_u64().unwrap_or(0) as usize);
        if t0.elapsed().as_secs_f64() > 3.0 {
            latencies_ms.push(ms);
        }
        // The whole table (every flow's row) now and then.
        if full_ms.len() < 3 && t0.elapsed().as_secs_f64() > 4.0 + full_ms.len() as f64 {
            let t = Instant::now();
            let reply =
                client::call(&socket, &Request::Status { summary: false, offset: None, limit: None }).expect("full ctl status");
            full_ms.push((t.elapsed().as_secs_f64() * 1e3, reply.result["flows"].as_array().map_or(0, Vec::len)));
        }
        rss_peak = rss_peak.max(rss_kib(agent.pid(), "VmRSS:"));
        std::thread::sleep(Duration::from_millis(100));
    }
    // SIGTERM while the flood still runs.
    let asked = Instant::now();
    let stopped = agent.stop();
    let stop_s = asked.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let max_gap = watcher.join().unwrap();
    let flood = flood.wait_with_output().unwrap();
    let hammer = hammer.wait_with_output().unwrap();
    let flood_err = stderr_reader.join().unwrap_or_default();
    let flood_out = String::from_utf8_lossy(&flood.stdout).trim().to_string();
    let hammer_out = String::from_utf8_lossy(&hammer.stdout).trim().to_string();
    let reports: u64 = stopped
        .log
        .lines()
        .filter(|l| l.contains("agent stopped"))
        .find_map(|l| l.split("\"reports\":").nth(1).and_then(|r| r.split([',', '}']).next()).and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    let (p50, p99, max) =
        (percentile(latencies_ms.clone(), 0.5), percentile(latencies_ms.clone(), 0.99), percentile(latencies_ms.clone(), 1.0));
    eprintln!(
        "flood figure: {flows} flows by uid 65534 ({flood_out}), control hammer {hammer_out}; agent: {reports} reports, \
         at most {most_flows} flows in status, heartbeat longest still {max_gap:?}, ctl status p50 {p50:.1} ms p99 {p99:.1} ms \
         max {max:.1} ms over {} calls (--summary), full status (ms, flows) {full_ms:?}, SIGTERM -> exit {stop_s:.3} s, peak RSS {} MiB",
        latencies_ms.len(),
        rss_peak / 1024
    );
    let _ = std::fs::write(std::env::temp_dir().join("ccp-flood-agent.log"), &stopped.log);
    let tail: Vec<&str> = stopped.log.lines().rev().take(15).collect();
    eprintln!("agent log, last lines:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    assert!(flood.status.success(), "the flood ran: {flood_err}");
    // A handful of sockets have been seen refused (ENOENT) under parallel load: the flood is
    // about the agent, so 99 % of the flows on it is the bar.
    let refused: usize = flood_out
        .split("\"cc_refused\":")
        .nth(1)
        .and_then(|r| r.split([',', '}']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(flows);
    assert!(refused * 100 <= flows, "an unprivileged user can put loopback flows on the agent: {flood_out}");
    assert!(most_flows >= flows / 2, "the agent controlled the flood's flows ({most_flows} seen)");
    assert!(hammer_out.contains("\"stream_ok\":0"), "uid 65534 cannot connect to the control socket: {hammer_out}");
    assert!(stopped.status.success(), "clean exit under the flood");
    assert!(max_gap < Duration::from_millis(1000), "the heartbeat stood still {max_gap:?} (silence timeout 1 s)");
    assert!(stop_s < 1.0, "SIGTERM took {stop_s:.3} s");
    assert!(p99 < 100.0, "ctl status p99 {p99:.1} ms");
    assert!(rss_peak < 512 * 1024, "peak RSS {} MiB", rss_peak / 1024);
}
