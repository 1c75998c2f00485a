//! The algorithm registry: every algorithm by name, with its parameters and paper reference.
//! A new algorithm is one module plus one line in `all()`. Algorithms written outside Rust join
//! through a scheme provider (`py:` for Python, registered by the binaries that embed it).

use std::sync::{Arc, OnceLock, RwLock};

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

/// Resolves an algorithm name that carries a scheme (`py:path/to/cc.py:Class`) to its descriptor.
/// The error says why it could not be loaded, in the user's terms.
pub type SchemeProvider = fn(name: &str) -> Result<&'static AlgorithmInfo, String>;

fn schemes() -> &'static RwLock<Vec<(&'static str, SchemeProvider)>> {
    static SCHEMES: OnceLock<RwLock<Vec<(&'static str, SchemeProvider)>>> = OnceLock::new();
    SCHEMES.get_or_init(|| RwLock::new(Vec::new()))
}

/// Makes names of the form `{scheme}:…` resolve through `provider` in every lookup below: how an
/// algorithm hosted outside this crate (Python, `ccp-python`) joins the registry. A binary
/// registers its schemes once at start; registering a scheme again replaces its provider.
pub fn register_scheme(scheme: &'static str, provider: SchemeProvider) {
    let mut all = schemes().write().unwrap_or_else(|e| e.into_inner());
    all.retain(|(s, _)| *s != scheme);
    all.push((scheme, provider));
}

/// The provider for `name`'s scheme, if it has one that is registered.
fn scheme_of(name: &str) -> Option<SchemeProvider> {
    let (scheme, _) = name.split_once(':')?;
    schemes().read().unwrap_or_else(|e| e.into_inner()).iter().find(|(s, _)| *s == scheme).map(|(_, p)| *p)
}

/// The path inside a name that carries a file, with what comes before and after it:
/// `py:PATH:Class` (a Python class) and `onnx:PATH` (a learned policy; its manifest is the same
/// path with `.toml`). Other names carry none.
fn split_path(name: &str) -> Option<(&str, &str, &str)> {
    if let Some(rest) = name.strip_prefix("py:") {
        let (path, _) = rest.rsplit_once(':')?;
        return Some(("py:", path, &rest[path.len()..]));
    }
    let path = name.strip_prefix("onnx:")?;
    Some(("onnx:", path, ""))
}

/// Whether `name` names an algorithm kept in files (a Python class, a learned policy), which a
/// changed file gives a new version of.
pub fn file_backed(name: &str) -> bool {
    split_path(name).is_some()
}

/// The files `name`'s algorithm is read from: the Python file; the model and its manifest.
pub fn files_of(name: &str) -> Vec<std::path::PathBuf> {
    match split_path(name) {
        Some(("onnx:", path, _)) => {
            let model = std::path::PathBuf::from(path);
            vec![model.with_extension("toml"), model]
        }
        Some((_, path, _)) => vec![path.into()],
        None => Vec::new(),
    }
}

/// `name` with the path it carries made absolute against `base` (the directory a relative path
/// is relative to: a client's working directory, a configuration's folder) and canonical, so
/// that the same file reached through different paths is one algorithm; any other name as it is.
pub fn absolute_name(name: &str, base: &std::path::Path) -> Result<String, String> {
    let Some((scheme, path, rest)) = split_path(name) else { return Ok(name.to_string()) };
    if path.is_empty() {
        return Err(format!("{name:?} names no file"));
    }
    let full = base.join(path);
    let full = full.canonicalize().map_err(|e| format!("{}: {e}", full.display()))?;
    Ok(format!("{scheme}{}{rest}", full.display()))
}

/// Looks `name` up: a native algorithm, or one a registered scheme provides.
pub fn resolve(name: &str) -> Result<&'static AlgorithmInfo, ParamError> {
    if let Some(info) = all().iter().find(|a| a.name == name) {
        return Ok(info);
    }
    match scheme_of(name) {
        Some(provider) => provider(name).map_err(|reason| ParamError::Unavailable { name: name.to_string(), reason }),
        None => Err(ParamError::UnknownAlgorithm { name: name.to_string(), known: all().iter().map(|a| a.name).collect() }),
    }
}

