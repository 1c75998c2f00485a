//! The receiver: accepts connections and reads every unidirectional stream to its end, one JSON
//! line per stream (bytes, duration, goodput), and with `--progress-ms` the bytes read so far
//! over all streams (what ccp-lab samples a QUIC flow's throughput from).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// Address and UDP port to listen on.
    #[arg(long)]
    listen: String,
    /// Where to write the receiver's certificate (DER) for senders to trust.
    #[arg(long)]
    cert_out: Option<PathBuf>,
    /// Stop after this many streams (0: run until interrupted).
    #[arg(long, default_value_t = 0)]
    streams: u64,
    /// A `progress` line (bytes read so far, all streams) every this many ms (0: none).
    #[arg(long, default_value_t = 0)]
    progress_ms: u64,
}

pub async fn run(a: Args) -> anyhow::Result<bool> {
    let addr = super::parse_addr(&a.listen)?;
    let mut server = super::tls::server_config(&super::cert_path(&a.cert_out, "--cert-out")?)?;
    server.transport_config(Arc::new(super::transport()));
    let endpoint = quinn::Endpoint::server(server, addr).with_context(|| format!("listening on {addr}"))?;
    println!("{}", serde_json::json!({ "event": "listening", "addr": endpoint.local_addr()?.to_string() }));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let mut done = 0u64;
    let read = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    // An interval of zero would spin: without --progress-ms the tick is far off and ignored.
    let period = if a.progress_ms > 0 { Duration::from_millis(a.progress_ms) } else { Duration::from_secs(3600) };
    let mut progress = tokio::time::interval(period);
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                let (tx, read) = (tx.clone(), read.clone());
                tokio::spawn(async move {
                    match connection(incoming, &read).await {
                        Ok(n) => for _ in 0..n { let _ = tx.send(true); },
                        Err(e) => {
                            eprintln!("ccp-quic recv: {e:#}");
                            let _ = tx.send(false);
                        }
                    }
                });
            }
            Some(_) = rx.recv() => {
                done += 1;
                if a.streams > 0 && done >= a.streams {
                    break;
                }
            }
            _ = progress.tick(), if a.progress_ms > 0 => {
                let bytes = read.load(Ordering::Relaxed);
                println!("{}", serde_json::json!({ "event": "progress", "t_s": t0.elapsed().as_secs_f64(), "bytes": bytes }));
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    endpoint.close(0u32.into(), b"bye");
    endpoint.wait_idle().await;
    Ok(true)
}

/// Reads every stream of one connection; the number of streams it read to the end.
async fn connection(incoming: quinn::Incoming, read: &AtomicU64) -> anyhow::Result<u64> {
    let conn = incoming.await.context("handshake")?;
    let peer = conn.remote_address();
    let mut streams = 0;
    loop {
        let mut stream = match conn.accept_uni().await {
            Ok(s) => s,
            Err(quinn::ConnectionError::ApplicationClosed(_)) | Err(quinn::ConnectionError::LocallyClosed) => break,
            Err(e) => return Err(e).with_context(|| format!("connection from {peer}")),
        };
        let mut buf = vec![0u8; 256 << 10];
        let (mut bytes, mut first, mut last, mut max_gap) = (0u64, None, Instant::now(), Duration::ZERO);
        while let Some(n) = stream.read(&mut buf).await.with_context(|| format!("stream from {peer}"))? {
            let now = Instant::now();
            if first.is_some() {
                // The longest the stream delivered nothing, once it had started.
                max_gap = max_gap.max(now - last);
            }
            first.get_or_insert(now);
            last = now;
            bytes += n as u64;
            read.fetch_add(n as u64, Ordering::Relaxed);
        }
        let secs = first.map_or(Duration::ZERO, |f| last - f).as_secs_f64();
        println!(
            "{}",
            serde_json::json!({
                "event": "stream",
                "peer": peer.to_string(),
                "bytes": bytes,
                "duration_s": secs,
                "max_gap_ms": max_gap.as_secs_f64() * 1e3,
                "goodput_mbps": if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 },
            })
        );
        streams += 1;
        // One stream per connection from `ccp-quic send`: closing says it all arrived.
        conn.close(0u32.into(), b"done");
    }
    Ok(streams)
}
