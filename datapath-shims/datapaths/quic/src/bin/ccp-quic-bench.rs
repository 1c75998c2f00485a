//! `ccp-quic-bench`: CCP algorithms over QUIC beside quinn's own controllers, on the same links,
//! interleaved within each repetition, medians and ratios printed.
//!
//! Each run is a fresh `ccp-router` (so its summary is the run's queueing delay), a `ccp-quic
//! recv` in the receiver namespace and a `ccp-quic send` in the sender's. Pairs:
//! - the agent's Cubic vs quinn's Cubic, and the agent's Reno vs quinn's NewReno: goodput
//!   (receiver), p95 queueing delay (router), the sender's CPU per datagram sent;
//! - DCTCP over a CE-marking queue (K packets), beside quinn's Cubic on the same queue: the
//!   queue it holds against K;
//! - on the fixed link, agent mode too (`ccp-quic-agent` steered by `ccp-agent` through
//!   libccp): the same figures, its CPU the sender's plus the agent's, and the time from a frame
//!   whose invoke sent a report to the agent's command.
//!
//! Needs root (namespaces). `--seconds`, `--reps` and `--trace` (a mahimahi trace for a second
//! link) size it; the defaults take about 9 minutes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

#[derive(Parser)]
#[command(name = "ccp-quic-bench", about = "CCP algorithms over QUIC beside quinn's own controllers")]
struct Args {
    /// Seconds per transfer.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Repetitions of every cell (schemes interleaved within each).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// A mahimahi trace for a second link (RTT 40 ms, 250-packet buffer).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// DCTCP's marking threshold, packets.
    #[arg(long, default_value_t = 20)]
    k_pkts: u32,
    /// Where to write every run's figures (JSON lines).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A link: its name and ccp-router's arguments.
struct Link {
    name: String,
    router: Vec<String>,
}

/// Ours / theirs on every link: `ccp:ALG` runs the algorithm in-process (`ccp-quic send --cc`),
/// `native:ALG` is quinn's own controller.
const PAIRS: [(&str, &str); 2] = [("ccp:cubic", "native:cubic"), ("ccp:reno", "native:newreno")];
/// On the fixed link also agent mode: `agent:ALG` is `ccp-quic-agent send` steered by
/// `ccp-agent run --datapath unix --algorithm ALG`; its CPU is the sender's and the agent's.
const AGENT_PAIRS: [(&str, &str); 2] = [("agent:cubic", "native:cubic"), ("agent:reno", "native:newreno")];

#[derive(Debug, Clone, Default)]
struct Run {
    goodput_mbps: f64,
    p50_ms: f64,
    p95_ms: f64,
    cpu_us_per_datagram: f64,
    lost_packets: f64,
    /// Agent mode: the agent's share of the CPU per datagram; from a frame whose invoke sent a
    /// report to the agent's next command for the connection, µs.
    agent_cpu_us_per_datagram: f64,
    r2c_p50_us: f64,
    r2c_p99_us: f64,
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-quic-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("needs root: every run is a ccp-router between two network namespaces");
    }
    let dir = std::env::current_exe()?.parent().context("the binary's directory")?.to_path_buf();
    for b in ["ccp-router", "ccp-quic", "ccp-quic-agent", "ccp-agent"] {
        if !dir.join(b).exists() {
            bail!("{} is missing: build the workspace (cargo build --release)", dir.join(b).display());
        }
    }
    let mut links = vec![Link {
        name: "50mbps-20ms-1bdp".into(),
        router: args(&["--rate-mbps", "50", "--delay-ms", "10", "--queue-pkts", "84"]),
    }];
    if let Some(t) = &a.trace {
        let t = t.canonicalize().with_context(|| format!("--trace {}", t.display()))?;
        let name = t.file_name().map_or("trace".into(), |n| n.to_string_lossy().to_string());
        links.push(Link {
            name,
            router: vec![
                "--trace".into(),
                t.display().to_string(),
                "--delay-ms".into(),
                "20".into(),
                "--queue-pkts".into(),
                "250".into(),
            ],
        });
    }
    let dctcp = Link {
        name: format!("50mbps-20ms-k{}", a.k_pkts),
        router: args(&[
            "--rate-mbps",
            "50",
            "--delay-ms",
            "10",
            "--queue-pkts",
            "84",
            "--qdisc",
            "dctcp",
            "--dctcp-k-pkts",
            &a.k_pkts.to_string(),
        ]),
    };
    let mut out = match &a.out {
        Some(p) => Some(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?),
        None => None,
    };
    let mut results: BTreeMap<(String, String), Vec<Run>> = BTreeMap::new();
    let pairs_of = |i: usize| -> Vec<(&str, &str)> {
        if i == 0 {
            PAIRS.iter().chain(AGENT_PAIRS.iter()).copied().collect()
        } else {
            PAIRS.to_vec()
        }
    };
    let cells: Vec<(&Link, Vec<(&str, &str)>)> = links
        .iter()
        .enumerate()
        .map(|(i, l)| (l, pairs_of(i)))
        .chain(std::iter::once((&dctcp, vec![("ccp:dctcp", "native:cubic")])))
        .collect();
    let schemes_of = |pairs: &[(&'static str, &'static str)]| -> Vec<&'static str> {
        let mut v: Vec<&str> = Vec::new();
        for s in pairs.iter().flat_map(|(o, t)| [*o, *t]) {
            if !v.contains(&s) {
                v.push(s);
            }
        }
        v
    };
    let tag = std::process::id() % 100_000;
    for rep in 0..a.reps {
        for (link, pairs) in &cells {
            for scheme in schemes_of(pairs) {
                let r = one(&dir, &format!("qb{tag}"), link, scheme, a.seconds)
                    .with_context(|| format!("{} on {} (repetition {})", scheme, link.name, rep + 1))?;
                eprintln!(
                    "{:<22} {:<15} rep {}: {:6.2} Mbit/s, p95 {:6.2} ms, {:5.2} µs CPU/datagram",
                    link.name,
                    scheme,
                    rep + 1,
                    r.goodput_mbps,
                    r.p95_ms,
                    r.cpu_us_per_datagram
                );
                if let Some(f) = &mut out {
                    use std::io::Write;
                    writeln!(
                        f,
                        "{}",
                        serde_json::json!({"link": link.name, "scheme": scheme, "rep": rep + 1, "goodput_mbps": r.goodput_mbps,
                            "p50_ms": r.p50_ms, "p95_ms": r.p95_ms, "cpu_us_per_datagram": r.cpu_us_per_datagram, "lost_packets": r.lost_packets,
                            "agent_cpu_us_per_datagram": r.agent_cpu_us_per_datagram,
                            "report_to_command_p50_us": r.r2c_p50_us, "report_to_command_p99_us": r.r2c_p99_us})
                    )?;
                }
                results.entry((link.name.clone(), scheme.to_string())).or_default().push(r);
            }
        }
    }
    println!("medians of {} repetitions, {} s each", a.reps, a.seconds);
    println!("{:<22} {:<28} {:>22} {:>22} {:>22}", "link", "ours / theirs", "goodput Mbit/s", "p95 queue ms", "CPU µs/datagram");
    let med = |l: &str, s: &str, f: fn(&Run) -> f64| {
        median(results.get(&(l.to_string(), s.to_string())).map_or(vec![], |v| v.iter().map(f).collect()))
    };
    let cell = |o: f64, t: f64| format!("{o:.2}/{t:.2} ({:.2}x)", o / t);
    for (link, pairs) in &cells {
        for &(o, t) in pairs {
            println!(
                "{:<22} {:<28} {:>22} {:>22} {:>22}",
                link.name,
                format!("{o} / {t}"),
                cell(med(&link.name, o, |r| r.goodput_mbps), med(&link.name, t, |r| r.goodput_mbps)),
                cell(med(&link.name, o, |r| r.p95_ms), med(&link.name, t, |r| r.p95_ms)),
                cell(med(&link.name, o, |r| r.cpu_us_per_datagram), med(&link.name, t, |r| r.cpu_us_per_datagram)),
            );
        }
    }
    for (o, _) in AGENT_PAIRS {
        println!(
            "agent mode, {o}: the agent's CPU {:.2} us/datagram of the total; a report -> the agent's next command \
             p50 {:.0} us, p99 {:.0} us (medians over repetitions; an upper bound on the round trip: the agent \
             sends a command only when the window changes by a packet)",
            med(&links[0].name, o, |r| r.agent_cpu_us_per_datagram),
            med(&links[0].name, o, |r| r.r2c_p50_us),
            med(&links[0].name, o, |r| r.r2c_p99_us)
        );
    }
    let k_ms = f64::from(a.k_pkts) * 1500.0 * 8.0 / 50e6 * 1e3;
    println!(
        "DCTCP over QUIC: queue p50 {:.2} ms, p95 {:.2} ms against K = {} packets = {k_ms:.2} ms",
        med(&dctcp.name, "ccp:dctcp", |r| r.p50_ms),
        med(&dctcp.name, "ccp:dctcp", |r| r.p95_ms),
        a.k_pkts
    );
    Ok(())
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One transfer through a fresh router.
fn one(bin: &Path, prefix: &str, link: &Link, scheme: &str, secs: f64) -> anyhow::Result<Run> {
    let summary_path = std::env::temp_dir().join(format!("{prefix}-router.json"));
    let mut router = Command::new(bin.join("ccp-router"))
        .args(["run", "--netns-prefix", prefix, "--summary-json"])
        .arg(&summary_path)
        .args(&link.router)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting ccp-router")?;
    let mut rout = BufReader::new(router.stdout.take().context("router stdout")?);
    let mut line = String::new();
    rout.read_line(&mut line)?;
    let ready: serde_json::Value =
        serde_json::from_str(&line).with_context(|| format!("ccp-router did not get ready: {line:?}"))?;
    let s = |k: &str| ready[k].as_str().unwrap_or_default().to_string();
    let (snd, rcv, addr) = (s("sender_ns"), s("receiver_ns"), format!("{}:4433", s("receiver_addr")));
    let result = transfer(bin, &snd, &rcv, &addr, prefix, scheme, secs);
    stop(&mut router);
    let summary =
        std::fs::read_to_string(&summary_path).with_context(|| format!("the router's summary {}", summary_path.display()));
    let _ = std::fs::remove_file(&summary_path);
    let (goodput, sent, agent_cpu_s) = result?;
    let summary: serde_json::Value = serde_json::from_str(&summary?)?;
    let q = &summary["down"]["queue_delay_ms"];
    let (p50, p95) = (q["p50"].as_f64().unwrap_or(f64::NAN), q["p95"].as_f64().unwrap_or(f64::NAN));
    Ok(Run {
        goodput_mbps: goodput,
        p50_ms: p50,
        p95_ms: p95,
        cpu_us_per_datagram: (sent["cpu_s"].as_f64().unwrap_or(f64::NAN) + agent_cpu_s) * 1e6
            / sent["datagrams"].as_f64().unwrap_or(f64::NAN),
        lost_packets: sent["lost_packets"].as_f64().unwrap_or(f64::NAN),
        agent_cpu_us_per_datagram: agent_cpu_s * 1e6 / sent["datagrams"].as_f64().unwrap_or(f64::NAN),
        r2c_p50_us: sent["report_to_command_us"]["p50"].as_f64().unwrap_or(f64::NAN),
        r2c_p99_us: sent["report_to_command_us"]["p99"].as_f64().unwrap_or(f64::NAN),
    })
}

