//! `ccp-agent receiver enable|disable|status`: the Inigo receiver (`ccp-inigo-receiver`), tc
//! programs on one device of a network namespace that compute the relative forward delay of
//! arriving TCP segments and mark CE on late ones, or cap the window advertised in ACKs. It runs
//! in the kernel on its own: no agent process is needed once it is enabled.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ccp_inigo_receiver as rx;

#[derive(Debug, clap::Args)]
pub struct ReceiverArgs {
    #[command(subcommand)]
    pub command: ReceiverCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ReceiverCommand {
    /// Load and attach the receiver to a device (root). Run again to replace its settings.
    Enable(EnableArgs),
    /// Detach the receiver and remove everything `enable` pinned (root).
    Disable(TargetArgs),
    /// Settings, attachment and counters of the receiver on a device (root).
    Status(StatusArgs),
}

#[derive(Debug, clap::Args)]
pub struct TargetArgs {
    /// The network namespace: a name from `ip netns`, or a path such as /proc/PID/ns/net.
    #[arg(long, value_name = "NAME|PATH", value_parser = parse_netns)]
    pub netns: PathBuf,

    /// The device data segments arrive on (and ACKs leave by), in that namespace.
    #[arg(long, value_name = "IF")]
    pub dev: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// Set CE on late ECN-capable data segments before TCP sees them.
    Mark,
    /// Cap the advertised window of outgoing ACKs (alpha_RFD sub-window control).
    Window,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceArg {
    /// Local arrival times (the forward delay the thesis defines).
    Arrival,
    /// TSecr deltas, as the published kernel patch.
    Tsecr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SsExitArg {
    /// Halve the window cap on the first late segment (the published patch).
    Halve,
    /// Only stop growing exponentially (the older patch).
    Hold,
}

/// A setting that is on or off (`--tick-slack on`, `--cut-ssthresh off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOffArg {
    On,
    Off,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RttScaleArg {
    /// The kernel's receive-side RTT estimate in microseconds (tcpi_rcv_rtt).
    Actual,
    /// That estimate as the kernel stores it, x8, as the published patch read it: an 8x larger
    /// late threshold.
    X8,
}

#[derive(Debug, clap::Args)]
pub struct EnableArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// What to do about late segments.
    #[arg(long, value_enum, default_value_t = ModeArg::Mark)]
    pub mode: ModeArg,

    /// Late when the relative forward delay exceeds this percentage of the receiver's RTT_min.
    #[arg(long, value_name = "PCT", default_value_t = 17)]
    pub threshold_pct: u32,

    /// Where the receive-side delta of the RFD comes from.
    #[arg(long, value_enum, default_value_t = SourceArg::Arrival)]
    pub rfd_source: SourceArg,

    /// Window mode: update alpha and the window every FAIRNESS x MSS bytes (0: every window).
    #[arg(long, value_name = "MSS", default_value_t = 10)]
    pub fairness: u32,

    /// Marking mode: also clear CE on segments that are not late, as the published patch did
    /// (this erases real switch marks, hiding real congestion from the sender).
    #[arg(long)]
    pub clear_ce: bool,

    /// Let RTT_min creep up by 1 us per segment whose RTT sample exceeds it, as the patch did.
    #[arg(long)]
    pub rtt_min_creep: bool,

    /// How RTT_min, and so the late threshold, is scaled.
    #[arg(long, value_enum, default_value_t = RttScaleArg::Actual)]
    pub rtt_scale: RttScaleArg,

    /// Window mode: what the receiver's slow start does on its first late segment.
    #[arg(long, value_enum, default_value_t = SsExitArg::Halve)]
    pub ss_exit: SsExitArg,

    /// Microseconds per TSval tick for connections without microsecond timestamps (Linux: 1 ms).
    #[arg(long, value_name = "US", default_value_t = 1000)]
    pub ts_tick_us: u32,

    /// Add one TSval tick to the late threshold of connections without microsecond timestamps:
    /// their 1 ms ticks put up to 1 ms of one-sided noise into the RFD (off: late above the
    /// threshold alone, the spec's rule, which is late with no queue when the threshold is below a
    /// tick: RTT_min under ~6 ms at 17 %).
    #[arg(long, value_enum, default_value_t = OnOffArg::On)]
    pub tick_slack: OnOffArg,

    /// Window mode: an alpha cut also sets the receiver's ssthresh, as a DCTCP sender's cut does,
    /// so the receiver does not fall back into its slow start after every cut (ours; off: the
    /// patch's accounting).
    #[arg(long, value_enum, default_value_t = OnOffArg::Off)]
    pub cut_ssthresh: OnOffArg,

    /// Window mode: scale the window by REBASE/1024 when the RFD total would go negative (0: off).
    #[arg(long, value_name = "X", default_value_t = 0)]
    pub rebase: u32,

    /// Connections with receiver state at once (least recently used beyond); fixed until disable.
    #[arg(long, value_name = "N", default_value_t = rx::Capacity::default().max_conns)]
    pub max_conns: u32,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Also list up to N connections' state (RTT_min, threshold with any tick slack, TSval tick,
    /// RFD total, alpha, window cap).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub connections: usize,
}

/// A bare name is one of `ip netns`'s (as `ccp-agent attach --netns`).
fn parse_netns(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("empty namespace".into());
    }
    Ok(if s.contains('/') { PathBuf::from(s) } else { Path::new("/run/netns").join(s) })
}

impl TargetArgs {
    fn target(&self) -> rx::Target {
        rx::Target { netns: self.netns.clone(), dev: self.dev.clone() }
    }

