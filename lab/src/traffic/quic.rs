//! QUIC flows: a scheme's backlogged (or sized) flows as quinn connections, so that every
//! experiment can run over QUIC beside TCP. Each flow is a pair of processes of the QUIC datapath
//! (`datapath-shims/datapaths/quic`): `ccp-quic recv` in the receiver's namespace, and in the
//! sender's either `ccp-quic send` (a registry algorithm in-process, or quinn's own controller)
//! or `ccp-quic-agent send` (steered through libccp by the run's `ccp-agent`, which the run
//! starts on its unix datapath in [`ipc_dir`]).
//!
//! Processes rather than threads: the tools are the ones a user runs, the agent-mode sender binds
//! its own libccp socket, and a QUIC endpoint's runtime stays out of the lab's process. The
//! receiver prints the bytes it has read every [`PROGRESS_MS`], which the flow's counter follows
//! (its throughput is sampled like a TCP flow's); there is no `TCP_INFO`, so QUIC flows have no
//! cwnd or RTT samples. A sized flow's completion time runs from before the sender process starts
//! to its confirmation that the receiver read the stream (process start and the handshake
//! included, as a TCP flow's connect is).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{lock, Clock, FlowSetup, FlowState, FlowThreads, PlanKind, ShortFlow};
use crate::agent::{owned_by_runner, sibling_binary, stop_child};
use crate::config::SchemeSpec;
use crate::error::{Error, Result};
use crate::scheme::QuicCc;

/// How often the receiver reports its byte count, ms.
pub const PROGRESS_MS: u64 = 20;
/// How long a receiver gets to start listening.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the sender thread checks its processes and the stop flag.
const POLL: Duration = Duration::from_millis(20);
/// Wire bytes per stream byte of a full QUIC datagram on this path: quinn's 1,452 bytes of UDP
/// payload (its MTU discovery's ceiling; the senders average 1,451) plus 28 of IPv4 and UDP on
/// the wire, of which 35 carry no stream data: the short header (1), quinn's 8-byte connection
/// ID, a 2-byte packet number, the 16-byte AEAD tag and the STREAM frame's type, stream ID,
/// offset (4) and length (2). (A 50 Mbit/s run's scheme share came to 100.0-100.5 % with it.)
pub const QUIC_WIRE_PER_PAYLOAD: f64 = 1480.0 / 1417.0;
/// The name of the run agent's socket in [`ipc_dir`] (`ccp-agent --ipc-name`).
pub const AGENT_SOCKET: &str = "agent";

/// A QUIC flow: who steers it, with which algorithm parameters (`name=value`, for the
/// in-process algorithm; an agent gets its own from the run).
#[derive(Debug, Clone, PartialEq)]
pub struct QuicPlan {
    pub cc: QuicCc,
    pub params: Vec<String>,
}

/// The libccp socket directory of a run in `run_dir`: the agent's socket and each agent-mode
/// sender's.
pub fn ipc_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("ipc")
}

/// What a QUIC scheme may set: TCP-only settings are refused rather than silently ignored.
pub fn validate_scheme(key: &str, cc: &QuicCc, s: &SchemeSpec) -> std::result::Result<(), (String, String)> {
    let tcp_only = [
        ("receiver_cc", s.receiver_cc.is_some()),
        ("receiver_ce_echo", s.receiver_ce_echo),
        ("receiver", s.receiver.is_some()),
        ("classify", s.classify.is_some()),
        ("agent_args", !s.agent_args.is_empty()),
        ("tcp_usec_ts", s.tcp_usec_ts),
    ];
    if let Some((field, _)) = tcp_only.iter().find(|(_, set)| *set) {
        return Err((
            format!("{key}.{field}"),
            "QUIC schemes do not take this (it configures TCP sockets or the eBPF agent)".into(),
        ));
    }
    if matches!(cc, QuicCc::Native(_)) && !s.params.is_empty() {
        return Err((format!("{key}.params"), "quinn's own controllers take no parameters".into()));
    }
    Ok(())
}

