//! A hung agent with an open socket: it pinned a flow's window, then stopped reading. Its socket
//! still exists and accepts connections, so it does not look gone; but nothing it could say
//! would be an answer to the flow's reports any more, and the flow would stay at the pinned
//! window for as long as the agent hangs. The shim must treat an agent that has not taken a
//! message for `--silence-timeout-ms` as gone: every flow back to the in-kernel fallback (the
//! window moves again), and back under the agent once it reads again.
//!
//! A real kernel flow on loopback, on the shim's BPF congestion control; the agent is a fake one
//! in this process that speaks just enough libccp (INSTALL, CHANGE_PROG) to pin the window.
//! Needs root (BPF struct_ops); skips loudly without it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccp_wire::{implicit, ChangeProg, Event, Install, Instr, Msg, Op, Reg, RegKind, UpdateField};

/// The window the fake agent pins, packets.
const PINNED_PKTS: u32 = 4;
/// The shim's `--silence-timeout-ms`.
const SILENCE_MS: u64 = 500;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A program that counts acked bytes and reports them every 10 ms, as agents' programs do:
/// `(def (Report (volatile acked 0))) (when true (:= Report.acked (+ Report.acked
/// Ack.bytes_acked)) (fallthrough)) (when (> Micros 10000) (report) (:= Micros 0))`. The window
/// comes from CHANGE_PROG's Cwnd update, which libccp re-applies after every run.
fn reporting_program() -> Install {
    let imp = |i| Reg::new(RegKind::Implicit, i);
    let acked = Reg::new(RegKind::VolatileReport, 0);
    let instrs = vec![
        Instr { op: Op::Def, res: acked, left: acked, right: Reg::imm(0) },
        // when true
        Instr { op: Op::Bind, res: imp(implicit::EXPR_FLAG), left: Reg::imm(0), right: Reg::imm(1) },
        Instr { op: Op::Add, res: acked, left: acked, right: Reg::new(RegKind::Primitive, 0) },
        Instr { op: Op::Bind, res: imp(implicit::SHOULD_FALLTHROUGH), left: Reg::imm(0), right: Reg::imm(1) },
        // when (> Micros 10000)
        Instr { op: Op::Gt, res: imp(implicit::EXPR_FLAG), left: imp(implicit::MICROS), right: Reg::imm(10_000) },
        Instr { op: Op::Bind, res: imp(implicit::SHOULD_REPORT), left: Reg::imm(0), right: Reg::imm(1) },
        Instr { op: Op::Bind, res: imp(implicit::MICROS), left: Reg::imm(0), right: Reg::imm(0) },
    ];
    let events = vec![
        Event { flag_idx: 1, num_flag_instrs: 1, body_idx: 2, num_body_instrs: 2 },
        Event { flag_idx: 4, num_flag_instrs: 1, body_idx: 5, num_body_instrs: 2 },
    ];
    Install { program_uid: 1, events, instrs }
}

/// What the fake agent has seen and does.
#[derive(Default)]
struct AgentState {
    /// While false the agent does not read its socket (it hangs with the socket open).
    reading: AtomicBool,
    stop: AtomicBool,
    readies: AtomicU32,
    creates: AtomicU32,
    reports: AtomicU32,
    errors: Mutex<Vec<String>>,
}

/// A minimal CCP agent: on every CREATE it installs [`reporting_program`] and switches the flow
/// to it with the window pinned at [`PINNED_PKTS`].
fn fake_agent(sock: UnixDatagram, shim: PathBuf, state: Arc<AgentState>) {
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let install = Msg::Install(reporting_program()).to_bytes().expect("the program encodes");
    let mut buf = vec![0u8; 64 * 1024];
    while !state.stop.load(Ordering::SeqCst) {
        if !state.reading.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(_) => continue,
        };
        for m in ccp_wire::decode_all(&buf[..n]) {
            match m {
                Ok(Msg::Ready(_)) => {
                    state.readies.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Msg::Create(c)) => {
                    state.creates.fetch_add(1, Ordering::SeqCst);
                    let pin = Msg::ChangeProg(ChangeProg {
                        sid: c.sid,
                        program_uid: 1,
                        updates: vec![UpdateField {
                            kind: RegKind::Implicit,
                            index: implicit::CWND,
                            value: u64::from(PINNED_PKTS * c.mss),
                        }],
                    })
                    .to_bytes()
                    .unwrap();
                    for msg in [&install, &pin] {
                        if let Err(e) = sock.send_to(msg, &shim) {
                            state.errors.lock().unwrap().push(format!("sending to the shim: {e}"));
                        }
                    }
                }
                Ok(Msg::Measure(m)) if !m.fields.is_empty() => {
                    state.reports.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(e) => state.errors.lock().unwrap().push(format!("undecodable message from the shim: {e}")),
            }
        }
    }
}

