//! The sender: `--connections` connections of one endpoint, one stream each, for `--seconds` or
//! `--bytes` (shared among them), their congestion control the factory the tool passes (a CCP
//! algorithm in-process, the agent through libccp, or quinn's own). One JSON status line per
//! `--report-ms` over all connections, and a summary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The transfer: where, how much, how often to print.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The receiver's address and UDP port.
    #[arg(long)]
    pub dst: String,
    /// The receiver's certificate (DER), as `recv --cert-out` wrote it.
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// Local address and UDP port to send from.
    #[arg(long, default_value = "0.0.0.0:0")]
    pub local: String,
    /// Send for this long.
    #[arg(long, conflicts_with = "bytes")]
    pub seconds: Option<f64>,
    /// Send this many bytes.
    #[arg(long)]
    pub bytes: Option<u64>,
    /// Most stream data buffered or in flight without acknowledgement, bytes, over all
    /// connections (each gets its share, at least 64 KiB): above the path's BDP plus its buffer,
    /// and small enough that the streams end soon after `--seconds`.
    #[arg(long, default_value_t = 4 << 20)]
    pub send_window: u64,
    /// A status line every this many ms (0: none).
    #[arg(long, default_value_t = 1000)]
    pub report_ms: u64,
    /// Connections, each with one stream (the receiver needs `--streams` as many).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,
}

/// What the tool's congestion control adds to the sender's lines.
pub trait Steering {
    /// Who steers now, for the status line.
    fn steered_by(&self) -> String;
    /// Called once per loop pass with the time since the start (a tool's scheduled swaps).
    fn at(&self, _elapsed: Duration) -> anyhow::Result<()> {
        Ok(())
    }
    /// Adds the tool's own counters to the summary.
    fn summarise(&self, _summary: &mut serde_json::Value) {}
}

