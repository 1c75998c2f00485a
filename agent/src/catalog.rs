//! The algorithm catalogue as users see it: `ccp-agent algorithms` and `ccp-agent ctl algorithms`.

use std::fmt::Write as _;

use ccp_algorithms::registry;
use ccp_contract::ParamKind;

/// Every algorithm with its parameters, as JSON.
pub fn algorithms_json() -> serde_json::Value {
    registry::all()
        .iter()
        .map(|a| {
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
        })
        .collect()
}

/// Every algorithm with its parameters, as text.
pub fn algorithms_text() -> String {
    let mut out = String::new();
    for a in registry::all() {
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
    }
    out
}
