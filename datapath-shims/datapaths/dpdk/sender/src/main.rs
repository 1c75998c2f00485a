//! `ccp-dpdk`: the DPDK datapath of ccp-agent.
//!
//! - `send`: a user-space TCP sender on a DPDK port (`ccp-user-tcp` for the protocol, `port` for
//!   the device) talking to unmodified kernel TCP receivers. Congestion control is a CCP
//!   agent's, through the real libccp over its unix-socket IPC, so ccp-agent
//!   (`ccp-agent run --datapath unix`) and portus agents both drive it; while no agent steers a
//!   connection, an in-process Reno or Cubic does.
//! - `sink`: a plain kernel TCP receiver that checks the stream.
//!
//! This binary links libccp, which exports a C symbol `log` that captures libm's `log()`:
//! nothing here may call `f64::ln` (tests/no_log_calls.rs checks the binary).

mod cli;
mod datapath;
mod flows;
mod neigh;
mod output;
mod port;
mod sink;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CCP_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match &cli.cmd {
        cli::Cmd::Send(args) => datapath::run(args),
        cli::Cmd::Sink(args) => sink::run(args).map(|()| true),
    };
    match result {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("ccp-dpdk: {e:#}");
            std::process::exit(1);
        }
    }
}
