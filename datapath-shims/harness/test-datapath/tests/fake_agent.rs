//! End-to-end tests: the real binary (with the real libccp) against a throwaway fake agent
//! that speaks the libccp wire protocol with raw bytes over a unix datagram socket.

use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ccp-test-datapath");
const MSS: u32 = 1448;

/// A unique directory under /tmp, removed on drop, so parallel tests never share sockets.
struct TestDir(PathBuf);

impl TestDir {
    fn new(tag: &str) -> TestDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "ccp-tdp-{tag}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---- wire format (ccp-anchors §1.5), little-endian ----

const CREATE: u16 = 0;
const MEASURE: u16 = 1;
const READY: u16 = 5;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn header(typ: u16, len: usize, sid: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(len);
    m.extend(typ.to_le_bytes());
    m.extend(u16::try_from(len).unwrap().to_le_bytes());
    m.extend(sid.to_le_bytes());
    m
}

/// libccp 1.2.0's unit-test program with the given uid: `(def (volatile Report.foo 0))
/// (when true (:= Report.foo (+ Report.foo Ack.bytes_acked)) (report))`: reports every ACK.
#[rustfmt::skip]
fn install(uid: u8) -> Vec<u8> {
    vec![
        2, 0, 116, 0, 0, 0, 0, 0,                        // INSTALL, len 116, sid 0
        uid, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0,            // uid, 1 event, 5 instructions
        1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0,  // event: flag 1..2, body 2..5
        2, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0,  // (def (volatile Report.foo 0))
        1, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0,  // (when true
        0, 7, 0, 0, 0, 0, 5, 0, 0, 0, 0, 4, 0, 0, 0, 0,  //   tmp0 := Report.foo + Ack.bytes_acked
        1, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 7, 0, 0, 0, 0,  //   Report.foo := tmp0
        1, 2, 2, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0, 0,  //   __shouldReport := true)
    ]
}

fn change_prog(sid: u32, uid: u32) -> Vec<u8> {
    let mut m = header(4, 16, sid);
    m.extend(uid.to_le_bytes());
    m.extend(0u32.to_le_bytes());
    m
}

/// UPDATE_FIELDS setting the implicit register 4 (`Cwnd`).
fn update_cwnd(sid: u32, cwnd: u64) -> Vec<u8> {
    let mut m = header(3, 25, sid);
    m.extend(1u32.to_le_bytes());
    m.push(2);
    m.extend(4u32.to_le_bytes());
    m.extend(cwnd.to_le_bytes());
    m
}

/// UPDATE_FIELDS setting the implicit registers 4 (`Cwnd`) and 5 (`Rate`).
fn update_cwnd_and_rate(sid: u32, cwnd: u64, rate: u64) -> Vec<u8> {
    let mut m = header(3, 38, sid);
    m.extend(2u32.to_le_bytes());
    for (index, value) in [(4u32, cwnd), (5, rate)] {
        m.push(2);
        m.extend(index.to_le_bytes());
        m.extend(value.to_le_bytes());
    }
    m
}

// Register types and the primitives' indices (ccp-anchors §1.5-§1.6).
const IMMEDIATE: u8 = 1;
const IMPLICIT: u8 = 2;
const PRIMITIVE: u8 = 4;
const VOLATILE_REPORT: u8 = 5;

/// A program that, on every ACK, copies each `(register type, index)` of `sources` into one
/// report field and reports: `(def (Report (volatile f0 0) ..)) (when true (:= Report.f0 src0)
/// .. (report))`, assembled by hand.
fn copy_program(uid: u32, sources: &[(u8, u32)]) -> Vec<u8> {
    let n = sources.len() as u32;
    let num_instrs = n + 1 + n + 1;
    let mut m = header(2, 20 + 16 * (1 + num_instrs as usize), 0);
    for v in [uid, 1, num_instrs, n, 1, n + 1, n + 1] {
        m.extend(v.to_le_bytes());
    }
    // 16 bytes: opcode, then result, left and right as (u8 type, u32 index); the left
    // register repeats the result, as portus emits it for DEF and BIND.
    let mut instr = |op: u8, result: (u8, u32), right: (u8, u32)| {
        m.push(op);
        for (typ, index) in [result, result, right] {
            m.push(typ);
            m.extend(index.to_le_bytes());
        }
    };
    const BIND: u8 = 1;
    const DEF: u8 = 2;
    for i in 0..n {
        instr(DEF, (VOLATILE_REPORT, i), (IMMEDIATE, 0));
    }
    instr(BIND, (IMPLICIT, 0), (IMMEDIATE, 1)); // the condition: true
    for (i, &source) in sources.iter().enumerate() {
        instr(BIND, (VOLATILE_REPORT, i as u32), source);
    }
    instr(BIND, (IMPLICIT, 2), (IMMEDIATE, 1)); // (report)
    m
}

// ---- the fake agent ----

/// Everything the agent received.
#[derive(Default)]
struct Seen {
    ready_ids: Vec<u32>,
    /// (sid, message) of every CREATE, in arrival order.
    creates: Vec<(u32, Vec<u8>)>,
    /// Field values of every report, per sid.
    reports: HashMap<u32, Vec<Vec<u64>>>,
    closes: Vec<u32>,
    /// Sender addresses as the kernel reported them.
    peers: Vec<PathBuf>,
}

struct Run {
    seen: Seen,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn events<'a>(&'a self, ev: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let tag = format!("\"ev\":\"{ev}\"");
        self.stdout.lines().filter(move |l| l.contains(&tag))
    }
}

