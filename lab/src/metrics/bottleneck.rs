//! The bottleneck from the router's per-packet log: utilisation, queueing delay, drops and CE
//! marks over the window and per time bin, and the queue sampled on a grid (also split by the
//! packets' propagation delay class).

use std::io::BufRead;

use serde::Serialize;

pub use ccp_router::percentiles::Percentiles;

use super::{Window, NS_PER_S};
use crate::link::Link;

/// What the bottleneck did over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkMetrics {
    pub utilisation: f64,
    pub capacity_mbps: f64,
    pub delivered_mbps: f64,
    pub queue_delay_ms: Option<Percentiles>,
    pub packets_delivered: u64,
    pub dropped_buffer: u64,
    pub dropped_aqm: u64,
    /// Packets whose ECN field the router set to CE.
    pub marked_ce: u64,
}

/// One time bin of the bottleneck.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkBin {
    pub t_s: f64,
    pub capacity_mbps: f64,
    pub delivered_mbps: f64,
    pub qdelay_mean_ms: Option<f64>,
    pub qdelay_p95_ms: Option<f64>,
    pub qdelay_max_ms: Option<f64>,
    pub drops: u64,
    pub marks: u64,
}

/// A malformed router log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("router log line {line}: {message}")]
pub struct LogError {
    pub line: usize,
    pub message: String,
}

/// Column positions, found by name so the log may gain columns.
struct Columns {
    dir: usize,
    len: usize,
    arrival: usize,
    dequeue: usize,
    finish: usize,
    ecn_in: usize,
    ecn_out: usize,
    outcome: usize,
}

impl Columns {
    fn from_header(h: &str) -> Result<Columns, LogError> {
        let names: Vec<&str> = h.trim().split(',').collect();
        let col = |n: &str| {
            names
                .iter()
                .position(|c| *c == n)
                .ok_or_else(|| LogError { line: 1, message: format!("no column {n:?} in the header") })
        };
        Ok(Columns {
            dir: col("dir")?,
            len: col("len")?,
            arrival: col("arrival_ns")?,
            dequeue: col("dequeue_ns")?,
            finish: col("finish_ns")?,
            ecn_in: col("ecn_in")?,
            ecn_out: col("ecn_out")?,
            outcome: col("outcome")?,
        })
    }
}

/// Instants at which the bottleneck's queue is sampled: `start_ns + k·step_ns` before `end_ns`
/// (ns since the emulator started), as the thesis sampled `tc -s` backlog every 10 ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueGrid {
    pub start_ns: u64,
    pub end_ns: u64,
    pub step_ns: u64,
}

impl QueueGrid {
    fn len(&self) -> usize {
        (self.end_ns.saturating_sub(self.start_ns)).div_ceil(self.step_ns.max(1)) as usize
    }

    /// The first grid index at or after `t`.
    fn index_at_or_after(&self, t: u64) -> usize {
        ((t.saturating_sub(self.start_ns)).div_ceil(self.step_ns.max(1)) as usize).min(self.len())
    }

    /// Counts a packet in the queue at the grid instants of [arrival, dequeue) (`diff` holds
    /// +1 where a stay starts covering instants and −1 where it stops).
    fn add_stay(&self, diff: &mut [i64], arrival: u64, dequeue: u64) {
        let (k0, k1) = (self.index_at_or_after(arrival), self.index_at_or_after(dequeue));
        if k0 < k1 {
            diff[k0] += 1;
            diff[k1] -= 1;
        }
    }
}

/// Reads the data direction ("down") of a router log and computes the window's metrics and the
/// per-bin series. Bytes leaving the link count by their finish time; delays by arrival time.
/// Also samples the queue on `grid`: the packets waiting at an instant t are those with
/// arrival ≤ t < dequeue (start of transmission; the packet on the wire is not queued, as in a
/// qdisc's backlog), dropped packets never.
pub fn link_metrics(
    log: impl BufRead,
    link: &Link,
    w: Window,
    grid: QueueGrid,
) -> Result<(LinkMetrics, Vec<LinkBin>, Vec<u32>), LogError> {
    link_series(log, link, w, grid, &[]).map(|(m, bins, s)| (m, bins, s.queue))
}

