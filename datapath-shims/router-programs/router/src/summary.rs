//! Statistics the router keeps per direction and the summary it writes at exit, as text (stderr)
//! and JSON (`--summary-json`).
//!
//! Definitions (the same as mahimahi's `mm-throughput-graph` where it has one):
//! * throughput: IP bytes delivered (written to the far TUN device) over the run;
//! * capacity: bytes the link could have carried (rate × time, or the trace's opportunities);
//! * utilisation: delivered / capacity;
//! * queueing delay: time from arrival to the start of transmission (excludes serialisation and
//!   propagation);
//! * delay error: how late a packet was actually written compared with its exact scheduled time
//!   (finish on the link + propagation delay): what the emulator adds beyond what it should.

use serde::Serialize;

use ccp_qdisc::{Nanos, NANOS_PER_SEC};

pub use crate::pacer::PacerSummary;
pub use crate::percentiles::{Histogram, Percentiles};

/// What a direction counts: kept while running and reported as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counters {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_buffer: u64,
    pub dropped_aqm: u64,
    pub dropped_write: u64,
    /// Dropped at random before the queue (`--loss-pct`); not in the packet log.
    pub dropped_random: u64,
    /// Packets the discipline set to CE (an ABC router's brakes among them).
    pub marked_ce: u64,
    pub qcn_notifications: u64,
}

/// Per-direction counters and samples.
#[derive(Debug, Default)]
pub struct DirectionStats {
    pub counts: Counters,
    pub opportunities: u64,
    /// Queueing delay of delivered packets, µs.
    pub queue_delay_us: Histogram,
    /// Lateness of the actual write of delivered packets, µs.
    pub delay_error_us: Histogram,
}

/// The summary of one direction.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectionSummary {
    pub link: String,
    pub qdisc: String,
    pub delay_ms: f64,
    #[serde(flatten)]
    pub counts: Counters,
    pub throughput_mbps: f64,
    /// `None` for an unlimited link.
    pub capacity_mbps: Option<f64>,
    pub utilisation: Option<f64>,
    pub queue_delay_ms: Option<Percentiles>,
    pub delay_error_ms: Option<Percentiles>,
}

/// One flow class (`--class-delay`): its delays and the packets it delivered.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClassSummary {
    /// The class in `--class-delay` syntax.
    pub class: String,
    pub delay_down_ms: f64,
    pub delay_up_ms: f64,
    pub packets_down: u64,
    pub packets_up: u64,
}

/// What the router writes at exit.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub duration_s: f64,
    /// Sender → receiver.
    pub down: DirectionSummary,
    /// Receiver → sender.
    pub up: DirectionSummary,
    /// Per-flow-class delays, when any were configured (absent from the JSON otherwise);
    /// packets of no class are the directions' totals minus these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassSummary>,
    /// HULL's pacer on the sender's side, when it ran (`--pacer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacer: Option<PacerSummary>,
}

/// Everything needed to summarise one direction besides its counters.
pub struct DirectionInfo {
    pub link: String,
    pub qdisc: String,
    pub delay: Nanos,
    pub capacity_bytes: Option<f64>,
}

impl DirectionStats {
    pub fn summarise(&self, info: DirectionInfo, duration: Nanos) -> DirectionSummary {
        let secs = (duration as f64 / NANOS_PER_SEC as f64).max(1e-9);
        let mbps = |bytes: f64| bytes * 8.0 / secs / 1e6;
        DirectionSummary {
            link: info.link,
            qdisc: info.qdisc,
            delay_ms: info.delay as f64 / 1e6,
            counts: self.counts,
            throughput_mbps: mbps(self.counts.bytes_out as f64),
            capacity_mbps: info.capacity_bytes.map(mbps),
            utilisation: info.capacity_bytes.filter(|&c| c > 0.0).map(|c| self.counts.bytes_out as f64 / c),
            queue_delay_ms: Percentiles::of_us(&self.queue_delay_us),
            delay_error_ms: Percentiles::of_us(&self.delay_error_us),
        }
    }
}

