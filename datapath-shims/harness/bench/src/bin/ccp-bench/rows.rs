//! The rows ccp-bench prints and writes: one figure of ccp-agent (or of the shim) next to the
//! anchor it is judged against, measured in the same run, their ratio, and the target.

use serde::Serialize;

/// What a figure must reach.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Target {
    /// ratio (ccp-agent / anchor) ≥ this.
    RatioAtLeast(f64),
    /// ratio (ccp-agent / anchor) ≤ this.
    RatioAtMost(f64),
    /// The ccp-agent figure itself ≤ this (in the row's unit).
    AtMost(f64),
}

impl Target {
    fn met(self, value: f64, ratio: Option<f64>) -> Option<bool> {
        match self {
            Target::RatioAtLeast(t) => ratio.map(|r| r >= t),
            Target::RatioAtMost(t) => ratio.map(|r| r <= t),
            Target::AtMost(t) => Some(value <= t),
        }
    }

    fn show(self, unit: &str) -> String {
        match self {
            Target::RatioAtLeast(t) => format!(">= {t:.2}x"),
            Target::RatioAtMost(t) => format!("<= {t:.2}x"),
            Target::AtMost(t) => format!("<= {} {unit}", fmt_num(t)).trim_end().to_string(),
        }
    }
}

/// One printed and written figure.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// A stable name (`part.what[.configuration]`) for scripts and the CI test.
    pub key: String,
    /// What is measured, as printed.
    pub figure: String,
    pub unit: &'static str,
    /// ccp-agent's figure (the shim's in the shim part).
    pub ccp_agent: f64,
    /// The anchor's figure, measured in the same run; none for an absolute target.
    pub anchor: Option<f64>,
    /// ccp_agent / anchor.
    pub ratio: Option<f64>,
    pub target: Option<Target>,
    /// Whether the target is met; none without a target.
    pub met: Option<bool>,
}

impl Row {
    /// A figure against an anchor.
    pub fn vs(key: impl Into<String>, figure: impl Into<String>, unit: &'static str, ccp: f64, anchor: f64) -> Row {
        let ratio = (anchor > 0.0 && ccp.is_finite() && anchor.is_finite()).then(|| ccp / anchor);
        Row { key: key.into(), figure: figure.into(), unit, ccp_agent: ccp, anchor: Some(anchor), ratio, target: None, met: None }
    }

    /// A figure judged on its own.
    pub fn alone(key: impl Into<String>, figure: impl Into<String>, unit: &'static str, ccp: f64) -> Row {
        Row { key: key.into(), figure: figure.into(), unit, ccp_agent: ccp, anchor: None, ratio: None, target: None, met: None }
    }

    pub fn target(mut self, t: Target) -> Row {
        self.met = t.met(self.ccp_agent, self.ratio);
        self.target = Some(t);
        self
    }
}

/// Numbers as a table reads them: three significant digits, no exponent below 10^9.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// How a part ended.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Ran {
        rows: Vec<Row>,
        /// Notes printed under the table (what a column means here, what a run showed).
        notes: Vec<String>,
        /// Everything measured: per-run figures, the sub-benchmark's own JSON.
        raw: serde_json::Value,
        seconds: f64,
    },
    Skipped {
        reason: String,
    },
    Failed {
        error: String,
        seconds: f64,
    },
}

/// Prints one part's table (or why there is none).
pub fn print_part(title: &str, anchor: &str, outcome: &Outcome) {
    println!();
    match outcome {
        Outcome::Skipped { reason } => {
            println!("=== {title}: SKIPPED ===");
            println!("    !!! SKIPPED: {reason}");
        }
        Outcome::Failed { error, .. } => {
            println!("=== {title}: FAILED ===");
            for l in error.lines() {
                println!("    !!! {l}");
            }
        }
        Outcome::Ran { rows, notes, seconds, .. } => {
            println!("=== {title} (anchor: {anchor}; {seconds:.0} s) ===");
            print_table(rows);
            for n in notes {
                println!("  {n}");
            }
        }
    }
}

fn print_table(rows: &[Row]) {
    let header = ["figure", "ccp-agent", "anchor", "ratio", "target", "met?"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let with_unit = |v: f64| format!("{} {}", fmt_num(v), r.unit).trim_end().to_string();
            [
                r.figure.clone(),
                with_unit(r.ccp_agent),
                r.anchor.map_or("-".into(), with_unit),
                r.ratio.map_or("-".into(), |x| format!("{x:.2}x")),
                r.target.map_or("-".into(), |t| t.show(r.unit)),
                match r.met {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    let mut w = header.map(str::len);
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, v) in c.iter().enumerate() {
            let pad = w[i] - v.chars().count();
            if i == 0 {
                s.push_str(&format!("  {v}{}", " ".repeat(pad)));
            } else {
                // Figures right-aligned.
                s.push_str(&format!(" | {}{v}", " ".repeat(pad)));
            }
        }
        println!("{}", s.trim_end());
    };
    line(&header.map(String::from));
    println!("  {}", w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>().join("-+-"));
    for c in &cells {
        line(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_judged_on_the_ratio_or_the_figure() {
        let r = Row::vs("a", "a", "", 4.0, 2.0).target(Target::RatioAtLeast(2.0));
        assert_eq!((r.ratio, r.met), (Some(2.0), Some(true)));
        let r = Row::vs("a", "a", "", 1.0, 0.0).target(Target::RatioAtLeast(2.0));
        assert_eq!((r.ratio, r.met), (None, None));
        let r = Row::alone("b", "b", "ns", 81.0).target(Target::AtMost(80.0));
        assert_eq!(r.met, Some(false));
        assert_eq!(Target::AtMost(80.0).show("ns"), "<= 80.0 ns");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(0.01234), "0.012");
        assert_eq!(fmt_num(3.456), "3.46");
        assert_eq!(fmt_num(45.67), "45.7");
        assert_eq!(fmt_num(123456.7), "123457");
    }
}
