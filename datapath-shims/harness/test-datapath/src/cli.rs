//! Command-line parsing.
//!
//! Hand-written rather than clap: every crate linked into this binary must be known never to
//! call `f64::ln` (libccp's exported `log` symbol would capture the call), and a small parser
//! is easier to audit than a large dependency tree. Numbers are parsed as integers or as
//! fixed-point decimals, so no floating point is involved anywhere.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use ccp_libccp_host::ipc::{Bind, Endpoints};

/// The usage text printed by `--help`.
pub const HELP: &str = "\
ccp-test-datapath: emulate TCP-like flows with synthetic ACKs and drive the real libccp
datapath library with them, talking to a CCP agent over libccp's unix-socket IPC.

USAGE:
    ccp-test-datapath [OPTIONS]

Options take a value either as `--opt VALUE` or `--opt=VALUE`. Decimal values (marked DEC)
accept a fractional part, e.g. `--rtt-ms 0.5` or `--link-mbps 12.5`.

FLOWS
    --flows N              number of flows to emulate, 1..=1024 [default: 1]
    --stagger-ms DEC       start flow i at i * DEC ms [default: 0, all start at once]
    --duration-ms DEC      run time; the process then frees its connections and exits 0
                           (it exits earlier once every finite flow has completed)
                           [default: 10000]
    --bytes N              finite flow size in bytes (each flow); the flow closes its
                           connection when all bytes are acknowledged [default: unlimited]
    --mss N                bytes per packet, 1..=65535 [default: 1448]
    --init-cwnd-pkts N     initial congestion window in packets [default: 10]
    --ack-every N          receiver sends one ACK per N packets (delayed ACKs; a pending ACK
                           is sent after 40 ms at the latest) [default: 1]
    --flow-life-ms DEC     churn: close each flow after this long and start a new one in its
                           place at once (a new connection; libccp hands out the freed sid
                           again). Flow i's first life is (i + 1) / N of it, so with N flows
                           N per DEC ms close, evenly spread [default: flows live for the whole
                           run; not with --bytes]

PATH
    --rtt-ms DEC[,DEC..]   base round-trip propagation delay in ms; one value for all flows
                           or a comma-separated list with one value per flow [default: 20]
    --link-mbps DEC        bottleneck rate in Mbit/s with a drop-tail FIFO queue
                           [default: none, i.e. an infinitely fast path]
    --queue-pkts N         bottleneck buffer in packets, counting the packet in service
                           [default: one bandwidth-delay product, at least 2 packets]
    --shared-link          all flows share one bottleneck (needs --link-mbps); by default
                           every flow has its own
    --ecn-k K              mark CE on packets that arrive at the bottleneck while more than K
                           packets are queued (DCTCP-style instantaneous threshold; needs
                           --link-mbps)
    --mark-fraction DEC    additionally mark this fraction (0..=1) of each flow's delivered
                           packets, deterministically evenly spaced (0.25 = every 4th)
                           [default: 0]
    --loss-at-ms DEC       drop each flow's next packet sent at or after this time;
                           repeatable, or a comma-separated list
    --timeout-at-ms DEC    scripted retransmission timeout for every flow at this time: all
                           packets in flight are treated as lost and resent, and libccp is
                           invoked with was_timeout; repeatable, or a comma-separated list

CREATE MESSAGE
    --cong-alg NAME        algorithm name sent in CREATE (at most 63 bytes) [default: none]
    --src-ip ADDR          IPv4 source address [default: 127.0.0.1]
    --dst-ip ADDR          IPv4 destination address [default: 127.0.0.1]
    --src-port P           source port of flow 0; flow i uses P + i [default: 40000]
    --dst-port P           destination port of every flow [default: 5201]
    --net-order            send addresses and ports in network byte order, as ccp-kernel
                           does [default: host byte order, i.e. the plain numbers]

IPC
    --dir DIR              socket directory, created if missing [default: /tmp/ccp]
    --name NAME            this datapath's socket name inside DIR; a stale socket there is
                           removed [default: test-dp]
    --agent NAME           the agent's socket name inside DIR [default: portus]
    --relative-bind        chdir to DIR and bind the bare NAME, so the agent sees a relative
                           sender path (what portus 0.7 expects: it replies to /tmp/ccp/<path>)
    --wait-agent-ms DEC    how long to wait for the agent's socket to accept datagrams before
                           failing [default: 5000]
    --datapath-id N        datapath id sent in READY [default: 0]

