//! The comparison as plain text for the terminal: per link its calibration, then one line per
//! scheme (rank, runs, throughput, utilisation, delay, the link's extra metrics, flags).

use std::fmt::Write as _;

use super::compare::Group;
use super::results::{Origin, Results};
use super::text;

/// The comparison table.
pub fn table(r: &Results, groups: &[Group]) -> String {
    let mut s = String::new();
    for g in groups {
        let _ = writeln!(s, "{} — {}", g.title(), g.path_text());
        let simulated = g.rows.iter().flat_map(|x| &x.runs).all(|&i| r.runs[i].origin == Origin::Sim);
        if !simulated {
            let c = r.calibrations.iter().filter(|c| c.link == g.link).max_by_key(|c| c.ok);
            let _ = writeln!(s, "  {}", text::calibration(c).0);
        }
        let p = g.delay_percentile;
        let mut head = vec![
            format!("{:>4}", "rank"),
            format!("{:<16}", "scheme"),
            format!("{:>5}", "runs"),
            format!("{:>20}", "throughput Mbit/s"),
            format!("{:>18}", "utilisation %"),
            format!("{:>20}", format!("p{p} qdelay ms")),
        ];
        head.extend(g.extras.iter().map(|e| format!("{:>14}", e.label())));
        let _ = writeln!(s, "  {}", head.join(" "));
        for row in &g.rows {
            let mut cells = vec![
                format!("{:>4}", row.rank.map_or_else(|| "–".into(), |k| k.to_string())),
                format!("{:<16}", row.name),
                format!("{:>5}", format!("{}/{}", row.ok, row.runs.len())),
                format!("{:>20}", text::spread(row.throughput, text::mbps)),
                format!("{:>18}", text::spread(row.utilisation, text::pct)),
                format!("{:>20}", text::spread(row.delay, text::ms)),
            ];
            for e in &g.extras {
                let v = row.extras.iter().find(|(k, _)| k == e).map(|x| x.1);
                cells.push(format!("{:>14}", text::extra(*e, v)));
            }
            if !row.limited.is_empty() {
                cells.push(format!("EMULATOR-LIMITED in {} run(s)", row.limited.len()));
            }
            if row.ok < row.runs.len() {
                cells.push(format!("{} FAILED", row.runs.len() - row.ok));
            }
            let _ = writeln!(s, "  {}", cells.join(" "));
        }
    }
    if !r.problems.is_empty() {
        let _ = writeln!(s, "{} problem(s) reading the results (listed in the report):", r.problems.len());
        for p in r.problems.iter().take(10) {
            let _ = writeln!(s, "  {}: {}", p.path.display(), p.what);
        }
        if r.problems.len() > 10 {
            let _ = writeln!(s, "  …");
        }
    }
    s
}
