//! The command line: `ccp-dpdk send` (the datapath) and `ccp-dpdk sink` (a kernel TCP receiver
//! that checks the stream).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use ccp_libccp_host::args::AgentArgs;
use ccp_libccp_host::ipc::Endpoints;
use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "ccp-dpdk",
    version,
    about = "The DPDK datapath of ccp-agent: a user-space TCP sender on a DPDK port whose congestion control is a CCP \
             agent's (ccp-agent or portus, through libccp), with an in-process Reno/Cubic fallback"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Open TCP connections over a DPDK port to HOST:PORT and send N bytes (or for S seconds) on
    /// each, printing goodput, RTT and window once per --report-ms.
    Send(SendArgs),
    /// A plain kernel TCP receiver: accept connections, read them to the end, and say whether
    /// each stream is the byte pattern `send` sends, intact and in order.
    Sink(SinkArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FallbackArg {
    Reno,
    Cubic,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The DPDK virtual device to send through, as an EAL `--vdev` value, e.g.
    /// `net_af_xdp0,iface=veth0` or `net_af_packet0,iface=veth0`. Repeatable; the first is used.
    #[arg(long, value_name = "SPEC", required_unless_present = "eal_arg")]
    pub vdev: Vec<String>,

    /// An extra EAL argument (repeatable), e.g. `--eal-arg=-a --eal-arg=0000:3b:00.0` for a
    /// physical NIC bound to vfio-pci. The defaults are `--no-huge --no-pci --no-shconf
    /// --no-telemetry -l LCORE -m MEM`; with --eal-arg given, `--no-pci` is left out.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub eal_arg: Vec<String>,

    /// The CPU the datapath's loop runs on.
    #[arg(long, default_value_t = 0, value_name = "CPU")]
    pub lcore: u32,

    /// EAL memory, MiB (the mbuf pool lives there).
    #[arg(long, default_value_t = 256, value_name = "MIB", value_parser = clap::value_parser!(u32).range(64..=65_536))]
    pub mem_mib: u32,

    /// This host's IPv4 address on the port.
    #[arg(long, value_name = "ADDR")]
    pub ip: Ipv4Addr,

    /// The receiver, IPv4:PORT (a kernel TCP listener: `ccp-dpdk sink`, `iperf3 -s`, …).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_v4)]
    pub dst: SocketAddrV4,

    /// The next hop when the receiver is not on the port's subnet (a router); its MAC address is
    /// resolved with ARP. Default: the receiver itself.
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<Ipv4Addr>,

    /// The next hop's MAC address (aa:bb:cc:dd:ee:ff), instead of resolving it with ARP.
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub dst_mac: Option<[u8; 6]>,

    /// Connections to open, each from its own source port.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16_384))]
    pub flows: u32,

    /// Source port of the first connection; connection i uses PORT + i.
    #[arg(long, default_value_t = 40_000, value_name = "PORT")]
    pub src_port: u16,

    /// Bytes to send on each connection (then FIN); without it, send for --seconds.
    #[arg(long, value_name = "N", conflicts_with = "seconds")]
    pub bytes: Option<u64>,

    /// How long to send, seconds (default 10 when --bytes is not given).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: Option<u64>,

    /// Largest payload per segment, bytes (the peer's MSS caps it too).
    #[arg(long, default_value_t = 1448, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(536..=1460))]
    pub mss: u16,

    /// Initial window, packets.
    #[arg(long, default_value_t = 10, value_name = "PKTS", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub init_cwnd_pkts: u32,

    /// Do not negotiate ECN.
    #[arg(long)]
    pub no_ecn: bool,

    /// Do not negotiate SACK.
    #[arg(long)]
    pub no_sack: bool,

    /// The congestion control for connections no agent steers (no agent, the agent gone, before
    /// its first command).
    #[arg(long, value_enum, default_value_t = FallbackArg::Cubic)]
    pub fallback: FallbackArg,

    /// Run without an agent: every connection on the fallback.
    #[arg(long)]
    pub no_agent: bool,

    #[command(flatten)]
    pub ipc: AgentArgs,

    /// This datapath's socket name inside --ipc-dir.
    #[arg(long, default_value = "ccp-dpdk", value_name = "NAME")]
    pub ipc_name: String,

    /// The agent counts as gone when it has not read a message for this long, ms (it hangs with
    /// its socket open); its connections then run on the fallback.
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub silence_timeout_ms: u64,

    /// One line of goodput, RTT and window per this many ms.
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub report_ms: u64,

    /// Write the lines as JSON (one object per line) instead of text.
    #[arg(long)]
    pub json: bool,

    /// Per-connection lines as well as the totals.
    #[arg(long)]
    pub per_flow: bool,

    /// When a loop pass finds nothing to do, sleep this long, µs (0: poll without pause, the
    /// usual DPDK mode; it keeps one CPU busy).
    #[arg(long, default_value_t = 20, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub idle_sleep_us: u64,
}

impl SendArgs {
    pub fn endpoints(&self) -> Endpoints {
        self.ipc.endpoints(&self.ipc_name)
    }

    /// The EAL's arguments.
    pub fn eal_args(&self) -> Vec<String> {
        let mut a = vec!["--no-huge".to_string(), "--no-shconf".into(), "--no-telemetry".into()];
        if self.eal_arg.is_empty() {
            a.push("--no-pci".into());
        }
        a.extend(["-l".into(), self.lcore.to_string(), "-m".into(), self.mem_mib.to_string()]);
        a.push("--log-level=lib.eal:warning".into());
        for v in &self.vdev {
            a.extend(["--vdev".into(), v.clone()]);
        }
        a.extend(self.eal_arg.iter().cloned());
        a
    }

    /// The device to use: the first vdev's name (before its first comma).
    pub fn device(&self) -> Option<String> {
        self.vdev.first().map(|v| v.split(',').next().unwrap_or(v).to_string())
    }
}

#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,

    /// Exit after this many connections have ended (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Only count the bytes (no stream hash): for throughput measurements, where hashing would
    /// take CPU the senders under test need.
    #[arg(long)]
    pub no_verify: bool,

    /// The receive buffer of every connection (SO_RCVBUF), bytes: a receiver whose window, not
    /// the sender's, limits the transfer. Default: the kernel's autotuning.
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<u32>,
}