TIMING
    --tick-us N            wake up at most once per N microseconds and handle all events due
                           by then; events are timestamped exactly either way, a tick only
                           delays them in real time (messages from the agent are handled at
                           once). 0 wakes for every event, at several times the CPU cost
                           [default: 250]

    -h, --help             print this help and exit

OUTPUT
    --quiet                write only the start and end records

    JSON Lines on stdout, integers only; every record has t_us (microseconds since the
    emulation started), sid (the socket id libccp assigned to the flow) and ev, one of: start,
    cwnd, rate, loss, timeout, mark, stats, end. See README.md for every field. Diagnostics
    (libccp log lines, messages libccp rejected with their error codes) go to stderr.

EXIT STATUS
    0 on success, 1 on a runtime error (e.g. the agent's socket never appeared), 2 on bad
    command-line arguments.
";

/// A validated run configuration. Times are in microseconds, rates in kbit/s.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub flows: usize,
    pub stagger_us: u64,
    pub duration_us: u64,
    pub flow_bytes: Option<u64>,
    pub mss: u32,
    pub init_cwnd_pkts: u32,
    pub ack_every: u32,
    /// One entry per flow (a single `--rtt-ms` value is repeated).
    pub rtts_us: Vec<u64>,
    pub link_kbps: Option<u64>,
    pub queue_pkts: Option<u64>,
    pub shared_link: bool,
    pub ecn_k: Option<u64>,
    /// Fraction of delivered packets to mark, in parts per million.
    pub mark_ppm: u64,
    /// Sorted.
    pub loss_at_us: Vec<u64>,
    /// Sorted.
    pub timeout_at_us: Vec<u64>,
    pub cong_alg: Option<String>,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub net_order: bool,
    pub dir: PathBuf,
    pub name: String,
    pub agent: String,
    pub relative_bind: bool,
    pub wait_agent_us: u64,
    pub datapath_id: u32,
    pub tick_us: u64,
    /// Churn: each flow is replaced by a new one after this long.
    pub flow_life_us: Option<u64>,
    /// Only start and end records.
    pub quiet: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            flows: 1,
            stagger_us: 0,
            duration_us: 10_000_000,
            flow_bytes: None,
            mss: 1448,
            init_cwnd_pkts: 10,
            ack_every: 1,
            rtts_us: vec![20_000],
            link_kbps: None,
            queue_pkts: None,
            shared_link: false,
            ecn_k: None,
            mark_ppm: 0,
            loss_at_us: Vec::new(),
            timeout_at_us: Vec::new(),
            cong_alg: None,
            src_ip: Ipv4Addr::LOCALHOST,
            dst_ip: Ipv4Addr::LOCALHOST,
            src_port: 40_000,
            dst_port: 5201,
            net_order: false,
            dir: PathBuf::from("/tmp/ccp"),
            name: "test-dp".to_string(),
            agent: "portus".to_string(),
            relative_bind: false,
            wait_agent_us: 5_000_000,
            datapath_id: 0,
            tick_us: 250,
            flow_life_us: None,
            quiet: false,
        }
    }
}

