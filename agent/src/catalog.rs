//! The algorithm catalogue as users see it: `ccp-agent algorithms` and `ccp-agent ctl algorithms`.
//! `ccp-agent algorithms NAME` shows one algorithm, which is how a Python class
//! (`py:file.py:Class`, not among the native ones listed) shows its parameters.

use std::fmt::Write as _;

use ccp_algorithms::registry;
use ccp_contract::{AlgorithmInfo, ParamKind};

/// Every algorithm with its parameters, as JSON.
pub fn algorithms_json() -> serde_json::Value {
    registry::all().iter().map(algorithm_json).collect()
}

/// Every algorithm with its parameters, as text.
pub fn algorithms_text() -> String {
    registry::all().iter().map(algorithm_text).collect()
}

/// The algorithm `name` (native, or `py:` relative to the working directory) as the one entry of
/// the catalogue's JSON or text; `Err` says why it cannot be found or loaded.
pub fn algorithm(name: &str, json: bool) -> anyhow::Result<String> {
    let name = ccp_algorithms::registry::absolute_name(name, &std::env::current_dir().unwrap_or_default())
        .map_err(anyhow::Error::msg)?;
    let info = registry::resolve(&name)?;
    Ok(match json {
        true => serde_json::to_string_pretty(&serde_json::Value::Array(vec![algorithm_json(info)]))? + "\n",
        false => algorithm_text(info),
    })
}

fn algorithm_json(a: &AlgorithmInfo) -> serde_json::Value {
    let params: Vec<_> = a
        .params
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "default": p.default_value().to_string(),
                "range": p.range_text(),
                "unit": p.unit,
                "doc": p.doc,
            })
        })
        .collect();
    serde_json::json!({ "name": a.name, "summary": a.summary, "reference": a.reference, "params": params })
}

fn algorithm_text(a: &AlgorithmInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} — {}", a.name, a.summary);
    let _ = writeln!(out, "  reference: {}", a.reference);
    if a.params.is_empty() {
        let _ = writeln!(out, "  (no parameters)");
    }
    for p in a.params {
        let unit = if p.unit.is_empty() { String::new() } else { format!(" {}", p.unit) };
        let default = match p.kind {
            ParamKind::Choice { default, .. } => format!("{default:?}"),
            _ => p.default_value().to_string(),
        };
        let _ = writeln!(out, "  {:<22} default {}{}  ({})", p.name, default, unit, p.range_text());
        let _ = writeln!(out, "  {:<22} {}", "", p.doc);
    }
    let _ = writeln!(out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(file: &str, class: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/python/examples").join(file);
        format!("py:{}:{class}", path.canonicalize().unwrap().display())
    }

    #[test]
    fn one_python_class_lists_like_a_native_algorithm() {
        ccp_python::register();
        let name = example("reno.py", "Reno");
        let text = algorithm(&name, false).unwrap();
        assert!(text.starts_with(&format!("{name} — ")), "{text}");
        assert!(text.contains("  reference: RFC 5681"), "{text}");
        for p in ["init_cwnd_pkts", "beta", "ecn", "recovery_by_data"] {
            assert!(text.lines().any(|l| l.trim_start().starts_with(p) && l.contains("default")), "{p}: {text}");
        }
        let json: serde_json::Value = serde_json::from_str(&algorithm(&name, true).unwrap()).unwrap();
        let entry = &json.as_array().unwrap()[0];
        assert_eq!(entry["name"], name.as_str());
        let beta = entry["params"].as_array().unwrap().iter().find(|p| p["name"] == "beta").unwrap();
        assert_eq!(beta["default"], "0.5");
        // A native name works the same way, and the same as in the full listing.
        assert_eq!(algorithm("reno", false).unwrap(), algorithm_text(registry::find("reno").unwrap()));
        let e = algorithm(&example("reno.py", "NoSuchClass"), false).unwrap_err().to_string();
        assert!(e.contains("NoSuchClass"), "{e}");
        assert!(algorithm("py:/nonexistent/x.py:X", false).is_err());
    }
}
