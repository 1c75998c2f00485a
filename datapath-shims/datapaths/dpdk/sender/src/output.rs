//! What `ccp-dpdk send` prints: a line per `--report-ms` (goodput, RTT, window, retransmissions)
//! and a summary at the end, as text or JSON Lines on stdout. Integers only (see Cargo.toml on
//! why this binary avoids floating point): rates in kbit/s, times in µs.

use std::fmt::Write as _;
use std::time::Duration;

use ccp_user_tcp::conn::State;

use crate::datapath::Stats;

/// One connection at the time of a line.
#[derive(Debug, Clone)]
pub struct Line {
    pub port: u16,
    pub acked: u64,
    pub cwnd: u32,
    pub srtt_us: Option<u32>,
    pub retx: u64,
    pub timeouts: u64,
    pub state: State,
    pub steered_by_agent: bool,
}

pub struct Output {
    json: bool,
    per_flow: bool,
    every_us: u64,
    next_us: u64,
    last_us: u64,
    last_acked: Vec<u64>,
}

/// `x` bytes over `us` microseconds, in kbit/s.
fn kbps(bytes: u64, us: u64) -> u64 {
    if us == 0 {
        0
    } else {
        (u128::from(bytes) * 8_000 / u128::from(us)) as u64
    }
}

/// kbit/s as "M.mmm Mbit/s" without floating point.
fn mbit(kbps: u64) -> String {
    format!("{}.{:03} Mbit/s", kbps / 1000, kbps % 1000)
}

fn state_name(s: State) -> String {
    match s {
        State::SynSent => "syn-sent".into(),
        State::Established => "established".into(),
        State::FinSent => "fin-sent".into(),
        State::Closed => "closed".into(),
        State::Failed(why) => format!("failed ({why:?})"),
    }
}

impl Output {
    pub fn new(json: bool, per_flow: bool, every: Duration) -> Output {
        let every_us = every.as_micros() as u64;
        Output { json, per_flow, every_us, next_us: every_us, last_us: 0, last_acked: Vec::new() }
    }

    pub fn due(&self, now_us: u64) -> bool {
        now_us >= self.next_us
    }

    /// One line for the interval since the last.
    pub fn line(&mut self, now_us: u64, flows: &[Line], agent: bool) {
        self.next_us = now_us - now_us % self.every_us.max(1) + self.every_us;
        let dt = now_us.saturating_sub(self.last_us);
        self.last_acked.resize(flows.len(), 0);
        let delta: Vec<u64> = flows.iter().zip(&self.last_acked).map(|(f, last)| f.acked.saturating_sub(*last)).collect();
        let total = kbps(delta.iter().sum(), dt);
        let cwnd: u64 = flows.iter().map(|f| u64::from(f.cwnd)).sum();
        let rtts: Vec<u64> = flows.iter().filter_map(|f| f.srtt_us.map(u64::from)).collect();
        let rtt = if rtts.is_empty() { 0 } else { rtts.iter().sum::<u64>() / rtts.len() as u64 };
        let retx: u64 = flows.iter().map(|f| f.retx).sum();
        let mut s = String::new();
        if self.json {
            let _ = write!(
                s,
                "{{\"t_us\":{now_us},\"goodput_kbps\":{total},\"srtt_us\":{rtt},\"cwnd_bytes\":{cwnd},\"retx_segs\":{retx},\"flows\":{},\"agent\":{agent}",
                flows.len()
            );
            if self.per_flow {
                s.push_str(",\"per_flow\":[");
                for (i, (f, d)) in flows.iter().zip(&delta).enumerate() {
                    let _ = write!(
                        s,
                        "{}{{\"port\":{},\"goodput_kbps\":{},\"srtt_us\":{},\"cwnd_bytes\":{},\"retx_segs\":{},\"agent\":{}}}",
                        if i > 0 { "," } else { "" },
                        f.port,
                        kbps(*d, dt),
                        f.srtt_us.unwrap_or(0),
                        f.cwnd,
                        f.retx,
                        f.steered_by_agent
                    );
                }
                s.push(']');
            }
            s.push('}');
        } else {
            let _ = write!(
                s,
                "t={}.{:03}s goodput={} srtt={}.{:03} ms cwnd={} B retx={} flows={} steered-by={}",
                now_us / 1_000_000,
                now_us % 1_000_000 / 1000,
                mbit(total),
                rtt / 1000,
                rtt % 1000,
                cwnd,
                retx,
                flows.len(),
                if agent { "agent" } else { "fallback" }
            );
            if self.per_flow {
                for (f, d) in flows.iter().zip(&delta) {
                    let _ = write!(
                        s,
                        "\n  port {}: {} srtt={} us cwnd={} B retx={} {}",
                        f.port,
                        mbit(kbps(*d, dt)),
                        f.srtt_us.unwrap_or(0),
                        f.cwnd,
                        f.retx,
                        if f.steered_by_agent { "agent" } else { "fallback" }
                    );
                }
            }
        }
        println!("{s}");
        self.last_us = now_us;
        for (last, f) in self.last_acked.iter_mut().zip(flows) {
            *last = f.acked;
        }
    }

