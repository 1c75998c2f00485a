//! The fixed list of per-report features a policy may observe (docs/learned.md, "Features"),
//! and the observer that turns a flow's reports into the model's input: the last `history`
//! reports' features, normalised as the manifest declares, oldest first.
//!
//! Every feature is a function of the flow's reports alone (and of what earlier reports left:
//! the flow's minimum RTT, the previous RTT), computed in f64 and handed to the model as f32, so
//! the agent, the simulator and the Gymnasium environment give a policy the same numbers.

use ccp_contract::Report;

use crate::manifest::Observation;

/// One per-report feature, in the units its name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Data delivered over the interval (the datapath's receive rate where it measures one,
    /// else the bytes acknowledged, cumulatively or selectively, over the interval), Mbit/s.
    DeliveryRateMbps,
    /// The send rate over the same packets, where the datapath measures it; else the delivery rate.
    SendRateMbps,
    /// Send rate over delivery rate (Aurora's send ratio); 1 while either is unknown or zero.
    SendRecvRatio,
    /// The least RTT the flow has seen, ms.
    MinRttMs,
    /// The datapath's smoothed RTT, ms.
    SrttMs,
    /// The last RTT sample of the interval, ms.
    LastRttMs,
    /// The interval's mean RTT over the flow's minimum (Aurora's latency ratio); 1 before any sample.
    RttRatio,
    /// Change of the mean RTT since the previous report with a sample, over the time between them
    /// (Aurora's latency gradient, dimensionless).
    RttGradient,
    /// Packets newly lost over packets delivered plus lost, in the interval.
    LossFraction,
    /// Packets delivered CE-marked over packets delivered, in the interval.
    CeFraction,
    /// The window the datapath used at the end of the interval, packets.
    CwndPkts,
    /// Data in flight at the end of the interval, packets.
    InflightPkts,
}

const ALL: [(Feature, &str); 12] = [
    (Feature::DeliveryRateMbps, "delivery_rate_mbps"),
    (Feature::SendRateMbps, "send_rate_mbps"),
    (Feature::SendRecvRatio, "send_recv_ratio"),
    (Feature::MinRttMs, "min_rtt_ms"),
    (Feature::SrttMs, "srtt_ms"),
    (Feature::LastRttMs, "last_rtt_ms"),
    (Feature::RttRatio, "rtt_ratio"),
    (Feature::RttGradient, "rtt_gradient"),
    (Feature::LossFraction, "loss_fraction"),
    (Feature::CeFraction, "ce_fraction"),
    (Feature::CwndPkts, "cwnd_pkts"),
    (Feature::InflightPkts, "inflight_pkts"),
];

impl Feature {
    pub fn from_name(name: &str) -> Option<Feature> {
        ALL.iter().find(|(_, n)| *n == name).map(|(f, _)| *f)
    }

    pub fn name(self) -> &'static str {
        ALL.iter().find(|(f, _)| *f == self).map(|(_, n)| *n).unwrap_or("?")
    }

    pub fn names() -> Vec<&'static str> {
        ALL.iter().map(|(_, n)| *n).collect()
    }
}

/// What a feature needs from earlier reports.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Memory {
    min_rtt_us: Option<u64>,
    srtt_us: u64,
    last_rtt_us: u64,
    /// Mean RTT and time of the last report with a sample.
    prev_mean: Option<(f64, u64)>,
    gradient: f64,
}

/// One report's raw features.
fn raw(feature: Feature, r: &Report, m: &Memory) -> f64 {
    let us = r.interval_us.max(1) as f64;
    let delivery_bps = match r.recv_rate_bytes_per_s {
        Some(b) => b as f64 * 8.0,
        None => (r.acked_bytes + r.sacked_bytes) as f64 * 8.0 / (us * 1e-6),
    };
    let send_bps = r.send_rate_bytes_per_s.map_or(delivery_bps, |b| b as f64 * 8.0);
    let delivered = (r.acked_pkts + r.sacked_pkts) as f64;
    let mss = r.mss();
    match feature {
        Feature::DeliveryRateMbps => delivery_bps / 1e6,
        Feature::SendRateMbps => send_bps / 1e6,
        Feature::SendRecvRatio => {
            if delivery_bps > 0.0 && send_bps > 0.0 {
                send_bps / delivery_bps
            } else {
                1.0
            }
        }
        Feature::MinRttMs => m.min_rtt_us.unwrap_or(0) as f64 / 1e3,
        Feature::SrttMs => m.srtt_us as f64 / 1e3,
        Feature::LastRttMs => m.last_rtt_us as f64 / 1e3,
        Feature::RttRatio => match (r.rtt, m.min_rtt_us) {
            (Some(s), Some(min)) if min > 0 => s.mean_us as f64 / min as f64,
            _ => m.prev_mean.zip(m.min_rtt_us).filter(|(_, min)| *min > 0).map_or(1.0, |((mean, _), min)| mean / min as f64),
        },
        Feature::RttGradient => m.gradient,
        Feature::LossFraction => {
            let lost = r.lost_pkts as f64;
            if lost + delivered > 0.0 {
                lost / (lost + delivered)
            } else {
                0.0
            }
        }
        Feature::CeFraction => {
            if delivered > 0.0 {
                (r.ce_pkts as f64 / delivered).min(1.0)
            } else {
                0.0
            }
        }
        Feature::CwndPkts => r.cwnd_bytes as f64 / mss,
        Feature::InflightPkts => r.inflight_bytes as f64 / mss,
    }
}

