//! The command line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ccp_ebpf::attach::Settings;
use ccp_ebpf::{Fallback, Knobs, ReportEvery};
use clap::{Parser, Subcommand};

use ccp_libccp_host::args::AgentArgs;
use ccp_libccp_host::ipc::Endpoints;

/// ccp-libccp-shim: this kernel's BPF congestion control, driven by an unmodified CCP agent
/// (portus, generic_cong_avoid, …) through the real libccp, as ccp-kernel would be.
///
/// `run` registers the congestion control with per-ACK records and speaks libccp's unix-socket
/// IPC to the agent; `attach` and `detach` move flows onto it and back.
#[derive(Debug, Parser)]
#[command(name = "ccp-libccp-shim", version, about, long_about = None)]
pub struct Cli {
    /// Log filter (error, warn, info, debug, trace, or a tracing directive). Overrides CCP_LOG.
    #[arg(long, global = true, value_name = "FILTER")]
    pub log_level: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the datapath (root): register the congestion control and serve the agent.
    Run(RunArgs),
    /// Switch flows to the congestion control (`run` must be running): existing flows, new
    /// flows of cgroups, namespace defaults.
    Attach(InstanceAttachArgs),
    /// Switch flows back to the congestion control they had, and remove what attach installed.
    /// Without selections: everything attach did.
    Detach(InstanceDetachArgs),
}

/// Which congestion control instance (the same for `run`, `attach` and `detach`).
#[derive(Debug, Clone, clap::Args)]
pub struct InstanceArgs {
    /// The congestion control's name, what flows select with TCP_CONGESTION (at most 15
    /// characters). `ccp` is what ccp-kernel registered; a ccp-agent on the eBPF datapath uses
    /// it too by default, and only one of them can hold a name at a time.
    #[arg(long, default_value = "ccp", value_name = "NAME")]
    pub name: String,

    /// Directory on a bpf filesystem for the maps a restarted shim re-adopts flows through.
    /// Default: /sys/fs/bpf/ccp-libccp-shim-NAME.
    #[arg(long, value_name = "DIR")]
    pub pin_dir: Option<PathBuf>,

    /// What attach changed, for detach and for a clean shutdown.
    /// Default: /run/ccp-libccp-shim/NAME.attach.json.
    #[arg(long, value_name = "FILE")]
    pub state_file: Option<PathBuf>,

    /// Where detach sends a flow whose previous congestion control is unknown or gone.
    #[arg(long, default_value = "cubic", value_name = "CC")]
    pub restore: String,
}

impl InstanceArgs {
    pub fn pin_dir(&self) -> PathBuf {
        self.pin_dir.clone().unwrap_or_else(|| PathBuf::from(format!("/sys/fs/bpf/ccp-libccp-shim-{}", self.name)))
    }

