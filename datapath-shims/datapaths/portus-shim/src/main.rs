//! `ccp-libccp-shim`: the eBPF kernel datapath as a libccp datapath, for unmodified CCP agents.
//!
//! Existing CCP users run portus-based agents against ccp-kernel, a module this kernel cannot
//! load. This shim loads `ccp-ebpf`'s congestion control with per-ACK records and runs the real
//! libccp 1.2 over them, one connection per flow, speaking libccp's standard unix-socket IPC to
//! the agent; libccp's windows and rates go into the control map. Attach, detach and the
//! in-kernel fallback are ccp-ebpf's own.
//!
//! It has to be its own process: libccp exports a C symbol named `log`, which captures libm's
//! `log()`, so any `f64::ln` call in a binary linking libccp crashes (tests/no_log_calls.rs
//! checks that this binary has none).
//!
//! Modules: [`cli`] (arguments), [`shim`] (the loop), [`flows`] (a flow and its connection),
//! [`primitives`] (records to libccp's primitives), [`ccp`] (libccp glue), [`inbound`] (checks
//! on the agent's messages), [`attach`] (attach/detach), [`table`] (libccp's connection table,
//! fixed). The socket to the agent, the primitives struct, libccp's error codes, log throttling
//! and the stop signals are `ccp-libccp-host`'s, shared with the test datapath.

mod attach;
mod cli;
mod flows;
mod primitives;
mod shim;

use std::process::ExitCode;

use clap::Parser;
use tracing::error;

use cli::{Cli, Command};

fn init_logging(filter: Option<&str>) {
    let filter = filter.map(str::to_string).or_else(|| std::env::var("CCP_LOG").ok()).unwrap_or_else(|| "info".to_string());
    let env = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("ccp-libccp-shim: invalid log filter {filter:?} ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(env).with_writer(std::io::stderr).with_ansi(ansi).init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level.as_deref());
    let result = match &cli.command {
        Command::Run(args) => shim::run(args),
        Command::Attach(args) => attach::attach(args),
        Command::Detach(args) => attach::detach(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