fn parse_v4(s: &str) -> Result<SocketAddrV4, String> {
    s.parse().map_err(|_| format!("{s:?} is not IPv4:PORT"))
}

pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("{s:?} is not a MAC address like 02:00:00:00:00:01");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(extra: &[&str]) -> Result<SendArgs, clap::Error> {
        let mut argv = vec!["ccp-dpdk", "send", "--vdev", "net_af_xdp0,iface=v0", "--ip", "10.0.0.1", "--dst", "10.0.0.2:5201"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|c| match c.cmd {
            Cmd::Send(a) => a,
            Cmd::Sink(_) => unreachable!(),
        })
    }

    #[test]
    fn defaults_run_on_a_vdev_without_hugepages_or_pci() {
        let a = send(&[]).unwrap();
        let eal = a.eal_args();
        for want in ["--no-huge", "--no-pci", "--no-shconf", "--vdev", "net_af_xdp0,iface=v0"] {
            assert!(eal.iter().any(|x| x == want), "{want} in {eal:?}");
        }
        assert_eq!(a.device().as_deref(), Some("net_af_xdp0"));
        assert_eq!((a.flows, a.mss, a.fallback, a.ipc.agent.as_str()), (1, 1448, FallbackArg::Cubic, "portus"));
    }

    #[test]
    fn bad_values_are_refused_with_what_is_wrong() {
        assert!(send(&["--bytes", "10", "--seconds", "3"]).is_err(), "--bytes and --seconds conflict");
        assert!(send(&["--flows", "0"]).is_err());
        assert!(send(&["--mss", "9000"]).is_err());
        let e = send(&["--dst-mac", "zz:00:00:00:00:01"]).unwrap_err().to_string();
        assert!(e.contains("not a MAC address"), "{e}");
        assert!(
            Cli::try_parse_from(["ccp-dpdk", "send", "--ip", "10.0.0.1", "--dst", "10.0.0.2:1"]).is_err(),
            "a device is needed"
        );
        assert!(send(&["--cong-alg", &"x".repeat(64)]).is_err());
    }

    #[test]
    fn macs_parse() {
        assert_eq!(parse_mac("02:0a:FF:00:10:01"), Ok([2, 10, 255, 0, 16, 1]));
        assert!(parse_mac("02:0a:ff:00:10").is_err());
        assert!(parse_mac("02:0a:ff:00:10:1").is_err());
    }
}
