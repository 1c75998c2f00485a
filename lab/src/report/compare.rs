//! The comparison: runs grouped by link (one link × scenario with the same RTT and buffer is one
//! group, whichever directory its runs came from), each scheme's median and range per metric
//! over its successful runs, its rank on the link, and the spread ellipse of its runs on the
//! throughput–delay plane.
//!
//! Rank: by Kleinrock's power, median throughput ÷ (propagation RTT + median queueing delay) —
//! more throughput for less delay ranks higher; schemes without a successful run are unranked.

use std::collections::BTreeMap;

use super::results::{Extra, Results, Run, Setup};
use crate::output::Spread;

/// One scheme on one link.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemeRow {
    /// The scheme as the report names it (suffixed `@experiment` when two directories hold
    /// different schemes of one name).
    pub name: String,
    /// Its colour, the same in every figure.
    pub color: usize,
    /// Indices into [`Results::runs`].
    pub runs: Vec<usize>,
    pub ok: usize,
    pub throughput: Option<Spread>,
    pub utilisation: Option<Spread>,
    pub delay: Option<Spread>,
    pub delay_p50: Option<Spread>,
    pub extras: Vec<(Extra, Spread)>,
    pub power: Option<f64>,
    pub rank: Option<usize>,
    /// Runs the emulator limited, with why.
    pub limited: Vec<(u32, String)>,
    pub failures: Vec<(u32, String)>,
    pub description: String,
    pub command: Option<String>,
}

/// One link × scenario and its schemes.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub link: String,
    pub scenario: String,
    pub setup: Setup,
    pub rows: Vec<SchemeRow>,
    /// The extra metrics any of its runs has, in [`Extra::ALL`] order.
    pub extras: Vec<Extra>,
    /// The delay percentile its runs report (95, or 99 for simulated runs).
    pub delay_percentile: u8,
    /// The link's mean capacity over its runs, Mbit/s.
    pub capacity_mbps: Option<f64>,
}

impl Group {
    /// A file-name-safe identifier.
    pub fn slug(&self) -> String {
        let raw = if self.scenario == "solo" { self.link.clone() } else { format!("{}-{}", self.link, self.scenario) };
        slug(&raw)
    }

    pub fn title(&self) -> String {
        if self.scenario == "solo" {
            self.link.clone()
        } else {
            format!("{} · {}", self.link, self.scenario)
        }
    }

    /// RTT and buffer in words.
    pub fn path_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(r) = self.setup.rtt_ms {
            parts.push(format!("RTT {r} ms"));
        }
        if let Some(b) = self.setup.buffer_pkts {
            parts.push(format!("buffer {b} packets"));
        }
        if !self.setup.link_source.is_empty() {
            parts.push(self.setup.link_source.clone());
        }
        parts.join(", ")
    }
}

/// Letters, digits, '-', '_' and '.', the rest as '-'.
pub fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect()
}

/// The scheme names the report uses, per run: the name, unless directories disagree on what
/// it means (then `name@experiment`).
fn display_names(r: &Results) -> Vec<String> {
    let mut meanings: BTreeMap<&str, Vec<(&str, usize)>> = BTreeMap::new();
    for run in &r.runs {
        let m = meanings.entry(run.scheme.as_str()).or_default();
        if !m.iter().any(|&(d, s)| d == run.description && s == run.source) {
            m.push((&run.description, run.source));
        }
    }
    r.runs
        .iter()
        .map(|run| {
            let m = &meanings[run.scheme.as_str()];
            let sources: Vec<usize> = m.iter().map(|x| x.1).collect();
            let descriptions: Vec<&str> = m.iter().map(|x| x.0).filter(|d| !d.is_empty()).collect();
            let differ = descriptions.windows(2).any(|w| w[0] != w[1]);
            if differ && sources.iter().any(|&s| s != run.source) {
                format!("{}@{}", run.scheme, r.sources[run.source].name)
            } else {
                run.scheme.clone()
            }
        })
        .collect()
}

