//! `ccp-router demo`: the newcomer's first run. It builds the emulated path (namespaces, router,
//! trace or fixed rate), runs one kernel bulk TCP flow across it with a chosen congestion control,
//! prints throughput, RTT and cwnd once per second, and writes a PNG plot at the end.
//!
//! To run the flow under ccp-agent, start the agent with `--spawn` (it is run as
//! `sh -c "exec CMD"` before the flow and stopped by pid afterwards) and pass the congestion
//! control name the agent's datapath registers with `--cc`.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use clap::Args;
use plotters::style::RGBColor;

use crate::cli::LinkArgs;
use crate::clock;
use crate::emulator::Emulator;
use crate::error::{Error, Result};
use crate::netns;
use crate::plot::{self, Panel, Series};
use crate::tcp::{BulkReceiver, BulkSender, TcpSample};
use crate::topology::Side;

/// How often the flow is sampled for the plot.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Samples per printed line (one per second).
const SAMPLES_PER_LINE: usize = 10;

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub link: LinkArgs,
    /// Congestion control of the bulk flow (any name in tcp_available_congestion_control, e.g. the
    /// eBPF datapath's struct_ops CC).
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// How long the flow runs, seconds.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// TCP port of the flow.
    #[arg(long, default_value_t = 5201)]
    pub port: u16,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "ccp-router-demo.png")]
    pub plot: PathBuf,
    /// Also write the 100 ms samples as CSV.
    #[arg(long)]
    pub samples_csv: Option<PathBuf>,
    /// Negotiate ECN on the flow (sets net.ipv4.tcp_ecn=1 in both namespaces): needed for the
    /// marking disciplines to have an effect on kernel TCP.
    #[arg(long)]
    pub ecn: bool,
    /// A command to run during the demo (e.g. `ccp-agent run …`), started before the flow and
    /// stopped with SIGTERM by pid at the end.
    #[arg(long)]
    pub spawn: Option<String>,
    /// Seconds to wait after --spawn before starting the flow.
    #[arg(long, default_value_t = 1.0)]
    pub spawn_wait_s: f64,
}

/// One 100 ms sample.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t: f64,
    goodput_mbps: f64,
    capacity_mbps: Option<f64>,
    tcp: TcpSample,
}