impl Summary {
    /// A human-readable rendering for stderr.
    pub fn to_text(&self) -> String {
        let mut s = format!("ccp-router summary over {:.2} s\n", self.duration_s);
        for (name, d) in [("down (sender → receiver)", &self.down), ("up (receiver → sender)", &self.up)] {
            s += &format!("  {name}: link {}, qdisc {}, delay {:.1} ms\n", d.link, d.qdisc, d.delay_ms);
            let c = &d.counts;
            s += &format!(
                "    packets in {} / out {}; dropped: buffer {}, aqm {}, write {}, random {}; marked: CE {}; QCN notifications {}\n",
                c.packets_in,
                c.packets_out,
                c.dropped_buffer,
                c.dropped_aqm,
                c.dropped_write,
                c.dropped_random,
                c.marked_ce,
                c.qcn_notifications
            );
            s += &format!("    throughput {:.3} Mbit/s", d.throughput_mbps);
            if let (Some(c), Some(u)) = (d.capacity_mbps, d.utilisation) {
                s += &format!(", capacity {c:.3} Mbit/s, utilisation {:.1} %", u * 100.0);
            }
            s += "\n";
            for (what, p) in [("queueing delay", &d.queue_delay_ms), ("delay error", &d.delay_error_ms)] {
                if let Some(p) = p {
                    s += &format!(
                        "    {what} ms: mean {:.3}, p50 {:.3}, p95 {:.3}, p99 {:.3}, max {:.3}\n",
                        p.mean, p.p50, p.p95, p.p99, p.max
                    );
                }
            }
        }
        for c in &self.classes {
            s += &format!(
                "  class {}: delay down {:.1} ms, up {:.1} ms; packets delivered down {}, up {}\n",
                c.class, c.delay_down_ms, c.delay_up_ms, c.packets_down, c.packets_up
            );
        }
        if let Some(p) = &self.pacer {
            s += &format!(
                "  pacer: {} packets paced ({} flows associated, {} dropped with the FIFO full), delay mean {:.1} µs, \
                 max {:.1} µs, peak backlog {} B, token rate at the end {:.1} Mbit/s\n",
                p.packets,
                p.associations,
                p.dropped_full,
                p.mean_delay_us,
                p.max_delay_us,
                p.peak_backlog_bytes,
                p.final_rate_mbps
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilisation_and_text() {
        let st = DirectionStats {
            counts: Counters { bytes_out: 1_000_000, packets_out: 700, ..Counters::default() },
            ..DirectionStats::default()
        };
        let info = DirectionInfo { link: "fixed 8 Mbit/s".into(), qdisc: "droptail".into(), delay: 0, capacity_bytes: Some(2e6) };
        let d = st.summarise(info, 2 * NANOS_PER_SEC);
        assert_eq!(d.throughput_mbps, 4.0);
        assert_eq!(d.capacity_mbps, Some(8.0));
        assert_eq!(d.utilisation, Some(0.5));
        let mut s = Summary { duration_s: 2.0, down: d.clone(), up: d, classes: Vec::new(), pacer: None };
        assert!(s.to_text().contains("utilisation 50.0 %"));
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"throughput_mbps\":4.0"));
        assert!(!json.contains("classes"), "no classes, no key: the JSON is as before");
        s.classes.push(ClassSummary {
            class: "dport=5201:20".into(),
            delay_down_ms: 20.0,
            delay_up_ms: 20.0,
            packets_down: 7,
            packets_up: 5,
        });
        assert!(s.to_text().contains("class dport=5201:20: delay down 20.0 ms, up 20.0 ms; packets delivered down 7, up 5"));
        assert!(serde_json::to_string(&s).unwrap().contains("\"classes\":[{\"class\":\"dport=5201:20\""));
    }
}