/// Starts the receiver (listening before this returns) and the thread that starts the sender at
/// the flow's start time.
pub fn start(flow: &FlowSetup) -> Result<FlowThreads> {
    let PlanKind::Bulk { bytes, quic: Some(plan), .. } = flow.plan.kind.clone() else {
        return Err(Error::Run(format!("flow {} is not a QUIC flow", flow.plan.label)));
    };
    let port = flow.addr.port();
    let work = &flow.ends.work_dir;
    let cert = work.join(format!("quic-{port}.der"));
    let _ = std::fs::remove_file(&cert);
    let mut recv = in_ns(&flow.ends.receiver_ns, &tool("ccp-quic")?);
    recv.args(["recv", "--listen", &flow.addr.to_string(), "--streams", "1", "--progress-ms", &PROGRESS_MS.to_string()]);
    recv.arg("--cert-out").arg(&cert);
    let mut receiver = spawn(recv, &work.join(format!("quic-{port}-recv.log")), "ccp-quic recv")?;
    let stdout = receiver.stdout.take().expect("the receiver's stdout is piped");
    let (listening_tx, listening_rx) = std::sync::mpsc::channel();
    let state = flow.state.clone();
    let reader = std::thread::Builder::new()
        .name(format!("rcv-{}", flow.plan.label).chars().take(15).collect())
        .spawn(move || {
            count_received(stdout, &state, listening_tx);
            Ok(())
        })
        .map_err(|e| Error::io("spawning a receiver thread", e))?;
    if listening_rx.recv_timeout(LISTEN_TIMEOUT).is_err() {
        stop_child(receiver, "ccp-quic recv");
        let _ = reader.join();
        return Err(Error::Run(format!(
            "flow {}: ccp-quic recv did not listen on {} within {LISTEN_TIMEOUT:?}; its log: {}",
            flow.plan.label,
            flow.addr,
            crate::agent::log_tail(&work.join(format!("quic-{port}-recv.log")))
        )));
    }
    let sender = Sender {
        ipc_socket: matches!(plan.cc, QuicCc::Agent(_)).then(|| ipc_dir(work).join(ipc_name(port))),
        label: flow.plan.label.clone(),
        command: sender_command(flow, &plan, &cert, bytes)?,
        log: work.join(format!("quic-{port}-send.log")),
        window: (flow.plan.start, flow.plan.stop),
        bytes,
        state: flow.state.clone(),
        clock: flow.clock.clone(),
    };
    let thread = std::thread::Builder::new()
        .name(format!("snd-{}", flow.plan.label).chars().take(15).collect())
        .spawn(move || {
            sender.run(receiver);
            Ok(())
        })
        .map_err(|e| Error::io("spawning a sender thread", e))?;
    Ok(vec![reader, thread])
}

/// The QUIC datapath's tool `name` beside ccp-lab, or an error saying how to build it.
fn tool(name: &str) -> Result<PathBuf> {
    let path = sibling_binary(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Unavailable(format!(
            "{} not found: QUIC schemes run the QUIC datapath's tools; build them beside ccp-lab \
             (`cargo build --release -p ccp-quic -p ccp-quic-agent`)",
            path.display()
        )))
    }
}

/// `binary` run in network namespace `ns`.
fn in_ns(ns: &str, binary: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(binary);
    c
}

/// Starts `cmd` with its stdout piped and its stderr into `log`, owned by the runner.
fn spawn(mut cmd: Command, log: &Path, what: &str) -> Result<Child> {
    let file = std::fs::File::create(log).map_err(|e| Error::io(format!("creating {}", log.display()), e))?;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(file);
    owned_by_runner(&mut cmd);
    cmd.spawn().map_err(|e| Error::io(format!("starting {what}"), e))
}

/// The sender's command line for `plan`.
fn sender_command(flow: &FlowSetup, plan: &QuicPlan, cert: &Path, bytes: Option<u64>) -> Result<Command> {
    let (binary, steering): (&str, Vec<String>) = match &plan.cc {
        QuicCc::Agent(_) => {
            let ipc = ipc_dir(&flow.ends.work_dir);
            let port = flow.addr.port();
            (
                "ccp-quic-agent",
                vec![
                    "--ipc-dir".into(),
                    ipc.display().to_string(),
                    "--agent".into(),
                    AGENT_SOCKET.into(),
                    "--ipc-name".into(),
                    ipc_name(port),
                ],
            )
        }
        QuicCc::Embedded(alg) => {
            let mut v = vec!["--cc".to_string(), alg.clone()];
            for p in &plan.params {
                v.extend(["--param".to_string(), p.clone()]);
            }
            ("ccp-quic", v)
        }
        QuicCc::Native(n) => ("ccp-quic", vec!["--native".to_string(), n.clone()]),
    };
    let mut c = in_ns(&flow.ends.sender_ns, &tool(binary)?);
    c.args(["send", "--dst", &flow.addr.to_string(), "--report-ms", "0"]).arg("--cert").arg(cert);
    match bytes {
        Some(b) => c.args(["--bytes", &b.to_string()]),
        None => c.args(["--seconds", &format!("{:.3}", flow.plan.stop.saturating_sub(flow.plan.start).as_secs_f64())]),
    };
    c.args(steering);
    Ok(c)
}

