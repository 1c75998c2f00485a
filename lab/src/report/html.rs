//! The page: one self-contained HTML file — inline CSS, the figures as inline SVG, no script,
//! no font, image or style sheet from anywhere else — that opens offline in any browser.
//!
//! Top to bottom: where the results came from, what is missing, an overview (every scheme on
//! every link: median throughput, median delay and rank), then per link its calibration, the
//! throughput–delay plane, the comparison table (failed runs and runs the emulator limited in
//! red) and one run's time series per scheme.

use std::fmt::Write as _;

use super::compare::Group;
use super::figures::css_color;
use super::results::{Calibration, Origin, Results};
use super::{text, GroupFigures};

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; margin: 0 auto; max-width: 1400px; padding: 0 1.5em 3em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
.meta, .setup { color: #555; font-size: 0.92em; }
nav { font-size: 0.92em; margin: 0.8em 0; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.55em; text-align: right; vertical-align: top; }
th { background: #f3f3f3; }
td.name, th.name, td.text { text-align: left; }
td.name { white-space: nowrap; }
td.text { max-width: 28em; color: #444; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border-radius: 50%; margin-right: 0.35em; vertical-align: -0.1em; }
.bad, td.bad { color: #b00000; font-weight: bold; }
tr.calibration td { background: #f7f7f2; text-align: left; }
tr.calibration.bad td { background: #fde8e8; }
tr.failed td { background: #fff0f0; }
.calib-none { color: #777; }
.problems { border: 2px solid #c00; background: #fff6f6; padding: 0.4em 1em; }
.problems li { margin: 0.2em 0; }
figure { margin: 0.6em 0; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85em; color: #555; max-width: 60em; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); gap: 1em; }
.grid figure { border: 1px solid #eee; padding: 0.3em; }
td.cmd { min-width: 24em; }
.wide { overflow-x: auto; }
code { font-size: 0.85em; background: #f4f4f4; padding: 0.05em 0.3em; word-break: break-all; }
details summary { cursor: pointer; color: #245; }
.note { color: #777; font-size: 0.85em; }
"#;

/// The calibration of a group's link, from the directory its runs came from when it has one.
fn calibration_of<'a>(r: &'a Results, g: &Group) -> Option<&'a Calibration> {
    let sources: Vec<usize> = g.rows.iter().flat_map(|x| x.runs.iter().map(|&i| r.runs[i].source)).collect();
    r.calibrations.iter().filter(|c| c.link == g.link).max_by_key(|c| (sources.contains(&c.source), c.ok))
}

/// The whole page.
pub fn page(r: &Results, groups: &[Group], figures: &[GroupFigures], generated: &str, figures_dir: &str) -> String {
    let mut h = String::new();
    let names: Vec<&str> = r.sources.iter().map(|s| s.name.as_str()).collect();
    let title = format!("ccp-lab report: {}", if names.is_empty() { "no results".to_string() } else { names.join(", ") });
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(&title)
    );
    let _ = writeln!(h, "<h1>{}</h1>", escape(&title));
    let runs_total = r.runs.len();
    let runs_ok = r.runs.iter().filter(|x| x.ok).count();
    let _ = writeln!(
        h,
        "<p class=\"meta\">{} link(s), {} scheme(s), {runs_ok} of {runs_total} run(s) succeeded; generated {}. \
         Figures as SVG and PNG files: <code>{}</code>.</p>",
        groups.len(),
        distinct_schemes(groups),
        escape(generated),
        escape(figures_dir)
    );
    sources(&mut h, r);
    problems(&mut h, r);
    if !groups.is_empty() {
        let _ = write!(h, "<nav>Links: ");
        for (g, f) in groups.iter().zip(figures) {
            let _ = write!(h, "<a href=\"#{}\">{}</a>", escape(&f.anchor), escape(&g.title()));
        }
        let _ = writeln!(h, "</nav>");
        overview(&mut h, groups, figures);
    }
    for (g, f) in groups.iter().zip(figures) {
        group(&mut h, r, g, f);
    }
    h.push_str(
        "<h2 id=\"definitions\">Definitions</h2>\n<p class=\"note\">Throughput: the scheme's flows together over the \
         measurement window (warm-up excluded), wire bytes. Queueing delay: per packet, dequeue − arrival at the \
         bottleneck, one way (no propagation); its 95th percentile over the window (ccp-sim: 99th). Utilisation: bytes \
         delivered / bytes the link offered. Rank: by power, median throughput ÷ (propagation RTT + median queueing \
         delay). Ellipse: the runs' 1-σ spread on the plot's scales. A run is limited by the emulator when its \
         packets left it more than 10 ms late at p99 or it failed to write any; the calibration is a fixed-rate pipe at \
         the link's peak (over the experiment's sample interval), filled with UDP at 105 % of it, before the link's \
         first run.</p>\n",
    );
    h.push_str("</body>\n</html>\n");
    h
}

fn distinct_schemes(groups: &[Group]) -> usize {
    let mut v: Vec<&str> = groups.iter().flat_map(|g| g.rows.iter().map(|x| x.name.as_str())).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

fn sources(h: &mut String, r: &Results) {
    let _ = writeln!(h, "<table class=\"sources\"><tr><th class=\"name\">results</th><th class=\"name\">kind</th><th class=\"name\">directory</th><th class=\"name\">description</th></tr>");
    for s in &r.sources {
        let _ = writeln!(
            h,
            "<tr><td class=\"name\">{}</td><td class=\"name\">{}</td><td class=\"text\"><code>{}</code></td><td class=\"text\">{}</td></tr>",
            escape(&s.name),
            s.kind,
            escape(&s.dir.display().to_string()),
            escape(s.description.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(h, "</table>");
}

fn problems(h: &mut String, r: &Results) {
    if r.problems.is_empty() {
        return;
    }
    let _ = writeln!(h, "<section class=\"problems\" id=\"problems\"><h2>Missing or damaged ({})</h2><ul>", r.problems.len());
    for p in &r.problems {
        let _ = writeln!(h, "<li><code>{}</code>: {}</li>", escape(&p.path.display().to_string()), escape(&p.what));
    }
    let _ = writeln!(h, "</ul></section>");
}

/// Every scheme on every link: median throughput · median delay, and the rank.
fn overview(h: &mut String, groups: &[Group], figures: &[GroupFigures]) {
    let mut schemes: Vec<(&str, usize)> = Vec::new();
    for g in groups {
        for row in &g.rows {
            if !schemes.iter().any(|s| s.0 == row.name) {
                schemes.push((&row.name, row.color));
            }
        }
    }
    let _ = writeln!(
        h,
        "<h2 id=\"overview\">Overview</h2>\n<p class=\"note\">Per link: median throughput (Mbit/s) · median queueing delay \
         (ms), and the rank on that link (#1 = most power).</p>\n<table class=\"overview\"><tr><th class=\"name\">scheme</th>"
    );
    for (g, f) in groups.iter().zip(figures) {
        let _ = write!(h, "<th><a href=\"#{}\">{}</a></th>", escape(&f.anchor), escape(&g.title()));
    }
    let _ = writeln!(h, "</tr>");
    for (name, color) in schemes {
        let _ = write!(
            h,
            "<tr><td class=\"name\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>",
            css_color(color),
            escape(name)
        );
        for g in groups {
            match g.rows.iter().find(|x| x.name == name) {
                None => h.push_str("<td></td>"),
                Some(row) => {
                    let cell = match (row.throughput, row.delay) {
                        (Some(t), Some(d)) => format!("{} · {}", text::mbps(t.median), text::ms(d.median)),
                        _ => "no result".into(),
                    };
                    let rank = row.rank.map_or_else(String::new, |k| format!(" (#{k})"));
                    let class = if row.ok == 0 || !row.limited.is_empty() { " class=\"bad\"" } else { "" };
                    let _ = write!(h, "<td{class}>{}{rank}</td>", escape(&cell));
                }
            }
        }
        let _ = writeln!(h, "</tr>");
    }
    let _ = writeln!(h, "</table>");
}

fn group(h: &mut String, r: &Results, g: &Group, f: &GroupFigures) {
    let runs: usize = g.rows.iter().map(|x| x.runs.len()).sum();
    let _ = writeln!(h, "<section class=\"link\" id=\"{}\">\n<h2>{}</h2>", escape(&f.anchor), escape(&g.title()));
    let _ = writeln!(h, "<p class=\"setup\">{}; {} scheme(s), {runs} run(s).</p>", escape(&g.path_text()), g.rows.len());
    match &f.pantheon {
        Ok(svg) => {
            let _ = writeln!(
                h,
                "<figure class=\"pantheon\">{svg}<figcaption>Throughput against the {}th percentile of the one-way \
                 queueing delay (log scale, lower delay to the right): a small dot per run, a large one at the \
                 scheme's medians, the runs' 1-σ ellipse; red crosses mark runs the emulator limited. Files: \
                 <code>{}</code>, <code>{}</code>.</figcaption></figure>",
                g.delay_percentile,
                escape(&f.files[0]),
                escape(&f.files[1])
            );
        }
        Err(e) => {
            let _ = writeln!(h, "<p class=\"bad\">No throughput–delay plot: {}</p>", escape(e));
        }
    }
    table(h, r, g);
    let failures: Vec<String> =
        g.rows.iter().flat_map(|row| row.failures.iter().map(move |(rep, e)| format!("{} #{rep}: {e}", row.name))).collect();
    if !failures.is_empty() {
        let _ = writeln!(h, "<p class=\"bad\">Failed runs:</p><ul class=\"bad\">");
        for x in failures {
            let _ = writeln!(h, "<li>{}</li>", escape(&x));
        }
        let _ = writeln!(h, "</ul>");
    }
    let _ = writeln!(h, "<details open><summary>Time series, one run per scheme (the run nearest the scheme's median throughput)</summary><div class=\"grid\">");
    for (row, s) in g.rows.iter().zip(&f.series) {
        match s {
            Ok((svg, caption)) => {
                let _ = writeln!(h, "<figure class=\"series\">{svg}<figcaption>{}</figcaption></figure>", escape(caption));
            }
            Err(e) => {
                let _ = writeln!(
                    h,
                    "<figure class=\"series missing\"><figcaption class=\"bad\">{}: no time series — {}</figcaption></figure>",
                    escape(&row.name),
                    escape(e)
                );
            }
        }
    }
    let _ = writeln!(h, "</div></details>\n</section>");
}

fn table(h: &mut String, r: &Results, g: &Group) {
    let p = g.delay_percentile;
    let mut head = vec![
        "rank".to_string(),
        "scheme".into(),
        "runs ok".into(),
        "throughput Mbit/s".into(),
        "utilisation %".into(),
        format!("p{p} queueing delay ms"),
        "p50 queueing delay ms".into(),
    ];
    head.extend(g.extras.iter().map(|e| e.label().to_string()));
    head.extend(["emulator".to_string(), "parameters".into(), "reproduce".into()]);
    let _ = write!(h, "<div class=\"wide\"><table class=\"summary\"><tr>");
    for (i, c) in head.iter().enumerate() {
        let class = if i == 1 || i + 2 >= head.len() { " class=\"name\"" } else { "" };
        let _ = write!(h, "<th{class}>{}</th>", escape(c));
    }
    let _ = writeln!(h, "</tr>");
    let simulated = g.rows.iter().flat_map(|x| &x.runs).all(|&i| r.runs[i].origin == Origin::Sim);
    let (calib, bad) = if simulated {
        ("simulated link: no emulator to calibrate".to_string(), None)
    } else {
        text::calibration(calibration_of(r, g))
    };
    let class = match bad {
        Some(true) => "calibration bad",
        Some(false) => "calibration",
        None => "calibration calib-none",
    };
    let _ = writeln!(h, "<tr class=\"{class}\"><td colspan=\"{}\">{}</td></tr>", head.len(), escape(&calib));
    for row in &g.rows {
        let total = row.runs.len();
        let failed = total - row.ok;
        let tr = if row.ok == 0 { " class=\"failed\"" } else { "" };
        let _ = write!(h, "<tr{tr}>");
        let _ = write!(h, "<td>{}</td>", row.rank.map_or_else(|| "–".into(), |k| k.to_string()));
        let _ = write!(
            h,
            "<td class=\"name\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>",
            css_color(row.color),
            escape(&row.name)
        );
        let runs_class = if failed > 0 { " class=\"bad\"" } else { "" };
        let _ = write!(h, "<td{runs_class}>{} / {total}</td>", row.ok);
        let cells = [
            text::spread(row.throughput, text::mbps),
            text::spread(row.utilisation, text::pct),
            text::spread(row.delay, text::ms),
            text::spread(row.delay_p50, text::ms),
        ];
        for c in cells {
            let _ = write!(h, "<td>{}</td>", escape(&c));
        }
        for e in &g.extras {
            let s = row.extras.iter().find(|(k, _)| k == e).map(|x| x.1);
            let _ = write!(h, "<td>{}</td>", escape(&text::extra(*e, s)));
        }
        if row.limited.is_empty() {
            let _ = write!(h, "<td class=\"name\">{}</td>", if row.ok > 0 { "ok" } else { "–" });
        } else {
            let why: Vec<String> = row.limited.iter().map(|(rep, w)| format!("#{rep}: {w}")).collect();
            let _ = write!(
                h,
                "<td class=\"name bad\" title=\"{}\">{} of {total} run(s) limited by the emulator<br><span class=\"note\">{}</span></td>",
                escape(&why.join("\n")),
                row.limited.len(),
                escape(&why.join("; "))
            );
        }
        let _ = write!(h, "<td class=\"text\">{}</td>", escape(&row.description));
        match &row.command {
            Some(c) => {
                let _ = write!(h, "<td class=\"text cmd\"><code>{}</code></td>", escape(c));
            }
            None => h.push_str("<td class=\"text\">–</td>"),
        }
        let _ = writeln!(h, "</tr>");
    }
    let _ = writeln!(h, "</table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