    fn describe(&self) -> String {
        format!("{} in {}", self.dev, self.netns.display())
    }
}

impl EnableArgs {
    fn settings(&self) -> rx::Settings {
        rx::Settings {
            mode: match self.mode {
                ModeArg::Mark => rx::Mode::Mark,
                ModeArg::Window => rx::Mode::Window,
            },
            threshold_pct: self.threshold_pct,
            rfd_source: match self.rfd_source {
                SourceArg::Arrival => rx::RfdSource::Arrival,
                SourceArg::Tsecr => rx::RfdSource::Tsecr,
            },
            fairness: self.fairness,
            clear_ce: self.clear_ce,
            rtt_min_creep: self.rtt_min_creep,
            rtt_scale: match self.rtt_scale {
                RttScaleArg::Actual => rx::RttScale::Actual,
                RttScaleArg::X8 => rx::RttScale::X8,
            },
            ss_exit: match self.ss_exit {
                SsExitArg::Halve => rx::SsExit::Halve,
                SsExitArg::Hold => rx::SsExit::Hold,
            },
            ts_tick_us: self.ts_tick_us,
            tick_slack: self.tick_slack == OnOffArg::On,
            cut_ssthresh: self.cut_ssthresh == OnOffArg::On,
            rebase: self.rebase,
        }
    }
}

pub fn receiver(args: ReceiverArgs) -> anyhow::Result<()> {
    match args.command {
        ReceiverCommand::Enable(a) => enable(&a),
        ReceiverCommand::Disable(t) => disable(&t),
        ReceiverCommand::Status(s) => status(&s),
    }
}

fn enable(a: &EnableArgs) -> anyhow::Result<()> {
    let settings = a.settings();
    let where_ = a.target.describe();
    let r = rx::enable(&a.target.target(), &settings, rx::Capacity { max_conns: a.max_conns })
        .with_context(|| format!("enabling the Inigo receiver on {where_}"))?;
    match &r.outcome {
        rx::EnableOutcome::Created => println!("receiver enabled on {where_} (ifindex {}): {settings}", r.ifindex),
        rx::EnableOutcome::Unchanged => println!("receiver already enabled on {where_} with these settings: nothing changed"),
        rx::EnableOutcome::Replaced(changes) => println!(
            "receiver already enabled on {where_}: settings replaced ({}); connection state restarts",
            changes.join(", ")
        ),
        rx::EnableOutcome::ReplacedStale(why) => {
            println!("removed stale pins ({why})");
            println!("receiver enabled on {where_} (ifindex {}): {settings}", r.ifindex);
        }
    }
    println!(
        "pinned under {}; `ccp-agent receiver disable --netns {} --dev {}` removes it",
        r.pin_dir.display(),
        a.target.netns.display(),
        a.target.dev
    );
    Ok(())
}

fn disable(t: &TargetArgs) -> anyhow::Result<()> {
    let where_ = t.describe();
    let r = rx::disable(&t.target()).with_context(|| format!("disabling the Inigo receiver on {where_}"))?;
    if let Some(note) = &r.note {
        println!("{note}");
    }
    if r.not_enabled {
        println!("receiver not enabled on {where_}: nothing to do");
    } else {
        println!("receiver disabled on {where_}: links detached, {} pin(s) removed", r.removed.len());
    }
    Ok(())
}

fn status(s: &StatusArgs) -> anyhow::Result<()> {
    let where_ = s.target.describe();
    let st = rx::status(&s.target.target()).with_context(|| format!("reading the Inigo receiver on {where_}"))?;
    let conns = if s.connections > 0 { rx::connections(&s.target.target(), s.connections)? } else { Vec::new() };
    if s.json {
        let mut v = serde_json::to_value(&st)?;
        if s.connections > 0 {
            v["connection_state"] = serde_json::to_value(&conns)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let yes = |b: bool| if b { "attached" } else { "NOT attached" };
    println!("receiver on {where_} (ifindex {}), pinned under {}", st.ifindex, st.pin_dir.display());
    println!("settings: {}; max-conns {}", st.settings, st.capacity.max_conns);
    match st.egress_attached {
        Some(e) => println!("ingress {}, egress {}", yes(st.ingress_attached), yes(e)),
        None => println!("ingress {}", yes(st.ingress_attached)),
    }
    println!("connections with state: {}", st.connections);
    print!("{}", st.counters);
    for c in &conns {
        println!(
            "{} <- {}: RTT_min {} us, threshold {} us (tick {} us), RFD total {} us, late {}, alpha {}, window cap {}{}",
            c.local,
            c.remote,
            c.rtt_min_us,
            c.threshold_us,
            c.tick_us,
            c.rfd_total_us,
            c.late_segments,
            c.alpha,
            c.rcv_cwnd,
            if c.current { "" } else { " (older settings)" }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<ReceiverCommand, clap::Error> {
        let cli = Cli::try_parse_from(["ccp-agent", "receiver"].iter().chain(args))?;
        let Command::Receiver(r) = cli.command else { panic!("not receiver") };
        Ok(r.command)
    }

    #[test]
    fn enable_takes_the_settings_with_the_spec_defaults() {
        let ReceiverCommand::Enable(a) = parse(&["enable", "--netns", "rcv", "--dev", "veth0"]).unwrap() else {
            panic!("not enable")
        };
        assert_eq!(a.target.netns, PathBuf::from("/run/netns/rcv"));
        assert_eq!(a.settings(), rx::Settings::default());
        assert_eq!(a.max_conns, 16384);
        let ReceiverCommand::Enable(a) = parse(&[
            "enable",
            "--netns",
            "/proc/1/ns/net",
            "--dev",
            "eth0",
            "--mode",
            "window",
            "--threshold-pct",
            "20",
            "--rfd-source",
            "tsecr",
            "--fairness",
            "0",
            "--clear-ce",
            "--rtt-min-creep",
            "--rtt-scale",
            "x8",
            "--ss-exit",
            "hold",
            "--tick-slack",
            "off",
            "--cut-ssthresh",
            "on",
        ])
        .unwrap() else {
            panic!("not enable")
        };
        assert_eq!(a.target.netns, PathBuf::from("/proc/1/ns/net"));
        let s = a.settings();
        assert_eq!((s.mode, s.threshold_pct, s.rfd_source, s.fairness), (rx::Mode::Window, 20, rx::RfdSource::Tsecr, 0));
        assert!(s.clear_ce && s.rtt_min_creep && s.ss_exit == rx::SsExit::Hold);
        assert_eq!(s.rtt_scale, rx::RttScale::X8);
        assert!(!s.tick_slack && s.cut_ssthresh);
        assert!(parse(&["enable", "--netns", "rcv", "--dev", "eth0", "--tick-slack", "maybe"]).is_err());
    }

    #[test]
    fn every_command_needs_a_namespace_and_a_device() {
        assert!(parse(&["enable", "--dev", "eth0"]).is_err());
        assert!(parse(&["disable", "--netns", "rcv"]).is_err());
        assert!(parse(&["status", "--json", "--netns", "rcv", "--dev", "eth0"]).is_ok());
        assert!(parse(&["enable", "--netns", "rcv", "--dev", "eth0", "--mode", "drop"]).is_err());
        assert!(parse(&["enable", "--netns", "", "--dev", "eth0"]).is_err());
    }
}
