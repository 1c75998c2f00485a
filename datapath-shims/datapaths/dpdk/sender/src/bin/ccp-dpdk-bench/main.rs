//! ccp-dpdk-bench: the DPDK datapath against the kernel's TCP sender, every figure next to its
//! anchor measured in the same run.
//!
//! - Goodput over one veth pair, 1 and 16 connections: `ccp-dpdk send` on `net_af_xdp` (its
//!   in-process Cubic, no agent, polling without pause) against the kernel's own TCP sender
//!   (Cubic, plain sockets) from the same namespace to the same receiver (`ccp-dpdk sink
//!   --no-verify`, a kernel socket program), twice:
//!   - **at equal segmentation**: checksum, TSO, GSO and GRO off on both veth ends, as AF_XDP
//!     needs them for ccp-dpdk, so both stacks put one MSS per frame on the wire and checksum it
//!     in software: the ratio measures the stacks;
//!   - **as the kernel runs by default**: the same veth with its offloads on again for the
//!     kernel's runs (64 KB TSO/GSO frames, no checksumming): the ratio an operator sees.
//!
//!   The three configurations take turns, run by run.
//! - The same DPDK run steered by ccp-agent (Reno, through libccp): goodput, the datapath's cost
//!   per ACK in libccp (fold + IPC), and the time from an ACK whose invoke sent a report to the
//!   agent's command for it arriving back.
//! - The eBPF datapath's own figures from `ccp-ebpf-bench --part bulk` in the same run: BPF cost
//!   per ACK and ACK → agent latency.
//!
//! Needs root, and release builds of ccp-dpdk, ccp-agent and ccp-ebpf-bench next to this binary.

use std::io::{BufRead, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

#[derive(Debug, Parser)]
#[command(name = "ccp-dpdk-bench", about = "Benchmarks of the DPDK datapath against the kernel's TCP sender (needs root)")]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Seconds per run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Connection counts to measure (comma-separated).
    #[arg(long, default_value = "1,16", value_delimiter = ',')]
    flows: Vec<u32>,
    /// Runs of each configuration, interleaved; the figures are medians.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Skip the eBPF datapath's figures (ccp-ebpf-bench).
    #[arg(long)]
    no_ebpf: bool,
    /// Skip the run steered by ccp-agent (goodput only).
    #[arg(long)]
    no_agent: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// (internal) The kernel TCP sender: N connections writing for S seconds.
    #[command(hide = true)]
    KernelSender {
        #[arg(long)]
        dst: SocketAddr,
        #[arg(long)]
        flows: u32,
        #[arg(long)]
        seconds: u64,
    },
}

const DP_NS: &str = "ccpdb-dp";
const RX_NS: &str = "ccpdb-rx";
const DEV_A: &str = "ccpdb-a";
const DEV_B: &str = "ccpdb-b";
const OUR_IP: &str = "10.99.0.1";
const DST: &str = "10.99.0.2:5201";

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The two namespaces and the veth pair; deleted on drop.
struct Net;