/// A flow's observation: the last `history` reports' normalised features, oldest first, kept
/// in one buffer allocated once.
#[derive(Debug, Clone)]
pub struct Observer {
    spec: Observation,
    memory: Memory,
    /// `history × features` values, oldest report first; zeros until `history` reports came.
    values: Vec<f32>,
}

impl Observer {
    pub fn new(spec: &Observation) -> Observer {
        Observer { spec: spec.clone(), memory: Memory::default(), values: vec![0.0; spec.len()] }
    }

    /// Folds one report in: the oldest report's features leave, this one's arrive.
    pub fn push(&mut self, r: &Report) {
        let m = &mut self.memory;
        if let Some(s) = r.rtt {
            if s.min_us > 0 {
                m.min_rtt_us = Some(m.min_rtt_us.map_or(s.min_us, |v| v.min(s.min_us)));
            }
            m.srtt_us = s.srtt_us;
            m.last_rtt_us = s.last_us;
            let mean = s.mean_us as f64;
            m.gradient = match m.prev_mean {
                Some((prev, at)) if r.now_us > at => (mean - prev) / (r.now_us - at) as f64,
                _ => 0.0,
            };
            m.prev_mean = Some((mean, r.now_us));
        }
        let n = self.spec.features.len();
        self.values.copy_within(n.., 0);
        let last = self.values.len() - n;
        for (slot, f) in self.values[last..].iter_mut().zip(&self.spec.features) {
            let x = raw(f.feature, r, &self.memory);
            // A non-finite feature (a datapath's nonsense) reaches the model as 0, never as NaN.
            *slot = if x.is_finite() { f.apply(x) as f32 } else { 0.0 };
        }
    }

    /// The model input, as [`Observation::shape`] lays it out (row-major, so both layouts are the
    /// same buffer).
    #[inline]
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Forgets every report (a new episode, a rebuilt instance).
    pub fn clear(&mut self) {
        self.memory = Memory::default();
        self.values.fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Layout, Normalised};
    use ccp_contract::RttStats;

    fn spec(names: &[&str], history: usize) -> Observation {
        let features = names
            .iter()
            .map(|n| Normalised { feature: Feature::from_name(n).unwrap(), offset: 0.0, scale: 1.0, clip: 1e9 })
            .collect();
        Observation { history, layout: Layout::Flat, features }
    }

    fn report(now_ms: u64, mean_rtt_us: u64, acked_pkts: u64, lost: u64) -> Report {
        Report {
            now_us: now_ms * 1000,
            interval_us: 10_000,
            mss_bytes: 1000,
            acked_bytes: acked_pkts * 1000,
            acked_pkts,
            lost_pkts: lost,
            rtt: Some(RttStats {
                min_us: mean_rtt_us,
                max_us: mean_rtt_us,
                last_us: mean_rtt_us,
                srtt_us: mean_rtt_us,
                mean_us: mean_rtt_us,
                samples: 1,
            }),
            cwnd_bytes: 20_000,
            inflight_bytes: 10_000,
            ..Report::default()
        }
    }

    #[test]
    fn every_feature_name_round_trips() {
        for n in Feature::names() {
            assert_eq!(Feature::from_name(n).unwrap().name(), n);
        }
    }

    #[test]
    fn features_follow_their_definitions_and_history_shifts_oldest_out() {
        let mut o = Observer::new(&spec(&["delivery_rate_mbps", "rtt_ratio", "rtt_gradient", "loss_fraction", "cwnd_pkts"], 2));
        o.push(&report(10, 20_000, 10, 0));
        // 10 packets of 1000 bytes in 10 ms: 8 Mbit/s; ratio 1; no gradient yet.
        assert_eq!(&o.values()[5..], &[8.0, 1.0, 0.0, 0.0, 20.0]);
        assert_eq!(&o.values()[..5], &[0.0; 5], "zeros before the history fills");
        o.push(&report(20, 30_000, 30, 10));
        assert_eq!(&o.values()[..5], &[8.0, 1.0, 0.0, 0.0, 20.0], "the older report moved back");
        // 30 packets: 24 Mbit/s; ratio 30/20; gradient 10 ms over 10 ms; 10 lost of 40.
        assert_eq!(&o.values()[5..], &[24.0, 1.5, 1.0, 0.25, 20.0]);
    }

    #[test]
    fn nonsense_from_a_datapath_never_reaches_the_model_as_nan() {
        let mut o = Observer::new(&spec(&["send_recv_ratio", "rtt_ratio", "cwnd_pkts"], 1));
        o.push(&Report { mss_bytes: 0, interval_us: 0, recv_rate_bytes_per_s: Some(0), ..Report::default() });
        assert!(o.values().iter().all(|v| v.is_finite()), "{:?}", o.values());
    }
}