/// The sender's window, packets.
fn snd_cwnd(s: &TcpStream) -> u32 {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut libc::tcp_info).cast(), &mut len)
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_snd_cwnd
}

/// Loopback's MSS follows the window (at most half of it), so the window in packets would drift
/// under a pinned window in bytes: a fixed MSS, through the listener's advertised one.
fn clamp_mss(l: &TcpListener, mss: u32) {
    // SAFETY: setsockopt with a valid buffer and its length.
    let rc = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mss as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "TCP_MAXSEG: {}", std::io::Error::last_os_error());
}

fn set_congestion_control(s: &TcpStream, name: &str) {
    // SAFETY: setsockopt with a valid buffer and its length.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "TCP_CONGESTION {name}: {}", std::io::Error::last_os_error());
}

/// The shim process; stopped (SIGTERM, then SIGKILL) and its pins removed on drop.
struct Shim {
    child: Child,
    log: PathBuf,
    pin_dir: PathBuf,
}

impl Shim {
    fn start(name: &str, dir: &Path) -> Shim {
        let log = dir.join("shim.log");
        let pin_dir = PathBuf::from(format!("/sys/fs/bpf/{name}"));
        let child = Command::new(env!("CARGO_BIN_EXE_ccp-libccp-shim"))
            .args([
                "--log-level",
                "info,ccp_libccp_shim=debug",
                "run",
                "--name",
                name,
                "--silence-timeout-ms",
                &SILENCE_MS.to_string(),
            ])
            .arg("--ipc-dir")
            .arg(dir.join("ipc"))
            .arg("--pin-dir")
            .arg(&pin_dir)
            .arg("--state-file")
            .arg(dir.join("attach.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn ccp-libccp-shim");
        let mut shim = Shim { child, log, pin_dir };
        let t0 = Instant::now();
        while !shim.log_text().contains("per-ACK congestion control registered") {
            if let Ok(Some(status)) = shim.child.try_wait() {
                panic!("the shim exited ({status}) before registering:\n{}", shim.log_text());
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the shim never registered:\n{}", shim.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
        shim
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(entries) = std::fs::read_dir(&self.pin_dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.pin_dir);
    }
}

/// Samples the window every 5 ms until `pred` holds or `within` passed; the time it held.
fn wait_cwnd(s: &TcpStream, within: Duration, mut pred: impl FnMut(u32) -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if pred(snd_cwnd(s)) {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

#[test]
fn an_agent_that_stops_reading_is_gone_after_the_silence_timeout_and_back_when_it_reads() {
    if !is_root() {
        eprintln!("SKIPPED an_agent_that_stops_reading_is_gone_after_the_silence_timeout_and_back_when_it_reads: needs root (BPF struct_ops)");
        return;
    }
    let name = format!("ccpstuck{}", std::process::id() % 100_000);
    let dir = tempfile::tempdir().unwrap();
    let ipc = dir.path().join("ipc");
    std::fs::create_dir(&ipc).unwrap();
    std::fs::set_permissions(&ipc, std::fs::Permissions::from_mode(0o700)).unwrap();

    // The agent binds first (the shim's READY finds it), and reads for now.
    let state = Arc::new(AgentState::default());
    state.reading.store(true, Ordering::SeqCst);
    let sock = UnixDatagram::bind(ipc.join("portus")).unwrap();
    let agent = {
        let (state, shim_path) = (Arc::clone(&state), ipc.join("ccp-ebpf"));
        std::thread::spawn(move || fake_agent(sock, shim_path, state))
    };
    let shim = Shim::start(&name, dir.path());

    // A bulk flow on loopback, on the shim's congestion control.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    clamp_mss(&listener, 1400);
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            let mut buf = vec![0u8; 256 * 1024];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(0) = s.read(&mut buf) {
                    return;
                }
            }
        })
    };
    let client = TcpStream::connect(addr).unwrap();
    set_congestion_control(&client, &name);
    let sender = {
        let (stop, mut s) = (Arc::clone(&stop), client.try_clone().unwrap());
        std::thread::spawn(move || {
            s.set_write_timeout(Some(Duration::from_millis(100))).unwrap();
            let chunk = vec![0x5au8; 64 * 1024];
            while !stop.load(Ordering::SeqCst) {
                let _ = s.write(&chunk);
            }
        })
    };

    let report = |what: &str| -> String {
        format!(
            "{what}; cwnd now {} pkts; agent saw {} READY, {} CREATE, {} reports; agent errors {:?}\nshim log:\n{}",
            snd_cwnd(&client),
            state.readies.load(Ordering::SeqCst),
            state.creates.load(Ordering::SeqCst),
            state.reports.load(Ordering::SeqCst),
            state.errors.lock().unwrap(),
            shim.log_text()
        )
    };

    // 1. The agent pins the window.
    let pinned = |w: u32| w == PINNED_PKTS;
    assert!(wait_cwnd(&client, Duration::from_secs(10), pinned).is_some(), "{}", report("the agent never pinned the window"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(pinned(snd_cwnd(&client)), "{}", report("the window stays pinned while the agent reads"));
    assert!(state.reports.load(Ordering::SeqCst) > 0, "{}", report("the agent gets reports"));

    // 2. The agent hangs with its socket open: no reads. The flow is its own until the silence
    // timeout, then the fallback's, whose window grows.
    state.reading.store(false, Ordering::SeqCst);
    let hung = Instant::now();
    let early = wait_cwnd(&client, Duration::from_millis(SILENCE_MS * 8 / 10), |w| !pinned(w));
    assert!(
        early.is_none(),
        "{}",
        report(&format!("the window left the agent's hands after {early:?}, before the silence timeout"))
    );
    let margin = Duration::from_millis(1500);
    let moved = wait_cwnd(&client, Duration::from_millis(SILENCE_MS) + margin, |w| w > PINNED_PKTS + 2);
    assert!(
        moved.is_some(),
        "{}",
        report(&format!(
            "the window did not move within {} ms of the agent hanging",
            (Duration::from_millis(SILENCE_MS) + margin).as_millis()
        ))
    );
    eprintln!("the window moved {} ms after the agent stopped reading", hung.elapsed().as_millis());
    // The window moves as the shim gives the agent up; its log line may reach the file a moment
    // later.
    let said = Instant::now();
    while !shim.log_text().contains("not read") && said.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(shim.log_text().contains("not read"), "{}", report("the shim says why the agent is gone"));

    // 3. The agent reads again: the shim announces itself and the flow (READY, CREATE) and the
    // agent pins the window again.
    let (readies, creates) = (state.readies.load(Ordering::SeqCst), state.creates.load(Ordering::SeqCst));
    state.reading.store(true, Ordering::SeqCst);
    assert!(wait_cwnd(&client, Duration::from_secs(5), pinned).is_some(), "{}", report("the agent never got the flow back"));
    assert!(state.readies.load(Ordering::SeqCst) > readies, "{}", report("a READY after the agent came back"));
    assert!(state.creates.load(Ordering::SeqCst) > creates, "{}", report("a CREATE after the agent came back"));
    assert!(shim.log_text().contains("a CCP agent is there"), "{}", report("the return is logged"));

    stop.store(true, Ordering::SeqCst);
    sender.join().unwrap();
    drop(client);
    receiver.join().unwrap();
    state.stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    drop(shim);
}