/// Groups the runs and summarises every scheme of every group.
pub fn compare(r: &Results) -> Vec<Group> {
    let names = display_names(r);
    let mut colors: Vec<&str> = Vec::new();
    for n in &names {
        if !colors.contains(&n.as_str()) {
            colors.push(n);
        }
    }
    let key = |x: &Run| (x.link.clone(), x.scenario.clone(), x.setup.rtt_ms.map(f64::to_bits), x.setup.buffer_pkts);
    let mut keys = Vec::new();
    for run in &r.runs {
        if !keys.contains(&key(run)) {
            keys.push(key(run));
        }
    }
    keys.into_iter()
        .map(|k| {
            let members: Vec<usize> = (0..r.runs.len()).filter(|&i| key(&r.runs[i]) == k).collect();
            let first = &r.runs[members[0]];
            let mut schemes: Vec<&str> = Vec::new();
            for &i in &members {
                if !schemes.contains(&names[i].as_str()) {
                    schemes.push(&names[i]);
                }
            }
            let mut rows: Vec<SchemeRow> = schemes
                .iter()
                .map(|s| {
                    let runs: Vec<usize> = members.iter().copied().filter(|&i| names[i] == *s).collect();
                    let color = colors.iter().position(|c| c == s).unwrap_or(0);
                    scheme_row(r, s, color, runs)
                })
                .collect();
            rank(&mut rows, first.setup.rtt_ms.unwrap_or(0.0));
            let extras = Extra::ALL.into_iter().filter(|e| members.iter().any(|&i| r.runs[i].extra(*e).is_some())).collect();
            let ok: Vec<&Run> = members.iter().map(|&i| &r.runs[i]).filter(|x| x.ok).collect();
            Group {
                link: first.link.clone(),
                scenario: first.scenario.clone(),
                setup: members
                    .iter()
                    .map(|&i| &r.runs[i].setup)
                    .find(|s| !s.link_source.is_empty())
                    .unwrap_or(&first.setup)
                    .clone(),
                rows,
                extras,
                delay_percentile: ok.iter().map(|x| x.delay_percentile).max().unwrap_or(first.delay_percentile),
                capacity_mbps: Spread::of(ok.iter().map(|x| x.capacity_mbps)).map(|s| s.median),
            }
        })
        .collect()
}

fn scheme_row(r: &Results, name: &str, color: usize, runs: Vec<usize>) -> SchemeRow {
    let all: Vec<&Run> = runs.iter().map(|&i| &r.runs[i]).collect();
    let ok: Vec<&Run> = all.iter().copied().filter(|x| x.ok).collect();
    let spread = |g: fn(&Run) -> Option<f64>| Spread::of(ok.iter().map(|x| g(x)));
    let extras = Extra::ALL.into_iter().filter_map(|e| Spread::of(ok.iter().map(|x| x.extra(e))).map(|s| (e, s))).collect();
    let representative = ok.first().or(all.first());
    SchemeRow {
        name: name.to_string(),
        color,
        ok: ok.len(),
        throughput: spread(|x| x.throughput_mbps),
        utilisation: spread(|x| x.utilisation),
        delay: spread(|x| x.delay_ms),
        delay_p50: spread(|x| x.delay_p50_ms),
        extras,
        power: None,
        rank: None,
        limited: all.iter().filter(|x| !x.limited.is_empty()).map(|x| (x.repetition, x.limited.join("; "))).collect(),
        failures: all.iter().filter(|x| !x.ok).map(|x| (x.repetition, x.error.clone().unwrap_or_default())).collect(),
        description: representative.map(|x| x.description.clone()).unwrap_or_default(),
        command: representative.and_then(|x| x.command.clone()),
        runs,
    }
}