/// The libccp socket name of an agent-mode sender whose receiver listens on `port`.
fn ipc_name(port: u16) -> String {
    format!("quic{port}")
}

/// Follows the receiver's lines: the first says it listens, `progress` and `stream` lines carry
/// the bytes read so far. Ends when the receiver's stdout closes.
fn count_received(stdout: ChildStdout, state: &FlowState, listening: std::sync::mpsc::Sender<()>) {
    for line in BufReader::new(stdout).lines().map_while(std::result::Result::ok) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        match v["event"].as_str() {
            Some("listening") => {
                let _ = listening.send(());
            }
            Some("progress" | "stream") => {
                if let Some(b) = v["bytes"].as_u64() {
                    state.rx_bytes.fetch_max(b, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }
}

/// The sender's side of one QUIC flow.
struct Sender {
    /// An agent-mode sender's libccp socket, removed after it (stopped, it leaves it behind).
    ipc_socket: Option<PathBuf>,
    label: String,
    command: Command,
    log: PathBuf,
    window: (Duration, Duration),
    bytes: Option<u64>,
    state: Arc<FlowState>,
    clock: Clock,
}

impl Sender {
    /// Starts the sender at the flow's start, waits for it (or the stop), and stops the receiver
    /// once it has read everything or traffic ends.
    fn run(mut self, receiver: Child) {
        let (start, stop) = self.window;
        if !self.clock.sleep_until(start) {
            stop_child(receiver, "ccp-quic recv");
            return;
        }
        let began = Instant::now();
        let start_s = self.clock.elapsed_s();
        let record = |completed: bool| {
            if let Some(size_bytes) = self.bytes {
                let f = ShortFlow { start_s, size_bytes, duration_s: began.elapsed().as_secs_f64(), completed };
                lock(&self.state.short_flows).push(f);
            }
        };
        let mut sender = match spawn(std::mem::replace(&mut self.command, Command::new("true")), &self.log, "a QUIC sender") {
            Ok(c) => c,
            Err(e) => {
                self.state.fail(e.to_string());
                stop_child(receiver, "ccp-quic recv");
                return;
            }
        };
        let status = loop {
            if let Ok(Some(s)) = sender.try_wait() {
                break Some(s);
            }
            // A sized flow cut off at its stop time, like a TCP one; a backlogged one stops by
            // itself at its stop time (its --seconds), and everything at the end of traffic.
            if self.clock.stopped() || (self.bytes.is_some() && self.clock.past(stop)) {
                break None;
            }
            std::thread::sleep(POLL);
        };
        let mut out = String::new();
        match status {
            Some(s) => {
                if let Some(mut o) = sender.stdout.take() {
                    let _ = o.read_to_string(&mut out);
                }
                let _ = std::fs::write(self.log.with_extension("json"), &out);
                let summary = out
                    .lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .find(|v| v["event"] == "summary");
                let complete = summary.as_ref().is_some_and(|v| v["complete"] == true);
                if let Some(b) = summary.as_ref().and_then(|v| v["bytes"].as_u64()) {
                    self.state.tx_bytes.store(b, Ordering::Relaxed);
                }
                record(complete);
                if !s.success() && !self.clock.stopped() {
                    self.state.fail(format!(
                        "the QUIC sender of {} exited ({s}); its log ({}): {}",
                        self.label,
                        self.log.display(),
                        crate::agent::log_tail(&self.log)
                    ));
                }
                // The receiver exits once it has read the stream; until then it counts.
                let mut receiver = receiver;
                while !self.clock.stopped() && !matches!(receiver.try_wait(), Ok(Some(_))) {
                    std::thread::sleep(POLL);
                }
                stop_child(receiver, "ccp-quic recv");
            }
            None => {
                record(false);
                stop_child(sender, "a QUIC sender");
                stop_child(receiver, "ccp-quic recv");
            }
        }
        if let Some(s) = &self.ipc_socket {
            let _ = std::fs::remove_file(s);
        }
    }
}