    pub fn attach_settings(&self) -> Settings {
        Settings {
            cc_name: self.name.clone(),
            pin_dir: self.pin_dir(),
            state_file: self
                .state_file
                .clone()
                .unwrap_or_else(|| Path::new("/run/ccp-libccp-shim").join(format!("{}.attach.json", self.name))),
            restore_cc: self.restore.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FallbackArg {
    Cubic,
    Reno,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub instance: InstanceArgs,

    #[command(flatten)]
    pub ipc: AgentArgs,

    /// This datapath's socket name inside --ipc-dir.
    #[arg(long, default_value = "ccp-ebpf", value_name = "NAME")]
    pub ipc_name: String,

    /// In-kernel algorithm for flows the agent does not steer (before its first command, while
    /// it is gone, beyond --max-connections).
    #[arg(long, value_enum, default_value_t = FallbackArg::Cubic)]
    pub fallback: FallbackArg,

    /// Flows fall back when this shim has been silent this long (it died), ms; and when the
    /// agent has not read a message for this long (it hangs with its socket open).
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub silence_timeout_ms: u64,

    /// ACK records wake the shim at most this often, µs; losses and timeouts always do. Each
    /// wakeup costs an interrupt (several µs on a VM), so this bounds that cost per second.
    /// The default matches --consume-interval-us, so under load the shim wakes about once per
    /// millisecond, not once per ACK; records wait at most that long (RTTs here are ≥ 10 ms).
    #[arg(long, default_value_t = 1000, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub wake_gap_us: u64,

    /// The shim drains the ring at least this often, µs: records that did not wake it wait at
    /// most this long.
    #[arg(long, default_value_t = 1000, value_name = "US", value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub consume_interval_us: u64,

    /// Ring buffer size, MiB (a power of two). Each ACK takes 88 bytes.
    #[arg(long, default_value_t = 16, value_name = "MIB", value_parser = parse_ring_mib)]
    pub ring_mib: u32,

    /// Most flows steered at once (control map slots). Flows beyond --max-connections stay on
    /// the fallback until a connection frees up.
    #[arg(long, default_value_t = 65_536, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    pub max_flows: u32,

    /// libccp connections (one per steered flow). The libccp crate hard-codes 1,024; the shim
    /// replaces its table. At most 65,535 (libccp's sids are 16-bit); each costs 216 bytes.
    #[arg(long, default_value_t = 16_384, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65_535))]
    pub max_connections: u32,
}

fn parse_ring_mib(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if !v.is_power_of_two() || v > 1024 {
        return Err("a power of two between 1 and 1024".into());
    }
    Ok(v)
}

impl RunArgs {
    pub fn endpoints(&self) -> Endpoints {
        self.ipc.endpoints(&self.ipc_name)
    }

    pub fn instance_config(&self) -> ccp_ebpf::Config {
        ccp_ebpf::Config {
            name: self.instance.name.clone(),
            pin_dir: self.instance.pin_dir(),
            ring_bytes: self.ring_mib << 20,
            max_flows: self.max_flows,
            knobs: Knobs {
                silence_timeout: Duration::from_millis(self.silence_timeout_ms),
                // Per-ACK records need no interval; TSO sizing is refreshed this often.
                default_report: ReportEvery::Micros(10_000),
                min_report_interval: Duration::from_millis(1),
                wake_gap: Duration::from_micros(self.wake_gap_us),
                fallback: match self.fallback {
                    FallbackArg::Cubic => Fallback::Cubic,
                    FallbackArg::Reno => Fallback::Reno,
                },
            },
        }
    }
}

/// `attach`: which instance, and the flags `ccp-agent attach` takes.
#[derive(Debug, Clone, clap::Args)]
pub struct InstanceAttachArgs {
    #[command(flatten)]
    pub instance: InstanceArgs,

    #[command(flatten)]
    pub selection: ccp_ebpf::attach::args::AttachArgs,
}

/// `detach`: which instance, and the flags `ccp-agent detach` takes.
#[derive(Debug, Clone, clap::Args)]
pub struct InstanceDetachArgs {
    #[command(flatten)]
    pub instance: InstanceArgs,

    #[command(flatten)]
    pub selection: ccp_ebpf::attach::args::DetachArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_libccp_host::ipc::Bind;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_follow_the_name_and_portus_conventions() {
        let cli = Cli::parse_from(["ccp-libccp-shim", "run", "--name", "ccpx"]);
        let Command::Run(r) = cli.command else { panic!("not run") };
        assert_eq!(r.instance.pin_dir(), PathBuf::from("/sys/fs/bpf/ccp-libccp-shim-ccpx"));
        assert_eq!(r.instance.attach_settings().state_file, PathBuf::from("/run/ccp-libccp-shim/ccpx.attach.json"));
        let ep = r.endpoints();
        assert_eq!((ep.dir, ep.agent.as_str(), ep.bind), (PathBuf::from("/tmp/ccp"), "portus", Bind::Relative));
        let cfg = r.instance_config();
        assert_eq!((cfg.ring_bytes, cfg.max_flows), (16 << 20, 65_536));
        assert_eq!(cfg.knobs.wake_gap, Duration::from_micros(1000));
        assert_eq!(r.max_connections, 16_384);
    }

    #[test]
    fn bad_values_are_refused() {
        for args in [
            &["ccp-libccp-shim", "run", "--ring-mib", "3"][..],
            &["ccp-libccp-shim", "run", "--consume-interval-us", "10"],
            &["ccp-libccp-shim", "run", "--cong-alg", ""],
            &["ccp-libccp-shim", "run", "--max-connections", "65536"],
            &["ccp-libccp-shim", "attach", "--addr", "10.0.0.0/40"],
            &["ccp-libccp-shim", "attach", "--netns", ""],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
        let cli = Cli::parse_from(["ccp-libccp-shim", "attach", "--port", "5201", "--netns", "lab-snd", "--name", "ccpy"]);
        let Command::Attach(a) = cli.command else { panic!("not attach") };
        assert_eq!(a.selection.select.netns, vec![PathBuf::from("/run/netns/lab-snd")]);
        assert!(a.selection.select.filter().is_some());
        assert_eq!(a.instance.attach_settings().cc_name, "ccpy");
    }
}
