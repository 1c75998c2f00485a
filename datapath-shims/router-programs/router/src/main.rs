//! `ccp-router`: see `ccp-router --help` and datapath-shims/router-programs/router/README.md.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;

use clap::Parser;

use ccp_router::cli::{Cli, Command, RunArgs};
use ccp_router::{cleanup_prefix, Error, Result, Router, Topology, Trace};

/// Exit status for bad input (options, trace files), as clap uses for usage errors.
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run(args) => run(args),
        Command::Demo(args) => ccp_router::demo::run(args),
        Command::Cleanup { netns_prefix } => cleanup_prefix(netns_prefix).map(|r| {
            if r.namespaces_deleted.is_empty() {
                eprintln!("ccp-router: nothing to clean up for prefix {netns_prefix}");
            } else {
                eprintln!("ccp-router: deleted {}", r.namespaces_deleted.join(", "));
            }
        }),
        Command::CheckTrace { file } => Trace::load(file).map(|t| {
            println!(
                "{}: {} opportunities per {} ms period, mean {:.3} Mbit/s",
                file.display(),
                t.opportunities_per_period(),
                t.period_ms(),
                t.mean_rate_bps() / 1e6
            );
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-router: error: {e}");
            match e {
                Error::Param { .. } | Error::Trace { .. } => ExitCode::from(EXIT_BAD_INPUT),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// Blocks SIGINT and SIGTERM and returns a signalfd that becomes readable when one arrives, so the
/// event loop sees them as an ordinary event and can tear down cleanly.
fn termination_signals() -> Result<OwnedFd> {
    // SAFETY: sigset manipulation on a local set; signalfd returns a fresh descriptor.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(Error::last_os("blocking SIGINT/SIGTERM"));
        }
        let fd: RawFd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(Error::last_os("signalfd"));
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

fn run(args: &RunArgs) -> Result<()> {
    // Validate everything (options, trace files) before touching the system.
    let (topo_cfg, router_cfg) = args.configs()?;
    let signals = termination_signals()?;
    let topology = Topology::create(topo_cfg)?;
    let mut router = Router::new(&topology, router_cfg)?;
    let c = topology.config();
    // Written by hand to keep the documented key order (serde_json sorts keys).
    let ready = format!(
        "{{\"event\":\"ready\",\"sender_ns\":{},\"receiver_ns\":{},\"sender_addr\":\"{}\",\"receiver_addr\":\"{}\"}}",
        serde_json::Value::from(topology.sender_ns()),
        serde_json::Value::from(topology.receiver_ns()),
        c.sender_addr,
        c.receiver_addr
    );
    {
        let mut out = std::io::stdout().lock();
        // A closed stdout must not stop the router: the line is for whoever is listening.
        let _ = writeln!(out, "{ready}");
        let _ = out.flush();
    }
    let summary = router.run(std::os::fd::AsRawFd::as_raw_fd(&signals))?;
    drop(router);
    drop(topology);
    eprint!("{}", summary.to_text());
    if let Some(path) = &args.summary_json {
        let json = serde_json::to_string_pretty(&summary).map_err(|e| Error::Topology(e.to_string()))?;
        std::fs::write(path, json + "\n").map_err(|e| Error::io(format!("--summary-json {}", path.display()), e))?;
    }
    Ok(())
}
