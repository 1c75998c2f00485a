//! Constant: holds a fixed congestion window and (optionally) a fixed pacing rate.
//!
//! Not a congestion controller at all: it ignores every report. It exists to drive a datapath to
//! a known operating point (tests of "cwnd controls throughput", calibration runs), in the spirit
//! of the CCP project's `const` algorithm.

use std::sync::Arc;

use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Pacing, Param, Report, StateVar,
};

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct ConstantParams {
        cwnd_pkts: f64 = Param::float(10.0, Bound::Inclusive(2.0), Bound::Inclusive(1.0e6), "packets", "the window to hold"),
        rate_mbit_per_s: f64 = Param::float(
            0.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0e6),
            "Mbit/s",
            "pacing rate to hold; 0 leaves the flow unpaced",
        ),
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "constant",
    summary: "fixed window (and optional pacing rate); ignores feedback — for tests and calibration",
    reference: "CCP project's `const` algorithm (ccp-project/const)",
    params: ConstantParams::PARAMS,
    build: |p| {
        let p = ConstantParams::from_params(p)?;
        Ok(Arc::new(Config { cwnd_pkts: p.cwnd_pkts, rate_bytes_per_s: p.rate_mbit_per_s * 1e6 / 8.0 }))
    },
};

#[derive(Debug, Clone)]
struct Config {
    cwnd_pkts: f64,
    rate_bytes_per_s: f64,
}

impl AlgorithmFactory for Config {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Constant { cfg: self.clone(), mss: 1448.0 })
    }
}

pub struct Constant {
    cfg: Config,
    mss: f64,
}

impl Constant {
    fn action(&self) -> Action {
        let pacing = if self.cfg.rate_bytes_per_s > 0.0 { Pacing::BytesPerSec(self.cfg.rate_bytes_per_s) } else { Pacing::Off };
        Action::cwnd(self.cfg.cwnd_pkts * self.mss).with_pacing(pacing)
    }
}

impl Algorithm for Constant {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.action()
    }
    fn on_report(&mut self, report: &Report) -> Action {
        if f64::from(report.mss_bytes) != self.mss && report.mss_bytes > 0 {
            self.mss = report.mss();
            return self.action();
        }
        Action::default()
    }
    fn state(&self) -> Vec<StateVar> {
        vec![StateVar { name: "cwnd_pkts", value: self.cfg.cwnd_pkts }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_window_in_bytes_of_the_flow_mss() {
        let f = INFO.configure(&"cwnd_pkts = 20".parse().unwrap()).unwrap();
        let mut a = f.create();
        let act = a.init(&FlowStart::new(1000, 10_000));
        assert_eq!(act.cwnd_bytes, Some(20_000.0));
        assert_eq!(act.pacing, Some(Pacing::Off));
        let r = Report { mss_bytes: 1000, acked_bytes: 1_000_000, lost_pkts: 5, ..Report::default() };
        assert!(a.on_report(&r).is_empty(), "feedback must not move a constant window");
    }

    #[test]
    fn rate_in_mbit_becomes_bytes_per_second() {
        let f = INFO.configure(&"rate_mbit_per_s = 8".parse().unwrap()).unwrap();
        let act = f.create().init(&FlowStart::new(1448, 14480));
        assert_eq!(act.pacing, Some(Pacing::BytesPerSec(1e6)));
    }
}