/// The value of `key` in a flat JSON record, without quotes.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let tag = format!("\"{key}\":");
    let start = line.find(&tag).unwrap_or_else(|| panic!("{key} missing in {line}")) + tag.len();
    let rest = &line[start..];
    let end = rest.find([',', '}']).unwrap();
    rest[..end].trim_matches('"')
}

fn num(line: &str, key: &str) -> u64 {
    field(line, key).parse().unwrap()
}

/// Starts the datapath with `args` against an agent socket `<dir>/agent`, answers messages
/// with `respond` (whose replies go back to the sender), and collects everything until the
/// datapath exits.
fn run_datapath(dir: &Path, args: &[&str], mut respond: impl FnMut(u16, u32, &[u8]) -> Vec<Vec<u8>>) -> Run {
    let agent = UnixDatagram::bind(dir.join("agent")).unwrap();
    agent.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let stdout_path = dir.join("stdout.jsonl");
    let stderr_path = dir.join("stderr.txt");
    let mut child: Child = Command::new(BIN)
        .args(["--dir", dir.to_str().unwrap(), "--name", "dp", "--agent", "agent"])
        .args(args)
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();

    let mut seen = Seen::default();
    let mut buf = vec![0u8; 65_536];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut exited_at = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            // Drain what is still queued, then stop.
            let since = *exited_at.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_millis(100) {
                break status;
            }
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the datapath did not exit in time");
        }
        let Ok((n, from)) = agent.recv_from(&mut buf) else {
            continue;
        };
        let msg = &buf[..n];
        let (typ, len, sid) = (u16_at(msg, 0), usize::from(u16_at(msg, 2)), u32_at(msg, 4));
        assert_eq!(len, n, "one message per datagram, header length = datagram length");
        let peer = from.as_pathname().expect("the datapath binds a pathname socket");
        seen.peers.push(peer.to_path_buf());
        match typ {
            READY => seen.ready_ids.push(u32_at(msg, 8)),
            CREATE => seen.creates.push((sid, msg.to_vec())),
            MEASURE => {
                let fields = u32_at(msg, 12) as usize;
                if fields == 0 {
                    seen.closes.push(sid);
                } else {
                    let values = (0..fields).map(|i| u64_at(msg, 16 + 8 * i)).collect();
                    seen.reports.entry(sid).or_default().push(values);
                }
            }
            other => panic!("unexpected message type {other} from the datapath"),
        }
        // A relative sender path is relative to the socket directory (portus 0.7 semantics).
        let reply_to = dir.join(peer);
        for reply in respond(typ, sid, msg) {
            agent.send_to(&reply, &reply_to).unwrap();
        }
    };
    Run {
        seen,
        status,
        stdout: std::fs::read_to_string(stdout_path).unwrap(),
        stderr: std::fs::read_to_string(stderr_path).unwrap(),
    }
}