/// The sender: `name` says which congestion control ran; `factory` gives the connections'
/// controllers for the path (the bound local address and the receiver's). True when every
/// connection's stream was read to its end by the receiver.
pub async fn run(
    a: &Args,
    name: &str,
    factory: impl FnOnce(SocketAddr, SocketAddr) -> super::Factory,
    steering: &dyn Steering,
) -> anyhow::Result<bool> {
    let dst = super::parse_addr(&a.dst)?;
    let bind = super::parse_addr(&a.local)?;
    if a.seconds.is_none() && a.bytes.is_none() {
        bail!("say how much to send: --seconds S or --bytes N");
    }
    let mut endpoint = quinn::Endpoint::client(bind).with_context(|| format!("binding {bind}"))?;
    let local = endpoint.local_addr().with_context(|| format!("the address bound for {bind}"))?;
    let mut transport = super::transport();
    transport
        .send_window((a.send_window / u64::from(a.connections)).max(64 << 10))
        .congestion_controller_factory(factory(local, dst));
    let mut client = super::tls::client_config(&super::cert_path(&a.cert, "--cert")?)?;
    client.transport_config(Arc::new(transport));
    endpoint.set_default_client_config(client);
    let mut conns = Vec::new();
    for i in 0..a.connections {
        let conn = endpoint
            .connect(dst, super::tls::SERVER_NAME)
            .with_context(|| format!("connecting to {dst}"))?
            .await
            .with_context(|| format!("handshake {} with {dst}", i + 1))?;
        conns.push(conn);
    }

    let t0 = Instant::now();
    let deadline = a.seconds.map(|s| t0 + Duration::from_secs_f64(s.max(0.0)));
    let n = u64::from(a.connections);
    let mut writers = tokio::task::JoinSet::new();
    for (i, conn) in conns.iter().enumerate() {
        // The bytes are shared out: the first connections take the remainder.
        let share = a.bytes.map(|b| b / n + u64::from((i as u64) < b % n));
        writers.spawn(write(conn.clone(), deadline, share));
    }
    let (mut next_status, mut last) = (t0 + Duration::from_millis(a.report_ms), (t0, 0u64));
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let (mut written, mut complete, mut failed) = (0u64, 0u32, Vec::new());
    while !writers.is_empty() {
        tokio::select! {
            done = writers.join_next() => match done {
                Some(Ok(Ok((bytes, true)))) => { written += bytes; complete += 1; }
                Some(Ok(Ok((bytes, false)))) => { written += bytes; failed.push("the receiver did not confirm the stream within 60 s".to_string()); }
                Some(Ok(Err(e))) => failed.push(format!("{e:#}")),
                Some(Err(e)) => failed.push(format!("a writer task failed: {e}")),
                None => {}
            },
            _ = tick.tick() => {
                let now = Instant::now();
                steering.at(now - t0)?;
                if a.report_ms > 0 && now >= next_status {
                    let stats: Vec<quinn::ConnectionStats> = conns.iter().map(|c| c.stats()).collect();
                    let tx: u64 = stats.iter().map(|s| s.udp_tx.bytes).sum();
                    let mbps = (tx - last.1) as f64 * 8.0 / (now - last.0).as_secs_f64().max(1e-9) / 1e6;
                    last = (now, tx);
                    println!(
                        "{}",
                        serde_json::json!({
                            "event": "status",
                            "t_s": (now - t0).as_secs_f64(),
                            "algorithm": steering.steered_by(),
                            "send_mbps": mbps,
                            "cwnd_bytes": stats.iter().map(|s| s.path.cwnd).sum::<u64>(),
                            "rtt_ms": stats.iter().map(|s| s.path.rtt.as_secs_f64()).sum::<f64>() * 1e3 / stats.len() as f64,
                            "lost_packets": stats.iter().map(|s| s.path.lost_packets).sum::<u64>(),
                            "congestion_events": stats.iter().map(|s| s.path.congestion_events).sum::<u64>(),
                        })
                    );
                    next_status += Duration::from_millis(a.report_ms);
                }
            }
        }
    }
    let stats: Vec<quinn::ConnectionStats> = conns.iter().map(|c| c.stats()).collect();
    let ok = complete == a.connections;
    let mut summary = serde_json::json!({
        "event": "summary",
        "algorithm": name,
        "connections": a.connections,
        "complete": ok,
        "connections_complete": complete,
        "bytes": written,
        "seconds": t0.elapsed().as_secs_f64(),
        "datagrams": stats.iter().map(|s| s.udp_tx.datagrams).sum::<u64>(),
        "udp_tx_bytes": stats.iter().map(|s| s.udp_tx.bytes).sum::<u64>(),
        "lost_packets": stats.iter().map(|s| s.path.lost_packets).sum::<u64>(),
        "congestion_events": stats.iter().map(|s| s.path.congestion_events).sum::<u64>(),
        "cpu_s": cpu_seconds(),
    });
    steering.summarise(&mut summary);
    println!("{summary}");
    for f in failed.iter().take(5) {
        eprintln!("send: {f}");
    }
    endpoint.wait_idle().await;
    Ok(ok)
}

/// One connection's stream until `deadline` or `bytes`; then it waits (60 s at most) for the
/// receiver to close the connection, which it does once it has read the stream to its end. The
/// bytes written, and whether that happened.
async fn write(conn: quinn::Connection, deadline: Option<Instant>, bytes: Option<u64>) -> anyhow::Result<(u64, bool)> {
    let mut stream = conn.open_uni().await.context("opening a stream")?;
    let chunk = vec![0x5a_u8; 64 << 10];
    let mut written = 0u64;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) || bytes.is_some_and(|b| written >= b) {
            break;
        }
        let n = bytes.map_or(chunk.len() as u64, |b| (b - written).min(chunk.len() as u64)) as usize;
        stream.write_all(&chunk[..n]).await.context("writing the stream")?;
        written += n as u64;
    }
    stream.finish().context("finishing the stream")?;
    let closed = tokio::time::timeout(Duration::from_secs(60), conn.closed()).await;
    Ok((written, matches!(closed, Ok(quinn::ConnectionError::ApplicationClosed(_)))))
}

/// This process's CPU time so far, user and system, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}