/// Ranks by power, 1 = best; ties share the better rank's order of appearance.
fn rank(rows: &mut [SchemeRow], rtt_ms: f64) {
    for row in rows.iter_mut() {
        row.power = match (row.throughput, row.delay) {
            (Some(t), Some(d)) if rtt_ms + d.median > 0.0 => Some(t.median / (rtt_ms + d.median)),
            (Some(t), Some(_)) => Some(t.median / 1e-3),
            _ => None,
        };
    }
    let mut order: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].power.is_some()).collect();
    order.sort_by(|&a, &b| rows[b].power.unwrap_or(0.0).total_cmp(&rows[a].power.unwrap_or(0.0)));
    for (k, i) in order.into_iter().enumerate() {
        rows[i].rank = Some(k + 1);
    }
}

/// The 1-σ ellipse of points (x, y) (x already on the axis's scale, e.g. log10 of a delay):
/// `steps` points around it, from the points' mean and covariance; none for fewer than three
/// points.
pub fn ellipse(points: &[(f64, f64)], steps: usize) -> Option<Vec<(f64, f64)>> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let (mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0);
    for &(x, y) in points {
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
        sxy += (x - mx) * (y - my);
    }
    let (sxx, syy, sxy) = (sxx / (n - 1.0), syy / (n - 1.0), sxy / (n - 1.0));
    // Eigenvalues of the symmetric 2×2 covariance, and the first one's direction.
    let tr = sxx + syy;
    let det = sxx * syy - sxy * sxy;
    let disc = (tr * tr / 4.0 - det).max(0.0).sqrt();
    let (l1, l2) = (tr / 2.0 + disc, (tr / 2.0 - disc).max(0.0));
    let angle = if sxy.abs() > 1e-300 {
        (l1 - sxx).atan2(sxy)
    } else if sxx >= syy {
        0.0
    } else {
        std::f64::consts::FRAC_PI_2
    };
    let (c, s) = (angle.cos(), angle.sin());
    let (a, b) = (l1.sqrt(), l2.sqrt());
    if !(a.is_finite() && b.is_finite()) {
        return None;
    }
    Some(
        (0..=steps)
            .map(|k| {
                let t = k as f64 / steps as f64 * std::f64::consts::TAU;
                let (u, v) = (a * t.cos(), b * t.sin());
                (mx + u * c - v * s, my + u * s + v * c)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ellipse_of_an_axis_aligned_cloud() {
        let pts = [(-1.0, 0.0), (1.0, 0.0), (0.0, -0.5), (0.0, 0.5)];
        let e = ellipse(&pts, 4).unwrap();
        // Variance 2/3 along x, 1/6 along y: half-axes 0.816 and 0.408.
        let (a, b) = ((2.0f64 / 3.0).sqrt(), (1.0f64 / 6.0).sqrt());
        assert!((e[0].0 - a).abs() < 1e-9 && e[0].1.abs() < 1e-9, "{e:?}");
        assert!(e[1].0.abs() < 1e-9 && (e[1].1 - b).abs() < 1e-9, "{e:?}");
        assert!(ellipse(&pts[..2], 4).is_none());
        // A diagonal line: the long axis along (1, 1).
        let d = ellipse(&[(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)], 8).unwrap();
        assert!((d[0].0 - d[0].1).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn ranks_by_power() {
        let row = |t: f64, d: f64| SchemeRow {
            name: String::new(),
            color: 0,
            runs: vec![],
            ok: 1,
            throughput: Some(Spread { median: t, min: t, max: t }),
            utilisation: None,
            delay: Some(Spread { median: d, min: d, max: d }),
            delay_p50: None,
            extras: vec![],
            power: None,
            rank: None,
            limited: vec![],
            failures: vec![],
            description: String::new(),
            command: None,
        };
        let mut rows = vec![row(10.0, 100.0), row(9.0, 10.0), SchemeRow { throughput: None, ..row(1.0, 1.0) }];
        rank(&mut rows, 100.0);
        assert_eq!(rows.iter().map(|r| r.rank).collect::<Vec<_>>(), vec![Some(2), Some(1), None]);
    }
}
