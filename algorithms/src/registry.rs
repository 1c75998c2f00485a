//! The algorithm registry: every algorithm by name, with its parameters and paper reference.
//! A new algorithm is one module plus one line in `all()`.

use std::sync::Arc;

use ccp_contract::{AlgorithmFactory, AlgorithmInfo, Choice, ParamError};

/// Every registered algorithm, in listing order.
pub fn all() -> &'static [AlgorithmInfo] {
    static ALL: &[AlgorithmInfo] = &[
        crate::reno::INFO,
        crate::cubic::INFO,
        crate::bbr::INFO,
        crate::cdg::INFO,
        crate::dctcp::INFO,
        crate::dcqcn::INFO,
        crate::hpcc::INFO,
        crate::inigo::INFO,
        crate::nimbus::INFO,
        crate::abc::INFO,
        crate::qcn::INFO,
        crate::annulus::INFO,
        crate::basic_delay::INFO,
        crate::vegas::INFO,
        crate::copa::INFO,
        crate::constant::INFO,
    ];
    ALL
}

pub fn find(name: &str) -> Option<&'static AlgorithmInfo> {
    all().iter().find(|a| a.name == name)
}

/// Looks `name` up and validates `table` as its parameters.
pub fn configure(name: &str, table: &toml::Table) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    match find(name) {
        Some(info) => info.configure(table),
        None => Err(ParamError::UnknownAlgorithm { name: name.to_string(), known: all().iter().map(|a| a.name).collect() }),
    }
}

/// Validates `params` for `name` and makes the choice a controller runs.
pub fn choose(name: &str, params: toml::Table, origin: impl Into<String>) -> Result<Choice, ParamError> {
    let factory = configure(name, &params)?;
    Ok(Choice::new(factory, params, origin))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_contract::{FlowStart, Report, RttStats};

    #[test]
    fn names_are_unique_and_params_declared_once() {
        let mut names: Vec<_> = all().iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all().len());
        for info in all() {
            let mut p: Vec<_> = info.params.iter().map(|s| s.name).collect();
            p.sort();
            p.dedup();
            assert_eq!(p.len(), info.params.len(), "{} declares a parameter twice", info.name);
            assert!(!info.reference.is_empty() && !info.summary.is_empty());
        }
    }

    /// Every algorithm builds from its defaults, and the instance reads only declared parameters
    /// and survives a plain report.
    #[test]
    fn every_algorithm_builds_from_defaults_and_runs() {
        for info in all() {
            let factory = info.configure(&toml::Table::new()).unwrap_or_else(|e| panic!("{}: {e}", info.name));
            assert_eq!(factory.name(), info.name);
            let mut alg = factory.create();
            assert_eq!(alg.name(), info.name);
            let a = alg.init(&FlowStart::new(1448, 10 * 1448));
            if let Some(c) = a.cwnd_bytes {
                assert!(c.is_finite() && c > 0.0, "{}: initial cwnd {c}", info.name);
            }
            let report = Report {
                now_us: 10_000,
                interval_us: 10_000,
                mss_bytes: 1448,
                acked_bytes: 4 * 1448,
                acked_pkts: 4,
                rtt: Some(RttStats {
                    min_us: 10_000,
                    max_us: 10_000,
                    last_us: 10_000,
                    srtt_us: 10_000,
                    mean_us: 10_000,
                    samples: 4,
                }),
                inflight_bytes: 6 * 1448,
                cwnd_bytes: 10 * 1448,
                ..Report::default()
            };
            let a = alg.on_report(&report);
            if let Some(c) = a.cwnd_bytes {
                assert!(c.is_finite() && c > 0.0, "{}: cwnd {c}", info.name);
            }
        }
    }

    #[test]
    fn unknown_algorithm_lists_known_ones() {
        let err = configure("bogus", &toml::Table::new()).err().unwrap();
        assert!(err.to_string().contains("reno"), "{err}");
    }
}
