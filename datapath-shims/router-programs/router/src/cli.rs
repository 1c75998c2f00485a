//! The `ccp-router` command line: the argument definitions. [`crate::args_to_config`] turns
//! them into a topology and a router configuration.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "ccp-router", version, about = "User-space router and trace-driven link emulator between network namespaces")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create PFX-snd and PFX-rcv joined through the emulated link, print one JSON "ready" line on
    /// stdout, forward until SIGTERM/SIGINT (or --duration-s), then tear down and print a summary.
    Run(RunArgs),
    /// Newcomer demo: a kernel bulk TCP flow through the emulated link, printed once per second
    /// and plotted to a PNG at the end.
    Demo(crate::demo::DemoArgs),
    /// Delete the namespaces and lock file of a prefix left behind by a crashed run.
    Cleanup {
        #[arg(long)]
        netns_prefix: String,
    },
    /// Parse a mahimahi trace and print its size and mean rate (or the first error).
    CheckTrace { file: PathBuf },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QdiscArg {
    Droptail,
    Abc,
    Dctcp,
    Phantom,
    Qcn,
    Codel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DelayArg {
    /// x = (backlog + packet) / capacity.
    Queue,
    /// x = (backlog + packet) / the mean capacity over --abc-delay-window-ms (a variant for
    /// burst-gap links, not the paper's).
    QueueMean,
    /// x = the packet's sojourn time.
    Sojourn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CreditArg {
    /// Eq. 2.2: f = tr/(2·cr) per departing packet, μ(t) counting the unused opportunities.
    Window,
    /// The authors' artifact: η/2 of credit banked per opportunity that finds the queue empty.
    PerOpportunity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CapacityArg {
    /// μ = opportunities in the last T (ABC).
    Past,
    /// μ = opportunities in the T ending --abc-lookahead-ms from now (PK-ABC, the oracle).
    Future,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NonEctArg {
    Pass,
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QuantArg {
    /// ⌈F_b in 1500 B packets⌉, capped at 63 (the thesis model).
    Packets,
    /// 63·F_b/F_b,max with F_b,max = Q_eq(1+2w) (802.1Qau style).
    Standard,
}

/// The emulated path: namespaces, links, queue and discipline (shared by `run` and `demo`).
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Namespace prefix: creates PFX-snd and PFX-rcv.
    #[arg(long)]
    pub netns_prefix: String,
    /// One-way propagation delay each way, ms.
    #[arg(long, default_value_t = 0.0)]
    pub delay_ms: f64,
    /// One-way delay sender → receiver, ms (overrides --delay-ms).
    #[arg(long)]
    pub delay_ms_down: Option<f64>,
    /// One-way delay receiver → sender, ms (overrides --delay-ms).
    #[arg(long)]
    pub delay_ms_up: Option<f64>,
    /// Per-flow-class one-way delay (repeatable), MATCH[,MATCH…]:DELAY, e.g.
    /// `dport=5201-5299:20` or `dst=10.77.0.2,proto=udp:down=1,up=1`. MATCH: dport, sport
    /// (PORT or LO-HI), src, dst (A.B.C.D[/LEN]), proto (tcp|udp), written for the
    /// sender → receiver direction (replies match with source and destination swapped). DELAY:
    /// MS for both directions, or down=MS and/or up=MS. Unmatched packets get --delay-ms; the
    /// queue is shared. Classes must not overlap.
    #[arg(long = "class-delay", value_name = "MATCH:DELAY")]
    pub class_delay: Vec<String>,
    /// Fixed rate of the sender → receiver link, Mbit/s, or "unlimited".
    #[arg(long)]
    pub rate_mbps: Option<String>,
    /// Mahimahi trace for the sender → receiver link (instead of --rate-mbps).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Fixed rate of the receiver → sender (ACK) link, Mbit/s; unlimited by default.
    #[arg(long)]
    pub uplink_rate_mbps: Option<String>,
    /// Mahimahi trace for the receiver → sender (ACK) link.
    #[arg(long)]
    pub uplink_trace: Option<PathBuf>,
    /// Buffer limit in packets (default 1000); also used by a shaped ACK link.
    #[arg(long, conflicts_with = "queue_bytes")]
    pub queue_pkts: Option<usize>,
    /// Buffer limit in bytes.
    #[arg(long)]
    pub queue_bytes: Option<u64>,
    /// Queue discipline of the sender → receiver link.
    #[arg(long, value_enum, default_value = "droptail")]
    pub qdisc: QdiscArg,

    /// ABC: target utilisation η.
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_eta: Option<f64>,
    /// ABC: queue-drain time constant δ, ms.
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_delta_ms: Option<f64>,
    /// ABC: delay threshold d_t, ms.
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_dt_ms: Option<f64>,
    /// ABC: rate-measurement window T, ms.
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_window_ms: Option<f64>,
    /// ABC: token bucket limit (> 1).
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_token_limit: Option<f64>,
    /// ABC: how the queuing delay x(t) is measured.
    #[arg(long, value_enum, help_heading = "ABC (--qdisc abc)")]
    pub abc_delay: Option<DelayArg>,
    /// ABC: with --abc-delay queue-mean, the window of the mean capacity, ms.
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_delay_window_ms: Option<f64>,
    /// ABC: how the capacity term becomes accelerate credit (trace-driven links; default window).
    #[arg(long, value_enum, help_heading = "ABC (--qdisc abc)")]
    pub abc_credit: Option<CreditArg>,
    /// ABC: the trace window μ(t) is counted over (default past; future is PK-ABC and needs
    /// --abc-lookahead-ms; on a fixed-rate link both are the rate).
    #[arg(long, value_enum, help_heading = "ABC (--qdisc abc)")]
    pub abc_capacity: Option<CapacityArg>,
    /// ABC: with --abc-capacity future, how far ahead the window ends, ms (PK-ABC: one RTT).
    #[arg(long, help_heading = "ABC (--qdisc abc)")]
    pub abc_lookahead_ms: Option<f64>,
    /// ABC: put non-ABC packets in a second queue served by weighted DRR with max-min weights
    /// (ABC coexisting with other flows, specs/abc.md §7). The classifier: `ecn` (Not-ECT packets
    /// are non-ABC) or `ports:FIRST-LAST` (packets to these destination ports are ABC's).
    #[arg(long, value_name = "CLASSIFIER", help_heading = "ABC (--qdisc abc)")]
    pub abc_coexist: Option<String>,

    /// DCTCP: marking threshold K, packets (also adds ECN marking to --qdisc qcn).
    #[arg(long, conflicts_with = "dctcp_k_bytes", help_heading = "DCTCP (--qdisc dctcp)")]
    pub dctcp_k_pkts: Option<usize>,
    /// DCTCP: marking threshold K, bytes.
    #[arg(long, help_heading = "DCTCP (--qdisc dctcp)")]
    pub dctcp_k_bytes: Option<u64>,
    /// DCTCP: what to do with Not-ECT packets above K.
    #[arg(long, value_enum, help_heading = "DCTCP (--qdisc dctcp)")]
    pub dctcp_non_ect: Option<NonEctArg>,

    /// Phantom queue: drain rate, Mbit/s.
    #[arg(long, conflicts_with = "pq_gamma", help_heading = "Phantom queue (--qdisc phantom)")]
    pub pq_drain_mbps: Option<f64>,
    /// Phantom queue: drain rate as a fraction γ of --rate-mbps (default 0.95).
    #[arg(long, help_heading = "Phantom queue (--qdisc phantom)")]
    pub pq_gamma: Option<f64>,
    /// Phantom queue: marking threshold, bytes (default 1000).
    #[arg(long, help_heading = "Phantom queue (--qdisc phantom)")]
    pub pq_threshold_bytes: Option<f64>,
    /// Phantom queue: cap on the virtual backlog, bytes (default none).
    #[arg(long, help_heading = "Phantom queue (--qdisc phantom)")]
    pub pq_cap_bytes: Option<f64>,

    /// QCN: equilibrium queue Q_eq, packets of 1500 B (default 22).
    #[arg(long, conflicts_with = "qcn_qeq_bytes", help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_qeq_pkts: Option<f64>,
    /// QCN: equilibrium queue Q_eq, bytes.
    #[arg(long, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_qeq_bytes: Option<u64>,
    /// QCN: derivative weight w (default 2).
    #[arg(long, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_w: Option<f64>,
    /// QCN: sampling: prob:P (Bernoulli per packet, default prob:0.01), bytes:N (every N bytes), or table (802.1Qau).
    #[arg(long, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_sample: Option<String>,
    /// QCN: F_b quantization.
    #[arg(long, value_enum, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_quant: Option<QuantArg>,
    /// QCN: seed of the sampling random source (default 1).
    #[arg(long, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_seed: Option<u64>,
    /// QCN: UDP port on the sending host that notifications go to (default 7470).
    #[arg(long, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_port: Option<u16>,
    /// QCN: extra delay before a notification reaches the sender, ms (default 0).
    #[arg(long, help_heading = "QCN congestion point (--qdisc qcn)")]
    pub qcn_feedback_delay_ms: Option<f64>,

    /// CoDel: target sojourn time, ms (default 5; the ABC artifact used 50).
    #[arg(long, help_heading = "CoDel (--qdisc codel)")]
    pub codel_target_ms: Option<f64>,
    /// CoDel: interval, ms (default 100).
    #[arg(long, help_heading = "CoDel (--qdisc codel)")]
    pub codel_interval_ms: Option<f64>,
    /// CoDel: mark ECT packets CE instead of dropping them.
    #[arg(long, help_heading = "CoDel (--qdisc codel)")]
    pub codel_ecn: bool,

    /// Sender address inside PFX-snd.
    #[arg(long, default_value = "10.77.0.1")]
    pub sender_addr: Ipv4Addr,
    /// Receiver address inside PFX-rcv.
    #[arg(long, default_value = "10.77.0.2")]
    pub receiver_addr: Ipv4Addr,
    /// Source address of the router's own packets (QCN notifications).
    #[arg(long, default_value = "10.77.0.254")]
    pub router_addr: Ipv4Addr,
    /// Give both namespaces' default routes the `tcp_usec_ts` feature, so their TCP connections
    /// send microsecond timestamps (Linux ≥ 6.7; iproute2 < 6.7 cannot set it).
    #[arg(long)]
    pub tcp_usec_ts: bool,
    /// Run the forwarding loop under SCHED_FIFO (tighter timing when the machine is loaded).
    #[arg(long)]
    pub realtime: bool,
    /// Drop this percentage of the packets arriving at the sender → receiver link, at random and
    /// independently (netem's `loss random`), before the queue; 0 to 50.
    #[arg(long, value_name = "PCT")]
    pub loss_pct: Option<f64>,
    /// Seed of --loss-pct's random stream (the same seed drops the same arrivals).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub loss_seed: u64,
    /// HULL's pacer on the sender's side (specs/dc.md §3.4): a token bucket whose rate follows
    /// what enters it, for the TCP flows whose ACKs echo ECN (each ECN-Echo associates its flow
    /// with probability p_a); the testbed's constants (Table 4.3) unless given below.
    #[arg(long, help_heading = "HULL pacer (--pacer)")]
    pub pacer: bool,
    /// The sending host's line rate, Mbit/s: the token rate's ceiling (default: --rate-mbps).
    #[arg(long, requires = "pacer", help_heading = "HULL pacer (--pacer)")]
    pub pacer_line_rate_mbps: Option<f64>,
    /// β, extra token rate per byte of backlog, 1/s (default 16).
    #[arg(long, requires = "pacer", help_heading = "HULL pacer (--pacer)")]
    pub pacer_beta_per_s: Option<f64>,
    /// p_a, the probability that an ECN-Echo associates its flow (default 0.125).
    #[arg(long, requires = "pacer", help_heading = "HULL pacer (--pacer)")]
    pub pacer_associate_probability: Option<f64>,
    /// The bucket's depth, bytes (default 3000).
    #[arg(long, requires = "pacer", help_heading = "HULL pacer (--pacer)")]
    pub pacer_depth_bytes: Option<u32>,
    /// Token refill period, µs (default 16).
    #[arg(long, requires = "pacer", help_heading = "HULL pacer (--pacer)")]
    pub pacer_tick_us: Option<f64>,
    /// Seed of the association draws.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = "HULL pacer (--pacer)")]
    pub pacer_seed: u64,
    /// A pacer per TCP flow, as if each flow ran on a host of its own (the testbed's static flows
    /// from distinct servers); default: one pacer for the sender, one host.
    #[arg(long, requires = "pacer", help_heading = "HULL pacer (--pacer)")]
    pub pacer_per_flow: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub link: LinkArgs,
    /// Write one CSV row per packet to this file.
    #[arg(long)]
    pub log_csv: Option<PathBuf>,
    /// Write the exit summary as JSON to this file.
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
    /// Stop by itself after this many seconds.
    #[arg(long)]
    pub duration_s: Option<f64>,
}