/// A minimal agent: install one program at READY, and on every CREATE switch the flow to it
/// and command `cwnd_for(sid)`.
fn commanding_agent(cwnd_for: impl Fn(u32) -> u64) -> impl FnMut(u16, u32, &[u8]) -> Vec<Vec<u8>> {
    move |typ, sid, _| match typ {
        READY => vec![install(1)],
        CREATE => vec![change_prog(sid, 1), update_cwnd(sid, cwnd_for(sid))],
        _ => Vec::new(),
    }
}

#[test]
fn sids_are_sequential_and_the_commanded_cwnd_takes_effect() {
    let dir = TestDir::new("cwnd");
    let cwnd_for = |sid: u32| u64::from((sid + 2) * MSS);
    let run = run_datapath(
        &dir.0,
        &[
            "--flows",
            "3",
            "--rtt-ms",
            "10",
            "--duration-ms",
            "1200",
            "--link-mbps",
            "100",
            "--cong-alg",
            "test-alg",
            "--datapath-id",
            "7",
        ],
        commanding_agent(cwnd_for),
    );
    assert!(run.status.success(), "stderr: {}", run.stderr);
    let seen = &run.seen;

    // READY, then CREATEs with sids 1, 2, 3 (the connection table was clean).
    assert_eq!(seen.ready_ids, vec![7]);
    let sids: Vec<u32> = seen.creates.iter().map(|(sid, _)| *sid).collect();
    assert_eq!(sids, vec![1, 2, 3]);
    for (i, (_, create)) in seen.creates.iter().enumerate() {
        assert_eq!(create.len(), 96);
        assert_eq!(u32_at(create, 8), 10 * MSS, "init_cwnd in bytes");
        assert_eq!(u32_at(create, 12), MSS);
        assert_eq!(u32_at(create, 16), u32::from(std::net::Ipv4Addr::LOCALHOST));
        assert_eq!(u32_at(create, 20), 40_000 + i as u32);
        assert_eq!(u32_at(create, 28), 5201);
        assert_eq!(&create[32..41], b"test-alg\0");
    }
    let starts: Vec<u64> = run.events("start").map(|l| num(l, "sid")).collect();
    assert_eq!(starts, vec![1, 2, 3]);

    for sid in 1..=3u32 {
        let cwnd = cwnd_for(sid);
        let of_sid = |l: &&str| num(l, "sid") == u64::from(sid);
        // The commanded cwnd shows up once and is never re-issued with an older value.
        let changes: Vec<u64> = run.events("cwnd").filter(of_sid).map(|l| num(l, "cwnd_bytes")).collect();
        assert_eq!(changes, vec![cwnd], "sid {sid}");
        let set_at = run.events("cwnd").find(of_sid).map(|l| num(l, "t_us")).unwrap();
        // The flow obeys it from then on: in flight never exceeds it, and the throughput is
        // one window per 10 ms RTT.
        let stats: Vec<&str> = run.events("stats").filter(of_sid).filter(|l| num(l, "t_us") > set_at).collect();
        assert!(stats.len() > 50, "sid {sid}: {} stats", stats.len());
        assert!(stats.iter().all(|l| num(l, "inflight_bytes") <= cwnd));
        assert!(stats.iter().all(|l| num(l, "cwnd_bytes") == cwnd));
        // (Averaged over the run: a 10 ms stats interval holds 2 or 3 of the 3-packet windows'
        // ACKs depending on phase.)
        let (first, last) = (stats[0], stats[stats.len() - 1]);
        let bytes = num(last, "delivered_bytes") - num(first, "delivered_bytes");
        let kbps = bytes * 8 * 1000 / (num(last, "t_us") - num(first, "t_us"));
        let expected_kbps = cwnd * 8 * 100 / 1000;
        assert!(kbps.abs_diff(expected_kbps) * 10 <= expected_kbps, "sid {sid}: {kbps} kbit/s");

        // Reports arrive: one per ACK, each carrying that ACK's bytes_acked.
        let reports = &seen.reports[&sid];
        assert!(reports.len() > 100, "sid {sid}: {} reports", reports.len());
        assert!(reports.iter().all(|r| r == &vec![u64::from(MSS)]), "sid {sid}");
        let end = run.events("end").find(of_sid).unwrap();
        assert_eq!(field(end, "reason"), "duration");
        assert_eq!(num(end, "reports"), reports.len() as u64, "stderr: {}", run.stderr);
        assert_eq!(num(end, "invoke_errors"), 0);
    }
    // Every connection is freed on exit, so the agent sees each close.
    let mut closes = seen.closes.clone();
    closes.sort_unstable();
    assert_eq!(closes, vec![1, 2, 3]);
    assert!(!run.stderr.contains("was not zeroed"), "stderr: {}", run.stderr);
}

