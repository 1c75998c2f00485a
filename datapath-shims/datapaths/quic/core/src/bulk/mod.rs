//! The bulk transfer the QUIC tools run: `recv` reads every stream to its end, `send` writes one
//! stream for a time or a size, its congestion control whatever factory the tool gives it.

pub mod recv;
pub mod send;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

/// A connection's congestion controllers, as quinn takes them.
pub type Factory = Arc<dyn quinn::congestion::ControllerFactory + Send + Sync + 'static>;

/// Flow-control windows large enough that a bulk transfer is never limited by them on the links
/// ccp-router emulates (a 200 Mbit/s × 300 ms path holds 7.5 MB).
pub fn transport() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(16 << 20))
        .receive_window(quinn::VarInt::from_u32(32 << 20))
        .send_window(32 << 20)
        .max_idle_timeout(Some(quinn::IdleTimeout::try_from(Duration::from_secs(30)).expect("30 s is a valid idle timeout")));
    t
}

pub fn parse_addr(s: &str) -> anyhow::Result<SocketAddr> {
    s.parse().with_context(|| format!("{s:?} is not an address:port"))
}

fn cert_path(p: &Option<PathBuf>, flag: &str) -> anyhow::Result<PathBuf> {
    p.clone().with_context(|| format!("{flag} is required"))
}

/// Runs a tool's future on a single-threaded runtime: exit status 0 when it returned true, 1
/// when false or on an error (printed with `tool`'s name).
pub fn block_on(
    tool: &str,
    log_level: &str,
    f: impl std::future::Future<Output = anyhow::Result<bool>>,
) -> std::process::ExitCode {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(log_level)).with_writer(std::io::stderr).init();
    let result = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => Err(anyhow::anyhow!("cannot start the runtime: {e}")),
    };
    match result {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{tool}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
