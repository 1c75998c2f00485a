//! `ccp-quic send`: one connection, one stream of `--seconds` or `--bytes`, its congestion
//! control a CCP algorithm in-process (`--cc`) or quinn's own (`--native`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccp_quic::{CcpFactory, CcpHandle};
use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};

#[derive(clap::Args)]
pub struct Args {
    /// The receiver's address and UDP port.
    #[arg(long)]
    dst: String,
    /// The receiver's certificate (DER), as `recv --cert-out` wrote it.
    #[arg(long)]
    cert: Option<PathBuf>,
    /// Local address to bind.
    #[arg(long, default_value = "0.0.0.0:0")]
    bind: String,
    /// A registry algorithm (`reno`, `cubic`, `dctcp`, …), run in-process through the
    /// containment controller.
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
    /// Send for this long.
    #[arg(long, conflicts_with = "bytes")]
    seconds: Option<f64>,
    /// Send this many bytes.
    #[arg(long)]
    bytes: Option<u64>,
    /// Most stream data buffered or in flight without acknowledgement, bytes: above the path's
    /// BDP plus its buffer, and small enough that the stream ends soon after `--seconds`.
    #[arg(long, default_value_t = 4 << 20)]
    send_window: u64,
    /// A status line every this many ms (0: none).
    #[arg(long, default_value_t = 1000)]
    report_ms: u64,
}

pub async fn run(a: Args) -> anyhow::Result<bool> {
    let dst = super::parse_addr(&a.dst)?;
    let bind = super::parse_addr(&a.bind)?;
    let (factory, handle, name): (super::Factory, Option<CcpHandle>, String) = match (&a.cc, &a.native) {
        (Some(alg), None) => {
            let f = CcpFactory::new(alg, super::params(&a.params)?).with_context(|| format!("--cc {alg}"))?;
            let h = f.handle();
            (Arc::new(f), Some(h), alg.clone())
        }
        (None, Some(n)) => (native(n)?, None, format!("native:{n}")),
        (None, None) => bail!("say which congestion control: --cc ALG (a CCP algorithm) or --native cubic|newreno|bbr"),
        (Some(_), Some(_)) => unreachable!("clap refuses --cc with --native"),
    };
    let swaps = swaps(&a.swaps)?;
    if a.seconds.is_none() && a.bytes.is_none() {
        bail!("say how much to send: --seconds S or --bytes N");
    }
    let mut transport = super::transport();
    transport.send_window(a.send_window).congestion_controller_factory(factory);
    let mut client = super::tls::client_config(&super::cert_path(&a.cert, "--cert")?)?;
    client.transport_config(Arc::new(transport));
    let mut endpoint = quinn::Endpoint::client(bind).with_context(|| format!("binding {bind}"))?;
    endpoint.set_default_client_config(client);
    let conn = endpoint
        .connect(dst, super::tls::SERVER_NAME)
        .with_context(|| format!("connecting to {dst}"))?
        .await
        .with_context(|| format!("handshake with {dst}"))?;
    let mut stream = conn.open_uni().await.context("opening a stream")?;

    let chunk = vec![0x5a_u8; 64 << 10];
    let t0 = Instant::now();
    let deadline = a.seconds.map(|s| t0 + Duration::from_secs_f64(s.max(0.0)));
    let (mut written, mut next_status, mut next_swap) = (0u64, t0 + Duration::from_millis(a.report_ms), 0usize);
    let mut last = (t0, 0u64);
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) || a.bytes.is_some_and(|b| written >= b) {
            break;
        }
        if let (Some(h), Some((at, alg))) = (&handle, swaps.get(next_swap)) {
            if now >= t0 + *at {
                h.swap(alg, toml::Table::new()).with_context(|| format!("--swap-at {alg}"))?;
                next_swap += 1;
            }
        }
        if a.report_ms > 0 && now >= next_status {
            let s = conn.stats();
            let mbps = (s.udp_tx.bytes - last.1) as f64 * 8.0 / (now - last.0).as_secs_f64().max(1e-9) / 1e6;
            last = (now, s.udp_tx.bytes);
            println!(
                "{}",
                serde_json::json!({
                    "event": "status",
                    "t_s": (now - t0).as_secs_f64(),
                    "algorithm": handle.as_ref().map_or(name.clone(), |h| h.algorithm().to_string()),
                    "send_mbps": mbps,
                    "cwnd_bytes": s.path.cwnd,
                    "rtt_ms": s.path.rtt.as_secs_f64() * 1e3,
                    "lost_packets": s.path.lost_packets,
                    "congestion_events": s.path.congestion_events,
                })
            );
            next_status += Duration::from_millis(a.report_ms);
        }
        let n = a.bytes.map_or(chunk.len() as u64, |b| (b - written).min(chunk.len() as u64)) as usize;
        stream.write_all(&chunk[..n]).await.context("writing the stream")?;
        written += n as u64;
    }
    stream.finish().context("finishing the stream")?;
    // The receiver closes the connection once it has read the stream to its end.
    let closed = tokio::time::timeout(Duration::from_secs(60), conn.closed()).await;
    let ok = matches!(closed, Ok(quinn::ConnectionError::ApplicationClosed(_)));
    let s = conn.stats();
    let mut summary = serde_json::json!({
        "event": "summary",
        "algorithm": name,
        "bytes": written,
        "seconds": t0.elapsed().as_secs_f64(),
        "datagrams": s.udp_tx.datagrams,
        "lost_packets": s.path.lost_packets,
        "congestion_events": s.path.congestion_events,
        "cpu_s": cpu_seconds(),
        "complete": ok,
    });
    if let Some(h) = &handle {
        let c = h.counters();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        summary["final_algorithm"] = h.algorithm().into();
        summary["reports"] = n(&c.reports).into();
        summary["faults"] = n(&c.faults).into();
        summary["fallbacks"] = n(&c.fallbacks).into();
        summary["swaps"] = n(&c.swaps).into();
    }
    println!("{summary}");
    if !ok {
        eprintln!("ccp-quic send: the receiver did not confirm the stream within 60 s ({closed:?})");
    }
    endpoint.wait_idle().await;
    Ok(ok)
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

fn native(name: &str) -> anyhow::Result<super::Factory> {
    Ok(match name {
        "cubic" => Arc::new(CubicConfig::default()),
        "newreno" | "reno" => Arc::new(NewRenoConfig::default()),
        "bbr" => Arc::new(BbrConfig::default()),
        other => bail!("--native {other:?}: quinn has cubic, newreno and bbr"),
    })
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