impl Config {
    /// Where the socket to the agent lives, and how it is bound.
    pub fn endpoints(&self) -> Endpoints {
        Endpoints {
            dir: self.dir.clone(),
            name: self.name.clone(),
            agent: self.agent.clone(),
            bind: if self.relative_bind { Bind::Relative } else { Bind::Absolute },
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Run(Box<Config>),
    Help,
}

/// Longest unix socket path the kernel accepts (`sizeof(sun_path) - 1`).
const MAX_SOCKET_PATH: usize = 107;

/// Parses the arguments after the program name.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut cfg = Config::default();
    let mut args = args.into_iter();
    let mut loss_at = Vec::new();
    let mut timeout_at = Vec::new();

    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        let (flag, inline_value) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        // Boolean flags take no value.
        let boolean = match flag.as_str() {
            "--shared-link" => Some(&mut cfg.shared_link),
            "--net-order" => Some(&mut cfg.net_order),
            "--relative-bind" => Some(&mut cfg.relative_bind),
            "--quiet" => Some(&mut cfg.quiet),
            _ => None,
        };
        if let Some(target) = boolean {
            if inline_value.is_some() {
                return Err(format!("{flag} takes no value"));
            }
            *target = true;
            continue;
        }
        if !flag.starts_with("--") {
            return Err(format!("unexpected argument `{arg}`"));
        }
        let value = match inline_value {
            Some(v) => v,
            None => args.next().ok_or_else(|| format!("{flag} needs a value"))?,
        };
        let v = value.as_str();
        let bad = |why: &str| format!("invalid value `{v}` for {flag}: {why}");
        match flag.as_str() {
            "--flows" => {
                cfg.flows = parse_int(v).map_err(|e| bad(&e))? as usize;
                if !(1..=1024).contains(&cfg.flows) {
                    return Err(bad("must be between 1 and 1024 (libccp's connection table)"));
                }
            }
            "--stagger-ms" => cfg.stagger_us = parse_fixed(v, 3).map_err(|e| bad(&e))?,
            "--duration-ms" => {
                cfg.duration_us = parse_fixed(v, 3).map_err(|e| bad(&e))?;
                if cfg.duration_us == 0 {
                    return Err(bad("must be positive"));
                }
            }
            "--flow-life-ms" => {
                let us = parse_fixed(v, 3).map_err(|e| bad(&e))?;
                if us == 0 {
                    return Err(bad("must be positive"));
                }
                cfg.flow_life_us = Some(us);
            }
            "--bytes" => {
                let b = parse_int(v).map_err(|e| bad(&e))?;
                if b == 0 {
                    return Err(bad("must be positive"));
                }
                cfg.flow_bytes = Some(b);
            }
            "--mss" => {
                let m = parse_int(v).map_err(|e| bad(&e))?;
                if !(1..=65_535).contains(&m) {
                    return Err(bad("must be between 1 and 65535"));
                }
                cfg.mss = m as u32;
            }
            "--init-cwnd-pkts" => {
                let n = parse_int(v).map_err(|e| bad(&e))?;
                if !(1..=65_535).contains(&n) {
                    return Err(bad("must be between 1 and 65535"));
                }
                cfg.init_cwnd_pkts = n as u32;
            }
            "--ack-every" => {
                let n = parse_int(v).map_err(|e| bad(&e))?;
                if !(1..=1000).contains(&n) {
                    return Err(bad("must be between 1 and 1000"));
                }
                cfg.ack_every = n as u32;
            }
            "--rtt-ms" => {
                let mut rtts = Vec::new();
                for part in v.split(',') {
                    let us = parse_fixed(part.trim(), 3).map_err(|e| bad(&e))?;
                    // At least 2 us so that each one-way half is a positive delay.
                    if !(2..=60_000_000).contains(&us) {
                        return Err(bad("each RTT must be between 0.002 and 60000 ms"));
                    }
                    rtts.push(us);
                }
                cfg.rtts_us = rtts;
            }
            "--link-mbps" => {
                let kbps = parse_fixed(v, 3).map_err(|e| bad(&e))?;
                if !(1..=1_000_000_000).contains(&kbps) {
                    return Err(bad("must be between 0.001 and 1000000 Mbit/s"));
                }
                cfg.link_kbps = Some(kbps);
            }
            "--queue-pkts" => {
                let q = parse_int(v).map_err(|e| bad(&e))?;
                if !(1..=10_000_000).contains(&q) {
                    return Err(bad("must be between 1 and 10000000"));
                }
                cfg.queue_pkts = Some(q);
            }
            "--ecn-k" => cfg.ecn_k = Some(parse_int(v).map_err(|e| bad(&e))?),
            "--mark-fraction" => {
                let ppm = parse_fixed(v, 6).map_err(|e| bad(&e))?;
                if ppm > 1_000_000 {
                    return Err(bad("must be between 0 and 1"));
                }
                cfg.mark_ppm = ppm;
            }
            "--loss-at-ms" => {
                for part in v.split(',') {
                    loss_at.push(parse_fixed(part.trim(), 3).map_err(|e| bad(&e))?);
                }
            }
            "--timeout-at-ms" => {
                for part in v.split(',') {
                    timeout_at.push(parse_fixed(part.trim(), 3).map_err(|e| bad(&e))?);
                }
            }
            "--cong-alg" => {
                if v.len() > 63 {
                    return Err(bad("at most 63 bytes (libccp's CREATE field)"));
                }
                if v.contains('\0') {
                    return Err(bad("must not contain NUL"));
                }
                cfg.cong_alg = Some(v.to_string());
            }
            "--src-ip" => cfg.src_ip = v.parse().map_err(|_| bad("not an IPv4 address"))?,
            "--dst-ip" => cfg.dst_ip = v.parse().map_err(|_| bad("not an IPv4 address"))?,
            "--src-port" => cfg.src_port = parse_port(v).map_err(|e| bad(&e))?,
            "--dst-port" => cfg.dst_port = parse_port(v).map_err(|e| bad(&e))?,
            "--dir" => {
                if v.is_empty() {
                    return Err(bad("must not be empty"));
                }
                cfg.dir = PathBuf::from(v);
            }
            "--name" => cfg.name = parse_socket_name(v).map_err(|e| bad(&e))?,
            "--agent" => cfg.agent = parse_socket_name(v).map_err(|e| bad(&e))?,
            "--wait-agent-ms" => {
                cfg.wait_agent_us = parse_fixed(v, 3).map_err(|e| bad(&e))?;
                if cfg.wait_agent_us > 3_600_000_000 {
                    return Err(bad("at most 3600000 (one hour)"));
                }
            }
            "--datapath-id" => {
                let id = parse_int(v).map_err(|e| bad(&e))?;
                cfg.datapath_id = u32::try_from(id).map_err(|_| bad("must fit in 32 bits"))?;
            }
            "--tick-us" => {
                cfg.tick_us = parse_int(v).map_err(|e| bad(&e))?;
                if cfg.tick_us > 100_000 {
                    return Err(bad("at most 100000 (100 ms)"));
                }
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }

    loss_at.sort_unstable();
    timeout_at.sort_unstable();
    cfg.loss_at_us = loss_at;
    cfg.timeout_at_us = timeout_at;
    validate(&mut cfg)?;
    Ok(Command::Run(Box::new(cfg)))
}

/// Cross-option checks, and expansion of a single RTT to one per flow.
fn validate(cfg: &mut Config) -> Result<(), String> {
    if cfg.rtts_us.len() == 1 {
        cfg.rtts_us = vec![cfg.rtts_us[0]; cfg.flows];
    } else if cfg.rtts_us.len() != cfg.flows {
        return Err(format!(
            "--rtt-ms lists {} values but --flows is {}; give one value or one per flow",
            cfg.rtts_us.len(),
            cfg.flows
        ));
    }
    if cfg.link_kbps.is_none() {
        for (opt, given) in
            [("--queue-pkts", cfg.queue_pkts.is_some()), ("--ecn-k", cfg.ecn_k.is_some()), ("--shared-link", cfg.shared_link)]
        {
            if given {
                return Err(format!("{opt} needs a bottleneck: give --link-mbps too"));
            }
        }
    }
    if cfg.flow_life_us.is_some() && cfg.flow_bytes.is_some() {
        return Err("--flow-life-ms replaces flows on a schedule, --bytes ends them by size: give one of them".to_string());
    }
    let last_port = u32::from(cfg.src_port) + cfg.flows as u32 - 1;
    if last_port > u32::from(u16::MAX) {
        return Err(format!("--src-port {} + {} flows runs past port 65535", cfg.src_port, cfg.flows));
    }
    if cfg.name == cfg.agent {
        return Err("--name and --agent must differ".to_string());
    }
    for name in [&cfg.name, &cfg.agent] {
        let len = if cfg.relative_bind && name == &cfg.name { name.len() } else { cfg.dir.as_os_str().len() + 1 + name.len() };
        if len > MAX_SOCKET_PATH {
            return Err(format!("socket path for `{name}` in {} is longer than {MAX_SOCKET_PATH} bytes", cfg.dir.display()));
        }
    }
    Ok(())
}

/// Parses a non-negative decimal integer.
fn parse_int(s: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a non-negative integer".to_string());
    }
    s.parse::<u64>().map_err(|_| "number too large".to_string())
}

/// Parses a non-negative decimal with at most `decimals` fractional digits into an integer
/// scaled by `10^decimals` (e.g. `parse_fixed("12.5", 3) == Ok(12_500)`).
fn parse_fixed(s: &str, decimals: u32) -> Result<u64, String> {
    let (int_part, frac_part) = s.split_once('.').unwrap_or((s, ""));
    let digits_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty()) || !digits_ok(int_part) || !digits_ok(frac_part) {
        return Err("expected a non-negative decimal number".to_string());
    }
    if frac_part.len() > decimals as usize {
        return Err(format!("at most {decimals} decimal places"));
    }
    let too_large = || "number too large".to_string();
    let int: u64 = if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| too_large())? };
    let mut frac: u64 = if frac_part.is_empty() { 0 } else { frac_part.parse().map_err(|_| too_large())? };
    for _ in frac_part.len()..decimals as usize {
        frac *= 10;
    }
    int.checked_mul(10u64.pow(decimals)).and_then(|v| v.checked_add(frac)).ok_or_else(too_large)
}

