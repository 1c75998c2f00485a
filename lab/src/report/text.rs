//! How the report writes numbers, spreads and calibrations in words, the same in the page and
//! in the terminal.

use super::results::{Calibration, Extra};
use crate::output::Spread;

/// A median with its range when the runs differ: "8.31 (7.90–8.62)".
pub fn spread(s: Option<Spread>, fmt: impl Fn(f64) -> String) -> String {
    match s {
        None => "–".into(),
        Some(s) if s.min == s.max => fmt(s.median),
        Some(s) => format!("{} ({}–{})", fmt(s.median), fmt(s.min), fmt(s.max)),
    }
}

pub fn mbps(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

pub fn extra(e: Extra, s: Option<Spread>) -> String {
    spread(s, |v| e.format(v))
}

/// A link's calibration in one line, and whether the emulator fell short on it.
pub fn calibration(c: Option<&Calibration>) -> (String, Option<bool>) {
    let Some(c) = c else {
        return ("emulator ceiling not measured (ccp-lab run --calibrate or --report measures it)".into(), None);
    };
    let short = c.shortfalls();
    if !c.ok {
        return (format!("emulator ceiling: {}", short.join("; ")), Some(true));
    }
    let peak = c.peak_mbps.map_or_else(|| "?".into(), mbps);
    let delivered = c.delivered_mbps.map_or_else(|| "?".into(), mbps);
    let util = c.utilisation.map_or_else(|| "?".into(), pct);
    let late = c.late_p99_ms.map_or_else(|| "?".into(), |l| format!("{l:.2}"));
    let verdict =
        if short.is_empty() { "the emulator carries the link".to_string() } else { format!("LIMITED: {}", short.join("; ")) };
    (
        format!(
            "emulator ceiling: a fixed {peak} Mbit/s pipe (the link's peak) delivered {delivered} Mbit/s ({util} %), \
             lateness p99 {late} ms, {} packets not written — {verdict}",
            c.dropped_write
        ),
        Some(!short.is_empty()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_and_numbers() {
        assert_eq!(spread(None, mbps), "–");
        assert_eq!(spread(Some(Spread { median: 8.314, min: 8.314, max: 8.314 }), mbps), "8.31");
        assert_eq!(spread(Some(Spread { median: 12.0, min: 9.5, max: 130.0 }), mbps), "12.0 (9.50–130)");
        assert_eq!(ms(0.123), "0.12");
        assert_eq!(pct(0.8766), "87.7");
    }
}
