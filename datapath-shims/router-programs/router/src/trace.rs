//! Mahimahi packet-delivery traces (format: ../shared/traces/README.md): one line per opportunity
//! to deliver one 1500-byte packet, as integer milliseconds since the start; repeated timestamps
//! mean several packets in that millisecond; the trace repeats when it ends, with a period equal to
//! its last timestamp (so a file holding just "1" is a 12 Mbit/s constant link).

use std::path::{Path, PathBuf};

use ccp_qdisc::{Nanos, MTU_BYTES, NANOS_PER_MS};

use crate::error::{Error, Result};

/// Bytes one trace line lets through.
pub const OPPORTUNITY_BYTES: u32 = MTU_BYTES;

/// A parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    path: PathBuf,
    /// Opportunity times within one period, ms, non-decreasing.
    times_ms: Vec<u64>,
    /// The repeat period, ms (the last timestamp).
    period_ms: u64,
}

impl Trace {
    /// Reads and validates a trace file; errors name the file and line.
    pub fn load(path: &Path) -> Result<Trace> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading trace {}", path.display()), e))?;
        Trace::parse(path, &text)
    }

    /// Parses trace text (`path` is only used in error messages).
    pub fn parse(path: &Path, text: &str) -> Result<Trace> {
        let err = |line: usize, message: String| Error::Trace { path: path.to_path_buf(), line, message };
        let mut times_ms = Vec::new();
        let mut last = 0u64;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let s = raw.trim();
            if s.is_empty() {
                continue;
            }
            let t: u64 = s.parse().map_err(|_| {
                err(line, format!("{s:?} is not a timestamp (expected a non-negative integer number of milliseconds)"))
            })?;
            if t < last {
                return Err(err(
                    line,
                    format!("timestamp {t} ms is before the previous line's {last} ms (times must not decrease)"),
                ));
            }
            last = t;
            times_ms.push(t);
        }
        if times_ms.is_empty() {
            return Err(err(1, "the trace has no delivery opportunities".into()));
        }
        if last == 0 {
            return Err(err(times_ms.len(), "the last timestamp must be > 0 ms: it is the period the trace repeats with".into()));
        }
        Ok(Trace { path: path.to_path_buf(), times_ms, period_ms: last })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opportunity times within one period, ms, non-decreasing.
    pub fn times_ms(&self) -> &[u64] {
        &self.times_ms
    }

    pub fn opportunities_per_period(&self) -> usize {
        self.times_ms.len()
    }

    pub fn period_ms(&self) -> u64 {
        self.period_ms
    }

    /// The mean capacity over one period, bits per second.
    pub fn mean_rate_bps(&self) -> f64 {
        self.times_ms.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0 / (self.period_ms as f64 / 1000.0)
    }

    /// A cursor over the opportunities of this trace started at `base` (monotonic ns).
    pub fn cursor(&self, base: Nanos) -> TraceCursor {
        TraceCursor { index: 0, cycle: 0, base }
    }

    /// Time of the opportunity the cursor points at.
    pub fn time_at(&self, c: &TraceCursor) -> Nanos {
        c.base + (c.cycle * self.period_ms + self.times_ms[c.index]) * NANOS_PER_MS
    }

    /// Moves the cursor to the next opportunity, wrapping to the next period.
    pub fn advance(&self, c: &mut TraceCursor) {
        c.index += 1;
        if c.index == self.times_ms.len() {
            c.index = 0;
            c.cycle += 1;
        }
    }

    /// How many opportunities precede the cursor's since its base (orders two cursors of the
    /// same trace and base).
    pub fn ordinal(&self, c: &TraceCursor) -> u64 {
        c.cycle * self.times_ms.len() as u64 + c.index as u64
    }

    /// Opportunity bytes offered in [base, base + elapsed), for capacity accounting.
    pub fn capacity_bytes(&self, elapsed: Nanos) -> u64 {
        let period = self.period_ms * NANOS_PER_MS;
        // Cycle c offers base + c·period + t for every t (t = period included), so cycles whose
        // last opportunity is before `elapsed` count whole; the last one or two count in part.
        let whole = (elapsed / period).saturating_sub(1);
        let mut count = whole * self.times_ms.len() as u64;
        let mut c = whole;
        while c * period < elapsed {
            count += self.times_ms.iter().take_while(|&&t| c * period + t * NANOS_PER_MS < elapsed).count() as u64;
            c += 1;
        }
        count * u64::from(OPPORTUNITY_BYTES)
    }
}

/// Position in a repeating trace.
#[derive(Debug, Clone)]
pub struct TraceCursor {
    index: usize,
    cycle: u64,
    base: Nanos,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Trace> {
        Trace::parse(Path::new("t.trace"), text)
    }

    #[test]
    fn constant_one_ms_is_12_mbit() {
        let t = parse("1\n").unwrap();
        assert_eq!(t.mean_rate_bps(), 12e6);
        let mut c = t.cursor(1000);
        let times: Vec<Nanos> = (0..3)
            .map(|_| {
                let x = t.time_at(&c);
                t.advance(&mut c);
                x
            })
            .collect();
        assert_eq!(times, vec![1000 + NANOS_PER_MS, 1000 + 2 * NANOS_PER_MS, 1000 + 3 * NANOS_PER_MS]);
    }

    #[test]
    fn repeats_with_the_last_timestamp_as_period() {
        let t = parse("0\n0\n5\n10\n").unwrap();
        let mut c = t.cursor(0);
        let mut ms = Vec::new();
        for _ in 0..8 {
            ms.push(t.time_at(&c) / NANOS_PER_MS);
            t.advance(&mut c);
        }
        assert_eq!(ms, vec![0, 0, 5, 10, 10, 10, 15, 20]);
        assert_eq!(t.capacity_bytes(10 * NANOS_PER_MS), 3 * 1500);
        assert_eq!(t.capacity_bytes(10 * NANOS_PER_MS + 1), 6 * 1500);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("1\n2\nabc\n").unwrap_err().to_string();
        assert!(e.starts_with("t.trace:3:"), "{e}");
        let e = parse("5\n3\n").unwrap_err().to_string();
        assert!(e.starts_with("t.trace:2:") && e.contains("decrease"), "{e}");
        assert!(parse("").unwrap_err().to_string().contains("no delivery opportunities"));
        assert!(parse("0\n0\n").unwrap_err().to_string().starts_with("t.trace:2:"));
        assert!(parse("-1\n").is_err());
        assert!(parse("1.5\n").is_err());
    }

    #[test]
    fn shipped_traces_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/traces");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("SKIP: {} not present", dir.display());
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "down" || x == "up") {
                let t = Trace::load(&p).unwrap();
                assert!(t.mean_rate_bps() > 1e5, "{}", p.display());
            }
        }
    }
}