/// One transfer: the receiver's goodput, the sender's summary and, in agent mode, the agent's CPU
/// seconds.
fn transfer(
    bin: &Path,
    snd: &str,
    rcv: &str,
    addr: &str,
    prefix: &str,
    scheme: &str,
    secs: f64,
) -> anyhow::Result<(f64, serde_json::Value, f64)> {
    let tmp = std::env::temp_dir().join(format!("{prefix}-{}", scheme.replace(':', "-")));
    std::fs::create_dir_all(&tmp)?;
    let cert = tmp.join("cert.der");
    let mut recv: Child = Command::new("ip")
        .args(["netns", "exec", rcv])
        .arg(bin.join("ccp-quic"))
        .args(["recv", "--listen", addr, "--streams", "1", "--cert-out"])
        .arg(&cert)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting ccp-quic recv")?;
    let mut lines = BufReader::new(recv.stdout.take().context("recv stdout")?).lines();
    lines.next().context("the receiver said nothing")??;
    let mut agent = None;
    let (sender, cc): (&str, Vec<String>) = match scheme.split_once(':') {
        Some(("ccp", alg)) => ("ccp-quic", args(&["--cc", alg])),
        Some(("native", alg)) => ("ccp-quic", args(&["--native", alg])),
        Some(("agent", alg)) => {
            let child = Command::new(bin.join("ccp-agent"))
                .args([
                    "--log-level",
                    "warn",
                    "run",
                    "--datapath",
                    "unix",
                    "--no-control",
                    "--algorithm",
                    alg,
                    "--ipc-name",
                    "agent",
                    "--ipc-dir",
                ])
                .arg(&tmp)
                .stdout(Stdio::null())
                .spawn()
                .context("starting ccp-agent")?;
            let t0 = std::time::Instant::now();
            while !tmp.join("agent").exists() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(20));
            }
            agent = Some(child);
            ("ccp-quic-agent", vec!["--ipc-dir".into(), tmp.display().to_string(), "--agent".into(), "agent".into()])
        }
        _ => bail!("scheme {scheme:?}"),
    };
    let out = Command::new("ip")
        .args(["netns", "exec", snd])
        .arg(bin.join(sender))
        .args(["send", "--dst", addr, "--report-ms", "0", "--seconds", &secs.to_string(), "--cert"])
        .arg(&cert)
        .args(&cc)
        .output()
        .context("running the sender")?;
    let agent_cpu_s = match agent.as_mut() {
        Some(a) => {
            let cpu = cpu_seconds_of(a.id());
            stop(a);
            cpu
        }
        None => 0.0,
    };
    let stream = lines.next();
    let _ = recv.kill();
    let _ = recv.wait();
    let _ = std::fs::remove_dir_all(&tmp);
    if !out.status.success() {
        bail!("{sender} send failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stream: serde_json::Value = serde_json::from_str(&stream.context("no stream line")??)?;
    let summary = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "summary")
        .context("no summary from the sender")?;
    Ok((stream["goodput_mbps"].as_f64().unwrap_or(f64::NAN), summary, agent_cpu_s))
}

/// A running process's user and system CPU time, seconds (/proc/PID/stat fields 14 and 15).
fn cpu_seconds_of(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return f64::NAN };
    // The command name may hold spaces: the fields start after its closing parenthesis.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return f64::NAN };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    (ticks(11) + ticks(12)) / hz
}

fn stop(router: &mut Child) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(router.id() as i32, libc::SIGTERM) };
    for _ in 0..100 {
        if let Ok(Some(_)) = router.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = router.kill();
    let _ = router.wait();
}