fn parse_port(s: &str) -> Result<u16, String> {
    let p = parse_int(s)?;
    u16::try_from(p).map_err(|_| "ports are at most 65535".to_string())
}

/// A socket name must be a single, non-empty path component.
fn parse_socket_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains('/') || s == "." || s == ".." || s.contains('\0') {
        return Err("must be a single non-empty file name".to_string());
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, String> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Command::Run(cfg) => Ok(*cfg),
            Command::Help => Err("help".to_string()),
        }
    }

    #[test]
    fn fixed_point() {
        assert_eq!(parse_fixed("12.5", 3), Ok(12_500));
        assert_eq!(parse_fixed("0.000001", 6), Ok(1));
        assert_eq!(parse_fixed(".5", 3), Ok(500));
        assert_eq!(parse_fixed("7", 3), Ok(7_000));
        assert_eq!(parse_fixed("7.", 3), Ok(7_000));
        assert!(parse_fixed("1.2345", 3).is_err());
        assert!(parse_fixed("-1", 3).is_err());
        assert!(parse_fixed("", 3).is_err());
        assert!(parse_fixed(".", 3).is_err());
        assert!(parse_fixed("1e3", 3).is_err());
        assert!(parse_fixed("99999999999999999999", 3).is_err());
    }

    #[test]
    fn defaults() {
        let cfg = run(&[]).unwrap();
        assert_eq!(cfg.rtts_us, vec![20_000]);
        assert_eq!(cfg.dir, PathBuf::from("/tmp/ccp"));
        assert_eq!((cfg.name.as_str(), cfg.agent.as_str()), ("test-dp", "portus"));
    }

    #[test]
    fn values_and_lists() {
        let cfg = run(&[
            "--flows",
            "3",
            "--rtt-ms=10,20.5,40",
            "--link-mbps",
            "12.5",
            "--loss-at-ms",
            "300",
            "--loss-at-ms=100,200",
            "--mark-fraction",
            "0.25",
            "--shared-link",
            "--cong-alg",
            "nimbus",
        ])
        .unwrap();
        assert_eq!(cfg.rtts_us, vec![10_000, 20_500, 40_000]);
        assert_eq!(cfg.link_kbps, Some(12_500));
        assert_eq!(cfg.loss_at_us, vec![100_000, 200_000, 300_000]);
        assert_eq!(cfg.mark_ppm, 250_000);
        assert!(cfg.shared_link);
        assert_eq!(cfg.cong_alg.as_deref(), Some("nimbus"));
        assert_eq!((cfg.flow_life_us, cfg.quiet), (None, false));
        let cfg = run(&["--flow-life-ms", "2500.5", "--quiet"]).unwrap();
        assert_eq!((cfg.flow_life_us, cfg.quiet), (Some(2_500_500), true));
    }

    #[test]
    fn rejects_bad_input() {
        for args in [
            &["--flows", "0"][..],
            &["--flows", "x"],
            &["--flows"],
            &["--bogus", "1"],
            &["stray"],
            &["--flows", "2", "--rtt-ms", "1,2,3"],
            &["--ecn-k", "5"],
            &["--mark-fraction", "1.5"],
            &["--mss", "0"],
            &["--name", "a/b"],
            &["--name", "portus"],
            &["--src-port", "65535", "--flows", "2"],
            &["--cong-alg", &"x".repeat(64)],
            &["--shared-link=yes"],
            &["--dir", &"d".repeat(200)],
            &["--wait-agent-ms", "18446744073709551"],
            &["--tick-us", "100001"],
            &["--flow-life-ms", "0"],
            &["--flow-life-ms", "1000", "--bytes", "5000"],
            &["--quiet=yes"],
        ] {
            assert!(run(args).is_err(), "accepted {args:?}");
        }
    }

    #[test]
    fn readme_shows_the_current_help() {
        assert!(include_str!("../README.md").contains(HELP), "update the --help text in README.md");
    }

    #[test]
    fn help() {
        assert_eq!(parse(["--help".to_string()]), Ok(Command::Help));
        for opt in [
            "--flows",
            "--stagger-ms",
            "--rtt-ms",
            "--link-mbps",
            "--queue-pkts",
            "--mss",
            "--init-cwnd-pkts",
            "--duration-ms",
            "--bytes",
            "--ecn-k",
            "--mark-fraction",
            "--loss-at-ms",
            "--timeout-at-ms",
            "--ack-every",
            "--cong-alg",
            "--src-port",
            "--dst-port",
            "--dir",
            "--name",
            "--agent",
            "--relative-bind",
            "--wait-agent-ms",
            "--shared-link",
            "--src-ip",
            "--dst-ip",
            "--net-order",
            "--datapath-id",
            "--flow-life-ms",
            "--quiet",
        ] {
            assert!(HELP.contains(opt), "{opt} missing from --help");
        }
    }
}