/// The bottleneck on the queue grid, besides [`link_metrics`]'s results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSeries {
    /// Packets queued at each grid instant.
    pub queue: Vec<u32>,
    /// Packets dropped (buffer, AQM, write) that arrived in each grid step [t_k, t_k + step).
    pub drops: Vec<u32>,
    /// `queue` split by the packets' propagation delay class: `queue_by_delay[c][k]` counts the
    /// queued packets whose delay (release − finish) is nearest `delays_ns[c]` — with per-class
    /// delays (`network.class_delays`), which flow class holds the queue.
    pub queue_by_delay: Vec<Vec<u32>>,
}

/// [`link_metrics`] with the queue also split by propagation delay (`delays_ns`: the one-way
/// data-direction delays of the run's classes; empty: no split) and the drops on the grid.
pub fn link_series(
    log: impl BufRead,
    link: &Link,
    w: Window,
    grid: QueueGrid,
    delays_ns: &[u64],
) -> Result<(LinkMetrics, Vec<LinkBin>, LinkSeries), LogError> {
    let mut class_diff: Vec<Vec<i64>> = vec![vec![0i64; grid.len() + 1]; delays_ns.len()];
    let mut drops_grid = vec![0u32; grid.len()];
    let nearest = |d: u64| (0..delays_ns.len()).min_by_key(|&c| delays_ns[c].abs_diff(d));
    let mut lines = log.lines();
    let header = match lines.next() {
        Some(Ok(h)) => h,
        _ => return Err(LogError { line: 1, message: "empty log".into() }),
    };
    let c = Columns::from_header(&header)?;
    let release_col = header.trim().split(',').position(|n| n == "release_ns");
    let nbins = w.bins();
    let mut bin_bytes = vec![0u64; nbins];
    let mut bin_delays: Vec<Vec<u64>> = vec![Vec::new(); nbins];
    let mut bin_drops = vec![0u64; nbins];
    let mut bin_marks = vec![0u64; nbins];
    let mut delays = Vec::new();
    // +1 where a packet's stay starts covering grid instants, −1 where it stops.
    let mut queue_diff = vec![0i64; grid.len() + 1];
    let mut m = LinkMetrics::default();
    let mut window_bytes = 0u64;
    // The bin of an instant, if it falls on the grid.
    let bin_of = |t: u64| Some((t / w.bin_ns.max(1)) as usize).filter(|&b| b < nbins);
    for (i, line) in lines.enumerate() {
        let lineno = i + 2;
        let line = line.map_err(|e| LogError { line: lineno, message: e.to_string() })?;
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let get = |k: usize| f.get(k).copied().unwrap_or("");
        if get(c.dir) != "down" {
            continue;
        }
        let num = |k: usize, what: &str| -> Result<u64, LogError> {
            get(k).parse().map_err(|_| LogError { line: lineno, message: format!("{what} {:?} is not a number", get(k)) })
        };
        let arrival = num(c.arrival, "arrival_ns")?;
        let in_window = w.contains(arrival);
        match get(c.outcome) {
            "delivered" => {
                let dequeue = num(c.dequeue, "dequeue_ns")?;
                let finish = num(c.finish, "finish_ns")?;
                let len = num(c.len, "len")?;
                let delay = dequeue.saturating_sub(arrival);
                grid.add_stay(&mut queue_diff, arrival, dequeue);
                let release = release_col.and_then(|k| get(k).parse::<u64>().ok());
                if let Some(cls) = release.and_then(|r| nearest(r.saturating_sub(finish))) {
                    grid.add_stay(&mut class_diff[cls], arrival, dequeue);
                }
                if let Some(b) = bin_of(finish) {
                    bin_bytes[b] += len;
                }
                if w.contains(finish) {
                    window_bytes += len;
                    m.packets_delivered += 1;
                }
                if let Some(b) = bin_of(arrival) {
                    bin_delays[b].push(delay);
                }
                if in_window {
                    delays.push(delay);
                }
                if get(c.ecn_out) == "ce" && get(c.ecn_in) != "ce" {
                    if let Some(b) = bin_of(arrival) {
                        bin_marks[b] += 1;
                    }
                    if in_window {
                        m.marked_ce += 1;
                    }
                }
            }
            outcome @ ("dropped_buffer" | "dropped_aqm" | "dropped_write") => {
                // A failed write to the far device happened after the queue: it waited.
                if let (true, Ok(dequeue)) = (outcome == "dropped_write", get(c.dequeue).parse::<u64>()) {
                    grid.add_stay(&mut queue_diff, arrival, dequeue);
                }
                if let Some(b) = bin_of(arrival) {
                    bin_drops[b] += 1;
                }
                if arrival >= grid.start_ns {
                    let k = ((arrival - grid.start_ns) / grid.step_ns.max(1)) as usize;
                    if let Some(d) = drops_grid.get_mut(k) {
                        *d += 1;
                    }
                }
                if in_window {
                    match outcome {
                        "dropped_aqm" => m.dropped_aqm += 1,
                        _ => m.dropped_buffer += 1,
                    }
                }
            }
            other => return Err(LogError { line: lineno, message: format!("unknown outcome {other:?}") }),
        }
    }
    let secs = w.seconds().max(1e-9);
    let capacity = link.capacity_bytes(w.start_ns, w.end_ns);
    m.capacity_mbps = capacity * 8.0 / secs / 1e6;
    m.delivered_mbps = window_bytes as f64 * 8.0 / secs / 1e6;
    m.utilisation = if capacity > 0.0 { window_bytes as f64 / capacity } else { 0.0 };
    m.queue_delay_ms = Percentiles::of_ns(&mut delays);
    let bin_s = w.bin_ns as f64 / NS_PER_S;
    let bins = (0..nbins)
        .map(|b| {
            let (t0, t1) = (b as u64 * w.bin_ns, (b as u64 + 1) * w.bin_ns);
            let p = Percentiles::of_ns(&mut bin_delays[b]);
            LinkBin {
                t_s: t1 as f64 / NS_PER_S,
                capacity_mbps: link.capacity_bytes(t0, t1) * 8.0 / bin_s / 1e6,
                delivered_mbps: bin_bytes[b] as f64 * 8.0 / bin_s / 1e6,
                qdelay_mean_ms: p.map(|p| p.mean),
                qdelay_p95_ms: p.map(|p| p.p95),
                qdelay_max_ms: p.map(|p| p.max),
                drops: bin_drops[b],
                marks: bin_marks[b],
            }
        })
        .collect();
    let levels = |diff: &[i64]| -> Vec<u32> {
        let mut level = 0i64;
        diff[..grid.len()]
            .iter()
            .map(|d| {
                level += d;
                level.max(0) as u32
            })
            .collect()
    };
    let queue = levels(&queue_diff);
    let queue_by_delay = class_diff.iter().map(|d| levels(d)).collect();
    Ok((m, bins, LinkSeries { queue, drops: drops_grid, queue_by_delay }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkSpec;
    use std::path::Path;

    const HEADER: &str = "dir,id,len,arrival_ns,dequeue_ns,finish_ns,release_ns,written_ns,queue_delay_ns,ecn_in,ecn_out,outcome";

    fn fixed(mbps: f64) -> Link {
        crate::link::resolve(
            &[LinkSpec::Fixed { rate_mbps: mbps, rtt_ms: None, buffer_bdp: None, loss_pct: None, loss_seed: None, name: None }],
            Path::new("."),
            Path::new("."),
        )
        .unwrap()
        .remove(0)
    }

    /// A synthetic log: at 12 Mbit/s one 1500-byte packet takes 1 ms; packet k arrives at
    /// k ms and waits k µs · 100 (so delays are 0, 0.1, …, 9.9 ms over 100 packets).
    fn synthetic_log() -> String {
        let mut s = format!("{HEADER}\n");
        for k in 0..100u64 {
            let arrival = k * 1_000_000;
            let dequeue = arrival + k * 100_000;
            let finish = dequeue + 1_000_000;
            s += &format!(
                "down,{k},1500,{arrival},{dequeue},{finish},{},{},{},ect0,{},delivered\n",
                finish + 5,
                finish + 6,
                dequeue - arrival,
                if k % 10 == 0 { "ce" } else { "ect0" }
            );
            // ACKs in the other direction are ignored.
            s += &format!("up,{k},52,{arrival},{arrival},{arrival},{arrival},{arrival},0,not-ect,not-ect,delivered\n");
        }
        s += "down,100,1500,50000000,,,,,,not-ect,not-ect,dropped_buffer\n";
        s += "down,101,1500,60000000,,,,,,ect0,ect0,dropped_aqm\n";
        s
    }

    #[test]
    fn link_metrics_on_a_synthetic_log() {
        let w = Window { start_ns: 0, end_ns: 200_000_000, bin_ns: 100_000_000 };
        let grid = QueueGrid { start_ns: 0, end_ns: 200_000_000, step_ns: 10_000_000 };
        let (m, bins, queue) = link_metrics(synthetic_log().as_bytes(), &fixed(12.0), w, grid).unwrap();
        // Packet k waits from k ms to 1.1·k ms: at 10·j ms (j < 10) j packets wait, at 100 ms
        // packets 91..99, and none after 110 ms; the dropped ones never count.
        let mut expect: Vec<u32> = (0..10).collect();
        expect.push(9);
        expect.extend([0; 9]);
        assert_eq!(queue, expect);
        // 100 packets of 1500 B in 200 ms of a 12 Mbit/s link (300 000 B offered).
        assert_eq!(m.packets_delivered, 100);
        assert!((m.utilisation - 0.5).abs() < 1e-9, "{}", m.utilisation);
        assert!((m.capacity_mbps - 12.0).abs() < 1e-9);
        assert!((m.delivered_mbps - 6.0).abs() < 1e-9);
        let q = m.queue_delay_ms.unwrap();
        assert_eq!(q.count, 100);
        assert!((q.p50 - 4.9).abs() < 1e-9 && (q.p95 - 9.4).abs() < 1e-9 && (q.max - 9.9).abs() < 1e-9, "{q:?}");
        assert!((q.mean - 4.95).abs() < 1e-9);
        assert_eq!((m.dropped_buffer, m.dropped_aqm, m.marked_ce), (1, 1, 10));
        assert_eq!(bins.len(), 2);
        assert!((bins[0].capacity_mbps - 12.0).abs() < 1e-9);
        // Finish times 1..~110 ms: the first bin holds the packets that finished before 100 ms.
        let first: u64 = (0..100u64).filter(|k| k * 1_100_000 + 1_000_000 < 100_000_000).count() as u64;
        assert!((bins[0].delivered_mbps - first as f64 * 1500.0 * 8.0 / 0.1 / 1e6).abs() < 1e-9);
        assert_eq!(bins[0].drops + bins[1].drops, 2);
        assert!((bins[0].qdelay_max_ms.unwrap() - 9.9).abs() < 1e-9);
        assert!(bins[1].qdelay_mean_ms.is_none());
    }

    #[test]
    fn the_window_excludes_warmup() {
        // Only arrivals from 50 ms on: delays 5.0..9.9 ms.
        let w = Window { start_ns: 50_000_000, end_ns: 200_000_000, bin_ns: 50_000_000 };
        let grid = QueueGrid { start_ns: 50_000_000, end_ns: 105_000_000, step_ns: 10_000_000 };
        let (m, bins, queue) = link_metrics(synthetic_log().as_bytes(), &fixed(12.0), w, grid).unwrap();
        assert_eq!(queue, vec![5, 6, 7, 8, 9, 9], "instants 50, 60, …, 100 ms");
        let q = m.queue_delay_ms.unwrap();
        assert_eq!(q.count, 50);
        assert!((q.p50 - 7.4).abs() < 1e-9, "{q:?}");
        assert_eq!(bins.len(), 4);
    }

    #[test]
    fn bad_logs_name_the_line() {
        let w = Window { start_ns: 0, end_ns: 1, bin_ns: 1 };
        let g = QueueGrid { start_ns: 0, end_ns: 1, step_ns: 1 };
        let e = link_metrics("dir,id\n".as_bytes(), &fixed(1.0), w, g).unwrap_err();
        assert_eq!(e.line, 1);
        let text = format!("{HEADER}\ndown,1,1500,x,1,2,3,4,5,ect0,ect0,delivered\n");
        let e = link_metrics(text.as_bytes(), &fixed(1.0), w, g).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("arrival_ns"));
        let text = format!("{HEADER}\ndown,1,1500,1,1,2,3,4,5,ect0,ect0,teleported\n");
        assert!(link_metrics(text.as_bytes(), &fixed(1.0), w, g).unwrap_err().message.contains("teleported"));
        assert!(link_metrics("".as_bytes(), &fixed(1.0), w, g).is_err());
    }
}