#[test]
fn primitives_and_the_commanded_cwnd_reach_libccp() {
    let dir = TestDir::new("prims");
    // Report field order.
    const SOURCES: [(u8, u32); 13] = [
        (PRIMITIVE, 0),  // 0 Ack.bytes_acked
        (PRIMITIVE, 3),  // 1 Ack.ecn_packets
        (PRIMITIVE, 4),  // 2 Ack.lost_pkts_sample
        (PRIMITIVE, 6),  // 3 Ack.packets_acked
        (PRIMITIVE, 8),  // 4 Flow.bytes_in_flight
        (PRIMITIVE, 9),  // 5 Flow.bytes_pending
        (PRIMITIVE, 10), // 6 Flow.packets_in_flight
        (PRIMITIVE, 11), // 7 Flow.rate_incoming
        (PRIMITIVE, 12), // 8 Flow.rate_outgoing
        (PRIMITIVE, 13), // 9 Flow.rtt_sample_us
        (PRIMITIVE, 14), // 10 Flow.was_timeout
        (IMPLICIT, 4),   // 11 Cwnd: snd_cwnd as fed back, or the update applied
        (PRIMITIVE, 2),  // 12 Ack.ecn_bytes
    ];
    // 12 packets: more than the 8.6-packet BDP, so the link saturates with a small queue.
    let cwnd = u64::from(12 * MSS);
    let run = run_datapath(
        &dir.0,
        &[
            "--rtt-ms",
            "10",
            "--link-mbps",
            "10",
            "--queue-pkts",
            "8",
            "--ecn-k",
            "3",
            "--loss-at-ms",
            "150",
            "--timeout-at-ms",
            "300",
            "--duration-ms",
            "600",
        ],
        move |typ, sid, _| match typ {
            READY => vec![copy_program(1, &SOURCES)],
            CREATE => vec![change_prog(sid, 1), update_cwnd(sid, cwnd)],
            _ => Vec::new(),
        },
    );
    assert!(run.status.success(), "stderr: {}", run.stderr);
    let reports = &run.seen.reports[&1];
    assert!(reports.len() > 200, "{} reports", reports.len());
    assert!(reports.iter().all(|r| r.len() == SOURCES.len()));

    // The update is applied on the first invoke and then fed back unchanged as snd_cwnd.
    assert!(reports.iter().all(|r| r[11] == cwnd), "Cwnd register flapped");
    let acks: Vec<&Vec<u64>> = reports.iter().filter(|r| r[10] == 0).collect();
    for r in &acks {
        assert_eq!(r[0], r[3] * u64::from(MSS), "bytes_acked vs packets_acked: {r:?}");
        assert_eq!(r[4], r[6] * u64::from(MSS), "bytes vs packets in flight: {r:?}");
        assert_eq!(r[12], r[1] * u64::from(MSS), "ecn bytes vs packets: {r:?}");
        assert_eq!(r[5], u64::from(u32::MAX), "an unlimited flow always has data pending");
        assert!(r[9] >= 10_000 && r[9] < 30_000, "rtt_sample_us {r:?}");
    }
    // The first window of 10 hits a 3-packet ECN threshold; the scripted loss is detected.
    assert!(acks.iter().map(|r| r[1]).sum::<u64>() >= 6);
    assert!(acks.iter().map(|r| r[2]).sum::<u64>() >= 1);
    // Late in the run the ACK clock runs at the 10 Mbit/s link rate.
    let rate = acks[acks.len() - 1][7];
    assert!(rate.abs_diff(1_250_000) < 125_000, "rate_incoming {rate}");
    // Exactly one invoke carries the scripted timeout; it has no RTT sample (read as 2^32-1).
    let timeouts: Vec<&Vec<u64>> = reports.iter().filter(|r| r[10] == 1).collect();
    assert_eq!(timeouts.len(), 1);
    assert_eq!((timeouts[0][3], timeouts[0][4]), (0, 0));
    assert_eq!(timeouts[0][9], u64::from(u32::MAX));
    assert_eq!(run.events("timeout").count(), 1);
    assert!(run.events("mark").count() >= 1);
    assert!(run.events("loss").count() >= 1);
}