impl Net {
    fn up() -> anyhow::Result<Net> {
        for ns in [DP_NS, RX_NS] {
            // Leftovers of an interrupted run; none is the usual case.
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
        ip(&["netns", "add", DP_NS])?;
        let net = Net;
        ip(&["netns", "add", RX_NS])?;
        ip(&["link", "add", DEV_A, "netns", DP_NS, "type", "veth", "peer", "name", DEV_B, "netns", RX_NS])?;
        ip(&["-n", RX_NS, "addr", "add", "10.99.0.2/24", "dev", DEV_B])?;
        for (ns, dev) in [(DP_NS, DEV_A), (RX_NS, DEV_B)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        net.offloads(false)?;
        Ok(net)
    }

    /// Checksum, TSO, GSO and GRO on both veth ends: off for AF_XDP (a veth otherwise hands out
    /// frames with unfinished checksums) and for the kernel at equal segmentation; on for the
    /// kernel as it runs by default.
    fn offloads(&self, on: bool) -> anyhow::Result<()> {
        let v = if on { "on" } else { "off" };
        for (ns, dev) in [(DP_NS, DEV_A), (RX_NS, DEV_B)] {
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "ethtool", "-K", dev, "tx", v, "gso", v, "tso", v, "gro", v])
                .output()
                .context("running ethtool")?;
            if !out.status.success() {
                bail!("ethtool -K {dev} tx/gso/tso/gro {v}: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
        }
        Ok(())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [DP_NS, RX_NS] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A child with its stdout lines collected; terminated on drop.
struct Proc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> anyhow::Result<Proc> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().context("spawn")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let (l, e) = (Arc::clone(&lines), Arc::clone(&stderr));
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut e = e.lock().unwrap();
                // The tail is what explains a failure; keep it bounded.
                if e.len() > 64 * 1024 {
                    let cut = e.len() - 32 * 1024;
                    e.drain(..cut);
                }
                e.push_str(&line);
                e.push('\n');
            }
        });
        Ok(Proc { child, lines, stderr })
    }

    fn wait(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if let Some(st) = self.child.try_wait()? {
                std::thread::sleep(Duration::from_millis(100));
                if !st.success() {
                    let err = self.stderr.lock().unwrap().clone();
                    let tail: Vec<&str> = err.lines().rev().take(15).collect();
                    bail!("exited with {st}; the end of its stderr:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("did not finish within {} s", timeout.as_secs())
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(300));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name(name);
    if !p.exists() {
        bail!("{} not found: build it (cargo build --release -p ccp-dpdk -p ccp-agent -p ccp-bench-harness)", p.display());
    }
    Ok(p)
}

/// Bytes the sink received from connections that ended since `from` lines.
fn sink_bytes(sink: &Proc, from: usize) -> (u64, usize) {
    let lines = sink.lines();
    let bytes = lines[from.min(lines.len())..]
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["bytes"].as_u64())
        .sum();
    (bytes, lines.len())
}

fn wait_lines(sink: &Proc, n: usize) {
    let t0 = Instant::now();
    while sink.lines().len() < n && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One kernel run, with the veth's offloads on or off; the namespace's veth end gets the address
/// for the run, and the offloads are off again after it, for ccp-dpdk.
fn kernel_run(net: &Net, sink: &Proc, flows: u32, seconds: u64, offloads: bool) -> anyhow::Result<f64> {
    net.offloads(offloads)?;
    let r = kernel_run_addressed(sink, flows, seconds);
    net.offloads(false)?;
    r
}

fn kernel_run_addressed(sink: &Proc, flows: u32, seconds: u64) -> anyhow::Result<f64> {
    let before = sink.lines().len();
    ip(&["-n", DP_NS, "addr", "add", &format!("{OUR_IP}/24"), "dev", DEV_A])?;
    let t0 = Instant::now();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", DP_NS]).arg(std::env::current_exe()?).args(["kernel-sender", "--dst", DST]);
    cmd.args(["--flows", &flows.to_string(), "--seconds", &seconds.to_string()]);
    let mut p = Proc::spawn(cmd)?;
    let r = p.wait(Duration::from_secs(seconds + 30));
    let secs = t0.elapsed().as_secs_f64();
    ip(&["-n", DP_NS, "addr", "del", &format!("{OUR_IP}/24"), "dev", DEV_A])?;
    r.context("the kernel sender")?;
    wait_lines(sink, before + flows as usize);
    let (bytes, _) = sink_bytes(sink, before);
    Ok(bytes as f64 * 8.0 / secs / 1e9)
}

/// One DPDK run; the sender's summary line and its goodput (sink bytes over the run).
fn dpdk_run(sink: &Proc, flows: u32, seconds: u64, agent_dir: Option<&Path>) -> anyhow::Result<(f64, Value)> {
    let before = sink.lines().len();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", DP_NS]).arg(sibling("ccp-dpdk")?).arg("send");
    cmd.args(["--vdev", &format!("net_af_xdp0,iface={DEV_A}"), "--ip", OUR_IP, "--dst", DST, "--json"]);
    // Polling without pause, as DPDK applications run (the tool's default pauses 20 µs when a
    // pass finds nothing to do, for shared test hosts).
    cmd.args(["--flows", &flows.to_string(), "--seconds", &seconds.to_string(), "--report-ms", "100000", "--idle-sleep-us", "0"]);
    match agent_dir {
        Some(d) => {
            cmd.arg("--ipc-dir").arg(d).args(["--agent", "agent", "--ipc-name", "dpdk"]);
        }
        None => {
            cmd.arg("--no-agent");
        }
    }
    let t0 = Instant::now();
    let mut p = Proc::spawn(cmd)?;
    p.wait(Duration::from_secs(seconds + 30)).context("ccp-dpdk send")?;
    let secs = t0.elapsed().as_secs_f64();
    let summary = p
        .lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["summary"] == true)
        .context("no summary from ccp-dpdk")?;
    wait_lines(sink, before + flows as usize);
    let (bytes, _) = sink_bytes(sink, before);
    Ok((bytes as f64 * 8.0 / secs / 1e9, summary))
}

fn kernel_sender(dst: SocketAddr, flows: u32, seconds: u64) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..flows {
        let mut s = TcpStream::connect(dst).with_context(|| format!("connecting to {dst}"))?;
        let (stop, total) = (Arc::clone(&stop), Arc::clone(&total));
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 128 * 1024];
            ccp_user_tcp::source::fill_pattern(0, &mut buf);
            while !stop.load(Ordering::Relaxed) {
                match s.write(&buf) {
                    Ok(n) => {
                        total.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(_) => break,
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    println!("{}", total.load(Ordering::Relaxed));
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(Cmd::KernelSender { dst, flows, seconds }) = args.cmd {
        return kernel_sender(dst, flows, seconds);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("ccp-dpdk-bench needs root (network namespaces, AF_XDP)");
    }
    let net = Net::up()?;
    let mut sink_cmd = Command::new("ip");
    sink_cmd.args(["netns", "exec", RX_NS]).arg(sibling("ccp-dpdk")?).args(["sink", "--listen", DST, "--no-verify"]);
    let sink = Proc::spawn(sink_cmd)?;
    std::thread::sleep(Duration::from_millis(300));
    let mut out = serde_json::Map::new();
    let mut throughput = Vec::new();
    for &flows in &args.flows {
        let (mut same, mut offl, mut d) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.repeat {
            same.push(kernel_run(&net, &sink, flows, args.seconds, false)?);
            d.push(dpdk_run(&sink, flows, args.seconds, None)?.0);
            offl.push(kernel_run(&net, &sink, flows, args.seconds, true)?);
        }
        let (sg, og, dg) = (median(&same), median(&offl), median(&d));
        println!(
            "{flows:>2} connection(s): ccp-dpdk {dg:.3} Gbit/s; kernel TCP at equal segmentation {sg:.3} Gbit/s: ratio {:.2}; \
             kernel TCP with its offloads {og:.3} Gbit/s: ratio {:.2} (runs {d:.3?}, {same:.3?}, {offl:.3?})",
            dg / sg,
            dg / og
        );
        throughput.push(json!({
            "flows": flows,
            "dpdk_gbps": dg,
            "kernel_same_segments_gbps": sg,
            "kernel_offloads_gbps": og,
            "ratio_same_segments": dg / sg,
            "ratio_offloads": dg / og,
            "dpdk_runs": d,
            "kernel_same_segments_runs": same,
            "kernel_offloads_runs": offl,
        }));
    }
    out.insert("throughput".into(), Value::Array(throughput));
    if !args.no_agent {
        out.insert("agent".into(), agent_run(&sink, args.seconds)?);
    }
    drop(sink);
    if !args.no_ebpf {
        if let Some(v) = ebpf_figures(args.seconds)? {
            out.insert("ebpf".into(), v);
        }
    }
    write_json(args.json.as_deref(), out)
}

/// One connection steered by ccp-agent's Reno through libccp: goodput, libccp's cost per ACK and
/// the report-to-command round trip.
fn agent_run(sink: &Proc, seconds: u64) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let mut agent_cmd = Command::new(sibling("ccp-agent")?);
    agent_cmd.args(["run", "--datapath", "unix", "--ipc-dir"]).arg(dir.path());
    agent_cmd.args(["--ipc-name", "agent", "--algorithm", "reno", "--control-socket"]).arg(dir.path().join("ctl.sock"));
    let agent = Proc::spawn(agent_cmd)?;
    let t0 = Instant::now();
    while !dir.path().join("agent").exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (g, s) = dpdk_run(sink, 1, seconds, Some(dir.path()))?;
    drop(agent);
    println!(
        " 1 connection steered by ccp-agent (Reno): {g:.3} Gbit/s; libccp per ACK (fold + IPC) {} ns; ACK -> report -> agent -> command back p50 {} us, p99 {} us ({} samples; {} ACKs to the agent)",
        s["control_ns_per_ack"], s["report_to_command_p50_us"], s["report_to_command_p99_us"], s["report_to_command_samples"], s["acks_to_agent"]
    );
    Ok(json!({"gbps": g, "summary": s}))
}

/// The eBPF datapath's per-ACK cost and latency from `ccp-ebpf-bench --part bulk`, for comparison;
/// none (with a line saying so) when that benchmark fails.
fn ebpf_figures(seconds: u64) -> anyhow::Result<Option<Value>> {
    let dir = tempfile::tempdir()?;
    let json_path = dir.path().join("ebpf.json");
    let st = Command::new(sibling("ccp-ebpf-bench")?)
        .args(["--part", "bulk", "--repeat", "1", "--seconds", &seconds.min(5).to_string(), "--json"])
        .arg(&json_path)
        .stdout(Stdio::null())
        .status()?;
    if !st.success() {
        println!(" eBPF datapath: ccp-ebpf-bench failed ({st})");
        return Ok(None);
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path)?)?;
    let c = &v["veth"]["ccp_10ms"];
    println!(
        " eBPF datapath (same run, veth, Reno at 10 ms reports): BPF per ACK {:.0} ns; ACK -> agent decode p50 {} us, p99 {} us",
        c["bpf_ns_per_ack"].as_f64().unwrap_or(0.0),
        c["latency_p50_us"],
        c["latency_p99_us"]
    );
    Ok(Some(c.clone()))
}

fn write_json(path: Option<&Path>, out: serde_json::Map<String, Value>) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(&Value::Object(out))?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