pub fn find(name: &str) -> Option<&'static AlgorithmInfo> {
    resolve(name).ok()
}

/// Looks `name` up and validates `table` as its parameters.
pub fn configure(name: &str, table: &toml::Table) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    resolve(name)?.configure(table)
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

    /// Issue 29: the window-based algorithms grow no window the flow does not fill. Each is fed
    /// clean reports (data acknowledged, nothing lost or marked, a steady RTT) that say the window
    /// did not limit the sender (an application sending slowly, a small receiver window): its
    /// window never grows. The same reports saying the window limits grow every one of them.
    #[test]
    fn window_based_algorithms_do_not_grow_a_window_the_flow_does_not_fill() {
        let algorithms = ["reno", "cubic", "dctcp", "cdg", "vegas", "inigo"];
        let run = |name: &str, cwnd_limited: bool| -> (f64, f64) {
            let mut alg = configure(name, &toml::Table::new()).unwrap().create();
            let mss = 1448u64;
            let first = alg.init(&FlowStart::new(mss as u32, 10 * mss)).cwnd_bytes.unwrap_or(0.0);
            let mut last = first;
            for i in 1..=400u64 {
                let report = Report {
                    now_us: i * 10_000,
                    interval_us: 10_000,
                    mss_bytes: mss as u32,
                    acked_bytes: 2 * mss,
                    acked_pkts: 2,
                    rtt: Some(RttStats {
                        min_us: 20_000,
                        max_us: 20_000,
                        last_us: 20_000,
                        srtt_us: 20_000,
                        mean_us: 20_000,
                        samples: 2,
                    }),
                    inflight_bytes: 4 * mss,
                    cwnd_bytes: last as u64,
                    send_rate_bytes_per_s: Some(250_000),
                    recv_rate_bytes_per_s: Some(250_000),
                    cwnd_limited,
                    ..Report::default()
                };
                if let Some(c) = alg.on_report(&report).cwnd_bytes {
                    last = c;
                }
            }
            (first, last)
        };
        for name in algorithms {
            let (first, last) = run(name, false);
            assert!(last <= first, "{name}: {first} -> {last} while the window did not limit");
            let (first, last) = run(name, true);
            assert!(last > first, "{name}: {first} -> {last} with the window limiting");
        }
    }

    #[test]
    fn file_backed_names_are_made_absolute_and_list_their_files() {
        let dir = std::env::temp_dir();
        let base = dir.canonicalize().unwrap();
        let file = base.join(format!("registry-test-{}.onnx", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        let name = file.file_name().unwrap().to_str().unwrap();
        assert_eq!(absolute_name(&format!("onnx:{name}"), &dir), Ok(format!("onnx:{}", file.display())));
        assert_eq!(absolute_name(&format!("py:./{name}:My_CC"), &dir), Ok(format!("py:{}:My_CC", file.display())));
        assert_eq!(absolute_name("cubic", &dir), Ok("cubic".into()));
        assert!(absolute_name("onnx:missing.onnx", &dir).unwrap_err().contains("missing.onnx"));
        assert_eq!(files_of("onnx:/m/p.onnx"), vec![std::path::PathBuf::from("/m/p.toml"), "/m/p.onnx".into()]);
        assert_eq!(files_of("py:/m/a.py:X"), vec![std::path::PathBuf::from("/m/a.py")]);
        assert!(files_of("reno").is_empty() && !file_backed("reno") && file_backed("onnx:x.onnx"));
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn unknown_algorithm_lists_known_ones() {
        let err = configure("bogus", &toml::Table::new()).err().unwrap();
        assert!(err.to_string().contains("reno"), "{err}");
    }
}