#[test]
fn commanded_pacing_rate_limits_the_flow() {
    let dir = TestDir::new("pacing");
    let rate = 150_000u64; // bytes/s = 1.2 Mbit/s
    let run = run_datapath(&dir.0, &["--rtt-ms", "10", "--duration-ms", "700"], move |typ, sid, _| match typ {
        READY => vec![copy_program(1, &[(IMPLICIT, 5)])],
        CREATE => vec![change_prog(sid, 1), update_cwnd_and_rate(sid, u64::from(20 * MSS), rate)],
        _ => Vec::new(),
    });
    assert!(run.status.success(), "stderr: {}", run.stderr);
    // The Rate register reads back as commanded on every invoke (snd_rate is fed back).
    assert!(run.seen.reports[&1].iter().all(|r| r == &vec![rate]));
    let rates: Vec<u64> = run.events("rate").map(|l| num(l, "rate_bytes_per_s")).collect();
    assert_eq!(rates, vec![rate]);
    let stats: Vec<&str> = run.events("stats").skip(10).collect();
    let (first, last) = (stats[0], stats[stats.len() - 1]);
    let bytes = num(last, "delivered_bytes") - num(first, "delivered_bytes");
    let bytes_per_s = bytes * 1_000_000 / (num(last, "t_us") - num(first, "t_us"));
    assert!(bytes_per_s.abs_diff(rate) * 10 < rate, "{bytes_per_s} B/s");
    // Paced at ~10 ms per packet over a 10 ms RTT: about one packet in flight, not 20.
    assert!(stats.iter().all(|l| num(l, "inflight_pkts") <= 2));
}

#[test]
fn relative_bind_makes_the_agent_reply_relative_to_the_directory() {
    let dir = TestDir::new("relative");
    let run = run_datapath(
        &dir.0,
        &["--relative-bind", "--rtt-ms", "10", "--duration-ms", "300"],
        commanding_agent(|_| u64::from(4 * MSS)),
    );
    assert!(run.status.success(), "stderr: {}", run.stderr);
    assert!(run.seen.peers.iter().all(|p| p == Path::new("dp")), "{:?}", run.seen.peers);
    let cwnds: Vec<u64> = run.events("cwnd").map(|l| num(l, "cwnd_bytes")).collect();
    assert_eq!(cwnds, vec![u64::from(4 * MSS)]);
    assert!(!run.seen.reports[&1].is_empty());
    assert_eq!(run.seen.closes, vec![1]);
}

