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

mod recv;
mod send;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ccp-quic", version, about = "QUIC bulk transfer over quinn, steered by a CCP algorithm")]
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
    Send(send::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "python")]
    ccp_python::register();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&cli.log_level))
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ccp-quic: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.cmd {
            Cmd::Recv(a) => recv::run(a).await,
            Cmd::Send(a) => send::run(a).await,
        }
    });
    match result {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ccp-quic: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Flow-control windows large enough that a bulk transfer is never limited by them on the links
/// ccp-router emulates (a 200 Mbit/s × 300 ms path holds 7.5 MB).
fn transport() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(16 << 20))
        .receive_window(quinn::VarInt::from_u32(32 << 20))
        .send_window(32 << 20)
        .max_idle_timeout(Some(quinn::IdleTimeout::try_from(Duration::from_secs(30)).expect("30 s is a valid idle timeout")));
    t
}

fn parse_addr(s: &str) -> anyhow::Result<SocketAddr> {
    s.parse().with_context(|| format!("{s:?} is not an address:port"))
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

fn cert_path(p: &Option<PathBuf>, flag: &str) -> anyhow::Result<PathBuf> {
    p.clone().with_context(|| format!("{flag} is required"))
}

type Factory = Arc<dyn quinn::congestion::ControllerFactory + Send + Sync + 'static>;
