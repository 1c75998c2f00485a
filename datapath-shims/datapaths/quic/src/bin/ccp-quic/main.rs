//! `ccp-quic`: a QUIC bulk sender and receiver over quinn, the sender's congestion control a CCP
//! algorithm run in-process (`--cc ALG`) or quinn's own (`--native cubic|newreno|bbr`).
//!
//! ```sh
//! ccp-quic recv --listen 10.77.0.2:4433 --cert-out /tmp/ccp-quic.der &
//! ccp-quic send --dst 10.77.0.2:4433 --cert /tmp/ccp-quic.der --cc reno --seconds 10
//! ```
//!
//! The receiver prints one JSON line per stream (bytes, duration, goodput); the sender one line
//! per `--report-ms` (window, RTT, losses as quinn counts them) and a summary. Exit status 0 when
//! every transfer finished, 1 otherwise (the message says what and where).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use ccp_quic::{CcpFactory, CcpHandle};
use ccp_quic_core::bulk::{self, recv, send, Factory};
use clap::{Parser, Subcommand};
use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};

#[derive(Parser)]
#[command(name = "ccp-quic", version, about = "QUIC bulk transfer over quinn, steered by a CCP algorithm in-process")]
struct Cli {
    /// tracing filter (RUST_LOG syntax) for messages on stderr.
    #[arg(long, default_value = "warn", global = true)]
    log_level: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Accept connections and read every stream to its end.
    Recv(recv::Args),
    /// Open one connection and send one stream for `--seconds` or `--bytes`.
    Send(SendArgs),
}

#[derive(clap::Args)]
struct SendArgs {
    #[command(flatten)]
    transfer: send::Args,
    /// A registry algorithm (`reno`, `cubic`, `dctcp`, …, or `py:file.py:Class`), run in-process
    /// through the containment controller.
    #[arg(long, conflicts_with = "native")]
    cc: Option<String>,
    /// The algorithm's parameters, `key=value` (repeatable).
    #[arg(long = "param", requires = "cc")]
    params: Vec<String>,
    /// quinn's own controller instead: cubic, newreno or bbr.
    #[arg(long)]
    native: Option<String>,
    /// Swap every connection to another algorithm at a time: `SECS:ALG` (repeatable; `--cc` only).
    #[arg(long = "swap-at", requires = "cc")]
    swaps: Vec<String>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "python")]
    ccp_python::register();
    #[cfg(feature = "learned")]
    ccp_learned::register();
    bulk::block_on("ccp-quic", &cli.log_level, async move {
        match cli.cmd {
            Cmd::Recv(a) => recv::run(a).await,
            Cmd::Send(a) => run_send(a).await,
        }
    })
}

async fn run_send(a: SendArgs) -> anyhow::Result<bool> {
    let swaps = swaps(&a.swaps)?;
    match (&a.cc, &a.native) {
        (Some(alg), None) => {
            let f = CcpFactory::new(alg, params(&a.params)?).with_context(|| format!("--cc {alg}"))?;
            let steering = Embedded { handle: f.handle(), swaps: Mutex::new(swaps) };
            send::run(&a.transfer, alg, |_, _| Arc::new(f), &steering).await
        }
        (None, Some(n)) => {
            let factory = native(n)?;
            send::run(&a.transfer, &format!("native:{n}"), |_, _| factory, &Native(format!("native:{n}"))).await
        }
        (None, None) => bail!("say which congestion control: --cc ALG (a CCP algorithm) or --native cubic|newreno|bbr"),
        (Some(_), Some(_)) => unreachable!("clap refuses --cc with --native"),
    }
}

/// An algorithm in-process: the sender's lines name the algorithm each connection runs now, and
/// the summary the controllers' counters.
struct Embedded {
    handle: CcpHandle,
    /// Swaps still to come, in time order.
    swaps: Mutex<Vec<(Duration, String)>>,
}

impl send::Steering for Embedded {
    fn steered_by(&self) -> String {
        self.handle.algorithm().to_string()
    }

    fn at(&self, elapsed: Duration) -> anyhow::Result<()> {
        let mut swaps = self.swaps.lock().unwrap_or_else(|e| e.into_inner());
        while swaps.first().is_some_and(|(t, _)| elapsed >= *t) {
            let (_, alg) = swaps.remove(0);
            self.handle.swap(&alg, toml::Table::new()).with_context(|| format!("--swap-at {alg}"))?;
        }
        Ok(())
    }

    fn summarise(&self, summary: &mut serde_json::Value) {
        let c = self.handle.counters();
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        summary["final_algorithm"] = self.handle.algorithm().into();
        summary["reports"] = n(&c.reports).into();
        summary["faults"] = n(&c.faults).into();
        summary["fallbacks"] = n(&c.fallbacks).into();
        summary["swaps"] = n(&c.swaps).into();
    }
}

struct Native(String);

impl send::Steering for Native {
    fn steered_by(&self) -> String {
        self.0.clone()
    }
}

fn native(name: &str) -> anyhow::Result<Factory> {
    Ok(match name {
        "cubic" => Arc::new(CubicConfig::default()),
        "newreno" | "reno" => Arc::new(NewRenoConfig::default()),
        "bbr" => Arc::new(BbrConfig::default()),
        other => bail!("--native {other:?}: quinn has cubic, newreno and bbr"),
    })
}

/// `--param key=value` as a TOML table (values parse as TOML: numbers, booleans, strings).
fn params(pairs: &[String]) -> anyhow::Result<toml::Table> {
    let mut t = toml::Table::new();
    for p in pairs {
        let (k, v) = p.split_once('=').with_context(|| format!("--param {p:?}: expected key=value"))?;
        let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(v.to_string()));
        t.insert(k.trim().to_string(), value);
    }
    Ok(t)
}

/// `SECS:ALG` pairs, in time order.
fn swaps(specs: &[String]) -> anyhow::Result<Vec<(Duration, String)>> {
    let mut out = Vec::new();
    for s in specs {
        let (t, alg) = s.split_once(':').with_context(|| format!("--swap-at {s:?}: expected SECS:ALG"))?;
        let secs: f64 = t
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .with_context(|| format!("--swap-at {s:?}: {t:?} is not a time in seconds"))?;
        ccp_algorithms::registry::resolve(alg).with_context(|| format!("--swap-at {s:?}"))?;
        out.push((Duration::from_secs_f64(secs), alg.to_string()));
    }
    out.sort_by_key(|(t, _)| *t);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