/// A child process stopped by pid when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(args: &DemoArgs) -> Result<()> {
    if args.seconds == 0 {
        return Err(Error::param("--seconds", "must be ≥ 1"));
    }
    let topo_cfg = args.link.topology_config()?;
    let router_cfg = args.link.router_config()?;
    let down_shape = router_cfg.down.shape.clone();
    let link_desc = router_cfg.down.describe_link();
    let emu = Emulator::start(topo_cfg, router_cfg)?;
    let topo = emu.topology();
    if args.ecn {
        for side in [Side::Sender, Side::Receiver] {
            topo.run_in(side, || netns::write_sysctl("/proc/sys/net/ipv4/tcp_ecn", "1"))??;
        }
    }
    let _spawned = match &args.spawn {
        Some(cmd) => {
            let child = Command::new("sh")
                .arg("-c")
                .arg(format!("exec {cmd}"))
                .spawn()
                .map_err(|e| Error::io(format!("--spawn {cmd:?}"), e))?;
            std::thread::sleep(Duration::from_secs_f64(args.spawn_wait_s.clamp(0.0, 60.0)));
            Some(Spawned(child))
        }
        None => None,
    };
    let receiver = BulkReceiver::listen(topo, args.port)?;
    let sender = BulkSender::connect(topo, args.port, Some(&args.cc))?;
    println!("demo: {} over {link_desc}, {} s; namespaces {} → {}", args.cc, args.seconds, topo.sender_ns(), topo.receiver_ns());
    println!("{:>5}  {:>16}  {:>16}  {:>10}  {:>10}", "t (s)", "goodput Mbit/s", "capacity Mbit/s", "RTT ms", "cwnd pkts");

    let start = Instant::now();
    let mono_start = clock::now().saturating_sub(emu.start_time());
    let mut samples: Vec<Sample> = Vec::new();
    let (mut last_bytes, mut last_t) = (0u64, 0.0f64);
    let total = args.seconds as usize * SAMPLES_PER_LINE;
    for i in 1..=total {
        let due = start + SAMPLE_INTERVAL * i as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let t = start.elapsed().as_secs_f64();
        let bytes = receiver.bytes();
        let tcp = sender.info().map_err(|e| Error::io("TCP_INFO", e))?;
        let cap = |at: f64| down_shape.capacity_bytes(mono_start + (at * 1e9) as u64);
        let capacity_mbps = match (cap(last_t), cap(t)) {
            (Some(a), Some(b)) => Some((b - a) * 8.0 / (t - last_t) / 1e6),
            _ => None,
        };
        samples.push(Sample { t, goodput_mbps: (bytes - last_bytes) as f64 * 8.0 / (t - last_t) / 1e6, capacity_mbps, tcp });
        last_bytes = bytes;
        last_t = t;
        if i % SAMPLES_PER_LINE == 0 {
            let window = &samples[samples.len() - SAMPLES_PER_LINE..];
            let mean = |f: &dyn Fn(&Sample) -> f64| window.iter().map(f).sum::<f64>() / window.len() as f64;
            let capacity = window.iter().all(|s| s.capacity_mbps.is_some()).then(|| mean(&|s| s.capacity_mbps.unwrap_or(0.0)));
            println!(
                "{:>5.0}  {:>16.3}  {:>16}  {:>10.1}  {:>10}",
                t,
                mean(&|s| s.goodput_mbps),
                capacity.map_or_else(|| "unlimited".into(), |c| format!("{c:.3}")),
                f64::from(tcp.rtt_us) / 1000.0,
                tcp.cwnd_pkts
            );
        }
    }
    drop(sender);
    drop(receiver);
    let summary = emu.stop()?;
    eprint!("{}", summary.to_text());

    if let Some(path) = &args.samples_csv {
        let mut text = String::from("t_s,goodput_mbps,capacity_mbps,rtt_ms,min_rtt_ms,cwnd_pkts,delivered_ce,total_retrans\n");
        for s in &samples {
            text += &format!(
                "{:.3},{:.4},{},{:.3},{:.3},{},{},{}\n",
                s.t,
                s.goodput_mbps,
                s.capacity_mbps.map_or_else(String::new, |c| format!("{c:.4}")),
                f64::from(s.tcp.rtt_us) / 1000.0,
                f64::from(s.tcp.min_rtt_us) / 1000.0,
                s.tcp.cwnd_pkts,
                s.tcp.delivered_ce,
                s.tcp.total_retrans
            );
        }
        std::fs::write(path, text).map_err(|e| Error::io(format!("--samples-csv {}", path.display()), e))?;
    }
    plot_samples(args, &link_desc, &samples)?;
    println!("demo: plot written to {}", args.plot.display());
    Ok(())
}

/// A 5-sample (500 ms) moving average, so 100 ms goodput samples read as a rate.
fn smooth(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    const WIDTH: usize = 5;
    (0..points.len())
        .map(|i| {
            let lo = i.saturating_sub(WIDTH - 1);
            let w = &points[lo..=i];
            (points[i].0, w.iter().map(|p| p.1).sum::<f64>() / w.len() as f64)
        })
        .collect()
}

fn plot_samples(args: &DemoArgs, link_desc: &str, samples: &[Sample]) -> Result<()> {
    let goodput = smooth(&samples.iter().map(|s| (s.t, s.goodput_mbps)).collect::<Vec<_>>());
    let capacity = smooth(&samples.iter().filter_map(|s| s.capacity_mbps.map(|c| (s.t, c))).collect::<Vec<_>>());
    let rtt: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, f64::from(s.tcp.rtt_us) / 1000.0)).collect();
    let cwnd: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, f64::from(s.tcp.cwnd_pkts))).collect();
    let blue = RGBColor(31, 119, 180);
    let grey = RGBColor(150, 150, 150);
    let mut rate = vec![Series { label: "goodput", points: &goodput, color: blue }];
    if !capacity.is_empty() {
        rate.push(Series { label: "link capacity", points: &capacity, color: grey });
    }
    plot::stacked(
        &args.plot,
        &format!("{} over {link_desc}", args.cc),
        &[
            Panel { y_label: "Mbit/s", series: rate },
            Panel {
                y_label: "RTT (ms)",
                series: vec![Series { label: "smoothed RTT", points: &rtt, color: RGBColor(214, 39, 40) }],
            },
            Panel {
                y_label: "cwnd (packets)",
                series: vec![Series { label: "cwnd", points: &cwnd, color: RGBColor(44, 160, 44) }],
            },
        ],
    )
}