    /// The run's totals.
    pub fn summary(&self, now_us: u64, flows: &[Line], stats: &Stats) {
        let acked: u64 = flows.iter().map(|f| f.acked).sum();
        let retx: u64 = flows.iter().map(|f| f.retx).sum();
        let timeouts: u64 = flows.iter().map(|f| f.timeouts).sum();
        let closed = flows.iter().filter(|f| f.state == State::Closed).count();
        let failed: Vec<String> = flows
            .iter()
            .filter(|f| matches!(f.state, State::Failed(_)))
            .map(|f| format!("{}: {}", f.port, state_name(f.state)))
            .collect();
        let unfinished: Vec<String> = flows
            .iter()
            .filter(|f| !matches!(f.state, State::Failed(_) | State::Closed))
            .take(10)
            .map(|f| format!("{}: {} ({} bytes acknowledged)", f.port, state_name(f.state), f.acked))
            .collect();
        let goodput = kbps(acked, now_us);
        let control_ns_per_ack = stats.control_ns.checked_div(stats.control_acks).unwrap_or(0);
        let (lat_n, lat_p50, lat_p99) = (
            stats.report_to_command_us.len(),
            stats.report_to_command_us.percentile(50),
            stats.report_to_command_us.percentile(99),
        );
        if self.json {
            println!(
                "{{\"summary\":true,\"duration_us\":{now_us},\"bytes_acked\":{acked},\"goodput_kbps\":{goodput},\"retx_segs\":{retx},\"timeouts\":{timeouts},\"flows\":{},\"closed\":{closed},\"failed\":{},\"acks_to_agent\":{},\"acks_to_fallback\":{},\"frames_in\":{},\"frames_out\":{},\"frames_bad\":{},\"tx_ring_full\":{},\"from_agent\":{},\"rejected\":{},\"control_ns_per_ack\":{control_ns_per_ack},\"report_to_command_samples\":{lat_n},\"report_to_command_p50_us\":{lat_p50},\"report_to_command_p99_us\":{lat_p99},\"port_rx_missed\":{},\"port_rx_no_mbuf\":{},\"port_tx_errors\":{}}}",
                flows.len(),
                failed.len(),
                stats.acks_to_agent,
                stats.acks_to_fallback,
                stats.frames_in,
                stats.frames_out,
                stats.frames_bad,
                stats.tx_ring_full,
                stats.from_agent,
                stats.rejected,
                stats.port.rx_missed,
                stats.port.rx_no_mbuf,
                stats.port.tx_errors
            );
        } else {
            println!(
                "done in {}.{:03} s: {} bytes acknowledged ({}), {} retransmitted segments, {} timeouts, {}/{} connections closed cleanly; ACKs steered by the agent {}, by the fallback {}",
                now_us / 1_000_000,
                now_us % 1_000_000 / 1000,
                acked,
                mbit(goodput),
                retx,
                timeouts,
                closed,
                flows.len(),
                stats.acks_to_agent,
                stats.acks_to_fallback
            );
            if stats.control_acks > 0 {
                println!(
                    "  libccp per ACK (fold + IPC): {control_ns_per_ack} ns; ACK -> report -> agent -> command back: p50 {lat_p50} us, p99 {lat_p99} us ({lat_n} samples)"
                );
            }
            for f in failed {
                println!("  failed: {f}");
            }
            for f in unfinished {
                println!("  not closed: {f}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_exact_integers() {
        assert_eq!(kbps(125_000, 1_000_000), 1000);
        assert_eq!(kbps(1, 0), 0);
        assert_eq!(mbit(941_234), "941.234 Mbit/s");
        assert_eq!(mbit(7), "0.007 Mbit/s");
    }

    #[test]
    fn lines_come_once_per_interval() {
        let mut o = Output::new(true, false, Duration::from_millis(1000));
        assert!(!o.due(999_999));
        assert!(o.due(1_000_050));
        o.line(1_000_050, &[], false);
        assert!(!o.due(1_999_000));
        assert!(o.due(2_000_000), "aligned to the interval, not drifting by the lateness");
    }
}
