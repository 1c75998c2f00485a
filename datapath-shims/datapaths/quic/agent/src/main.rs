//! `ccp-quic-agent send`: the QUIC bulk sender in agent mode — its connection a flow of a running
//! `ccp-agent run --datapath unix` (or a portus agent), through libccp; quinn's own Cubic while
//! no agent steers. The receiver is `ccp-quic recv`.
//!
//! ```sh
//! ccp-agent run --datapath unix --algorithm reno &
//! ccp-quic recv --listen 10.77.0.2:4433 --cert-out /tmp/q.der &
//! ccp-quic-agent send --dst 10.77.0.2:4433 --cert /tmp/q.der --seconds 10
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ccp_libccp_host::args::AgentArgs;
use ccp_quic_agent::{Config, Counters, Fallback};
use ccp_quic_core::bulk::{self, send};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "ccp-quic-agent", version, about = "QUIC bulk sender steered by a CCP agent through libccp")]
struct Cli {
    /// tracing filter (RUST_LOG syntax) for messages on stderr.
    #[arg(long, default_value = "warn", global = true)]
    log_level: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Open one connection and send one stream for `--seconds` or `--bytes`.
    Send(SendArgs),
}

#[derive(clap::Args)]
struct SendArgs {
    #[command(flatten)]
    transfer: send::Args,
    #[command(flatten)]
    agent: AgentArgs,
    /// Our socket's name inside --ipc-dir.
    #[arg(long, default_value = "quic", value_name = "NAME")]
    ipc_name: String,
    /// quinn's controller while no agent steers.
    #[arg(long, value_enum, default_value_t = FallbackArg::Cubic)]
    fallback: FallbackArg,
    /// An agent that refuses every message this long hangs: connections go to the fallback.
    #[arg(long, default_value_t = 500)]
    silence_timeout_ms: u64,
    /// libccp connection slots: connections beyond them stay on the fallback until one frees.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    libccp_connections: u32,
}

#[derive(Clone, Copy, ValueEnum)]
enum FallbackArg {
    Cubic,
    Newreno,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    bulk::block_on("ccp-quic-agent", &cli.log_level, async move {
        let Cmd::Send(a) = cli.cmd;
        let cfg = Config {
            endpoints: a.agent.endpoints(&a.ipc_name),
            datapath_id: a.agent.datapath_id,
            cong_alg: a.agent.cong_alg.clone(),
            silence: Duration::from_millis(a.silence_timeout_ms),
            connections: a.libccp_connections as usize,
        };
        let (fallback, fallback_name) = match a.fallback {
            FallbackArg::Cubic => (Fallback::Cubic, "cubic"),
            FallbackArg::Newreno => (Fallback::NewReno, "newreno"),
        };
        let (factory, handle) = ccp_quic_agent::start(cfg, fallback).map_err(anyhow::Error::msg)?;
        let steering = Agent { counters: handle.counters, fallback: fallback_name };
        // One endpoint to one receiver: the agent is told the path (its rules by address and port
        // apply to these connections).
        send::run(&a.transfer, "agent", |local, remote| factory.for_path(local, remote), &steering).await
    })
}

struct Agent {
    counters: Arc<Counters>,
    fallback: &'static str,
}

impl send::Steering for Agent {
    fn steered_by(&self) -> String {
        let c = &self.counters;
        if c.steered_now.load(Ordering::Relaxed) > 0 {
            "agent".into()
        } else {
            format!("fallback:{}", self.fallback)
        }
    }

    fn summarise(&self, summary: &mut serde_json::Value) {
        let c = &self.counters;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        summary["frames_to_agent"] = n(&c.frames_to_agent).into();
        summary["frames_unsteered"] = n(&c.frames_unsteered).into();
        summary["dropped"] = n(&c.dropped).into();
        summary["from_agent"] = n(&c.from_agent).into();
        summary["rejected"] = n(&c.rejected).into();
        summary["invoke_errors"] = n(&c.invoke_errors).into();
        summary["agents_lost"] = n(&c.agents_lost).into();
        summary["table_full"] = n(&c.table_full).into();
        let mut lat = c.report_to_command_us.lock().unwrap_or_else(|e| e.into_inner()).clone();
        lat.sort_unstable();
        let pct = |q: usize| lat.get((lat.len() * q / 100).min(lat.len().saturating_sub(1))).copied();
        summary["report_to_command_us"] = serde_json::json!({ "samples": lat.len(), "p50": pct(50), "p99": pct(99) });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