#[test]
fn bad_agent_messages_are_reported_not_fatal() {
    let dir = TestDir::new("reject");
    let mut too_long = header(2, 20 + 16 * 301, 0);
    too_long.extend(9u32.to_le_bytes());
    too_long.extend(1u32.to_le_bytes());
    too_long.extend(300u32.to_le_bytes());
    too_long.resize(20 + 16 * 301, 0);
    let run = run_datapath(&dir.0, &["--rtt-ms", "10", "--duration-ms", "300"], move |typ, sid, _| match typ {
        READY => vec![vec![1, 2, 3], too_long.clone(), install(1)],
        CREATE => vec![update_cwnd(77, 5000), change_prog(sid, 9), change_prog(sid, 1)],
        _ => Vec::new(),
    });
    assert!(run.status.success(), "stderr: {}", run.stderr);
    for expected in
        ["malformed datagram", "300 instructions", "UPDATE_FIELDS for sid 77: error -71", "program uid 9 is not installed"]
    {
        assert!(run.stderr.contains(expected), "{expected:?} missing from stderr: {}", run.stderr);
    }
    // The valid program still runs.
    assert!(!run.seen.reports[&1].is_empty());
    assert_eq!(run.seen.closes, vec![1]);
}

#[test]
fn finite_flows_complete_without_a_program_and_exit_early() {
    let dir = TestDir::new("finite");
    let started = Instant::now();
    let run =
        run_datapath(&dir.0, &["--flows", "2", "--bytes", "100000", "--rtt-ms", "10", "--duration-ms", "5000"], |_, _, _| {
            Vec::new()
        });
    assert!(run.status.success(), "stderr: {}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(3));
    let ends: Vec<&str> = run.events("end").collect();
    assert_eq!(ends.len(), 2);
    for end in ends {
        assert_eq!(field(end, "reason"), "done");
        assert_eq!(num(end, "delivered_bytes"), 100_000);
        // 70 packets with a window of 10: 7 round trips of 10 ms.
        let fct = num(end, "fct_us");
        assert!((70_000..80_000).contains(&fct), "{end}");
    }
    let mut closes = run.seen.closes.clone();
    closes.sort_unstable();
    assert_eq!(closes, vec![1, 2]);
    assert!(run.stderr.contains("error -96"), "stderr: {}", run.stderr);
}

#[test]
fn churn_replaces_each_flow_after_its_life_and_reuses_its_sid() {
    let dir = TestDir::new("churn");
    let args = ["--flows", "2", "--flow-life-ms", "200", "--duration-ms", "700", "--rtt-ms", "10", "--quiet"];
    let run = run_datapath(&dir.0, &args, commanding_agent(|_| u64::from(4 * MSS)));
    assert!(run.status.success(), "stderr: {}", run.stderr);
    // Flow 0 is replaced at 100, 300 and 500 ms, flow 1 at 200, 400 and 600 ms; the last two
    // end with the run.
    let reasons: Vec<&str> = run.events("end").map(|l| field(l, "reason")).collect();
    assert_eq!(reasons.iter().filter(|r| **r == "life").count(), 6, "{reasons:?}");
    assert_eq!(reasons.iter().filter(|r| **r == "duration").count(), 2, "{reasons:?}");
    assert_eq!(run.events("start").count(), 8);
    assert!(run.stdout.lines().all(|l| l.contains("\"ev\":\"start\"") || l.contains("\"ev\":\"end\"")), "--quiet");
    // Every replacement is a new connection on the sid just freed, which the agent saw close.
    let sids: Vec<u32> = run.seen.creates.iter().map(|(sid, _)| *sid).collect();
    assert_eq!(sids.len(), 8, "{sids:?}");
    assert!(sids.iter().all(|s| [1, 2].contains(s)), "{sids:?}");
    assert_eq!(run.seen.closes.len(), 8);
    // Each flow's reports are its own (the sid's earlier flows do not count), and the new flows
    // run the agent's program too.
    for end in run.events("end") {
        let sid = num(end, "sid") as u32;
        assert!(num(end, "reports") > 0, "{end}");
        assert!(num(end, "reports") < run.seen.reports[&sid].len() as u64, "{end}");
    }
    let total: u64 = run.events("end").map(|l| num(l, "reports")).sum();
    assert_eq!(total, run.seen.reports.values().map(|r| r.len() as u64).sum::<u64>());
}

#[test]
fn a_flow_whose_create_libccp_holds_back_starts_when_it_is_sent() {
    // Flow 0 is replaced after 60 ms, before libccp lets its connection slot send another
    // CREATE (100 ms): libccp sends it from a later invoke, and only then is the sid known.
    let dir = TestDir::new("pending");
    let args = ["--flows", "2", "--flow-life-ms", "120", "--duration-ms", "400", "--rtt-ms", "10", "--quiet"];
    let run = run_datapath(&dir.0, &args, commanding_agent(|_| u64::from(4 * MSS)));
    assert!(run.status.success(), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("create message: -72"), "libccp held a CREATE back; stderr: {}", run.stderr);
    let starts: Vec<(u64, u64)> = run.events("start").map(|l| (num(l, "t_us"), num(l, "sid"))).collect();
    assert_eq!(starts.len(), run.seen.creates.len(), "one start record per CREATE: {starts:?}");
    assert!(starts.iter().all(|(_, sid)| *sid != 0), "{starts:?}");
    // Flow 0's second start waited for the 100 ms to pass.
    let flow0: Vec<u64> = run.events("start").filter(|l| num(l, "flow") == 0).map(|l| num(l, "t_us")).collect();
    assert!(flow0.len() >= 2 && flow0[1] >= 100_000, "{flow0:?}");
    // Every end record closes a started sid.
    let mut live = std::collections::HashSet::new();
    for l in run.stdout.lines() {
        let sid = num(l, "sid");
        match field(l, "ev") {
            "start" => assert!(live.insert(sid), "{l}"),
            "end" => assert!(live.remove(&sid), "{l}"),
            _ => {}
        }
    }
}

#[test]
fn a_create_no_agent_took_is_sent_again_once_one_reads() {
    let dir = TestDir::new("recreate");
    let agent_path = dir.0.join("agent");
    let bind = || {
        let a = UnixDatagram::bind(&agent_path).unwrap();
        a.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        a
    };
    let agent = bind();
    // Flow 0 starts at once, flow 1 at 600 ms, while no agent reads.
    let mut child = Command::new(BIN)
        .args(["--dir", dir.0.to_str().unwrap(), "--name", "dp", "--agent", "agent"])
        .args(["--flows", "2", "--stagger-ms", "600", "--rtt-ms", "10", "--duration-ms", "2000", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = vec![0u8; 65_536];
    let creates = |a: &UnixDatagram, buf: &mut [u8], until: Instant| {
        let mut sids = Vec::new();
        while Instant::now() < until {
            if let Ok(n) = a.recv(buf) {
                if u16_at(&buf[..n], 0) == CREATE {
                    sids.push(u32_at(&buf[..n], 4));
                }
            }
        }
        sids
    };
    let t0 = Instant::now();
    assert_eq!(creates(&agent, &mut buf, t0 + Duration::from_millis(300)), vec![1]);
    drop(agent);
    std::fs::remove_file(&agent_path).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let agent = bind();
    let sids = creates(&agent, &mut buf, t0 + Duration::from_millis(1500));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        sids,
        vec![2],
        "flow 1's CREATE reaches the agent that came back; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn missing_agent_is_a_clear_error() {
    let dir = TestDir::new("noagent");
    let out = Command::new(BIN).args(["--dir", dir.0.to_str().unwrap(), "--wait-agent-ms", "100"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}/portus", dir.0.display())), "{stderr}");
    assert!(stderr.contains("is the agent running?"), "{stderr}");
    // The stale-socket cleanup leaves nothing behind.
    assert!(!dir.0.join("test-dp").exists());
}

#[test]
fn bad_arguments_exit_with_code_2() {
    for args in [&["--flows", "0"][..], &["--rtt-ms", "fast"], &["--nope"]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--help"));
    }
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--relative-bind"));
}
