//! The report as a person meets it: a tiny real experiment (two schemes on two links, with the
//! emulator's calibration first) rendered into its page, the page opened offline in Debian's
//! headless Chromium; and result directories damaged the ways real ones are (a failed run, a
//! missing file, an empty CSV, a run.json cut short), which must give a page that names what is
//! missing instead of a panic.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccp_lab::report;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::Log::LogEntryLevel;
use headless_chrome::protocol::cdp::Runtime::ConsoleAPICalledEventTypeOption;
use headless_chrome::protocol::cdp::{Network, Page};
use headless_chrome::{Browser, LaunchOptions};

/// Two links × two kernel schemes, 3 s each (kernel schemes: no agent in the way).
const TINY: &str = r#"
name = "tiny"
description = "report test: kernel Cubic and Reno on 12 and 24 Mbit/s"
duration_s = 3
warmup_s = 0.5
sample_interval_ms = 100
[network]
rtt_ms = 20
buffer_pkts = 60
[[links]]
kind = "fixed"
name = "fixed-12"
rate_mbps = 12
[[links]]
kind = "fixed"
name = "fixed-24"
rate_mbps = 24
[[schemes]]
name = "cubic"
cc = "kernel:cubic"
[[schemes]]
name = "reno"
cc = "kernel:reno"
"#;

const SCHEMES: [&str; 2] = ["cubic", "reno"];
const LINKS: [&str; 2] = ["fixed-12", "fixed-24"];

/// Runs the tiny experiment with `--calibrate` into `dir/out`.
fn run_tiny(dir: &Path) -> PathBuf {
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let loaded = ccp_lab::config::load(&file).unwrap();
    let out = dir.join("out");
    let o = ccp_lab::run::RunOptions {
        out: out.clone(),
        quiet: true,
        no_plots: true,
        calibrate: true,
        ..ccp_lab::run::RunOptions::default()
    };
    let outcome = ccp_lab::run::run_experiment(&loaded, &o).unwrap();
    assert_eq!(outcome.records.len(), 4);
    assert_eq!(outcome.calibrations.len(), 2, "one calibration per link");
    for r in outcome.records.iter().chain(&outcome.calibrations) {
        assert!(r.ok, "{} on {}: {:?}", r.scheme, r.link, r.error);
    }
    out
}

/// Debian's Chromium, which scripts/setup.sh installs.
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"].iter().map(PathBuf::from).find(|p| p.is_file())
}

/// What the page reported while it loaded.
#[derive(Default)]
struct Seen {
    console_errors: Vec<String>,
    requests: Vec<String>,
}

#[test]
fn a_real_experiments_report_renders_offline_in_chromium_with_every_scheme_and_link() {
    if !common::can_run("a_real_experiments_report_renders_offline_in_chromium_with_every_scheme_and_link") {
        return;
    }
    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED a_real_experiments_report_renders_offline_in_chromium_with_every_scheme_and_link: no Chromium \
             (/usr/bin/chromium); scripts/setup.sh installs Debian's chromium"
        );
        return;
    };
    let dir = common::scratch("report-browser");
    let out = run_tiny(&dir);
    let html = out.join("report.html");
    let written = report::generate(std::slice::from_ref(&out), &html).unwrap();
    assert_eq!(written.runs, 4);
    assert_eq!(written.problems, 0, "a clean experiment has nothing missing");
    for s in SCHEMES.iter().chain(&LINKS) {
        assert!(written.table.contains(s), "the terminal's table names {s}:\n{}", written.table);
    }

    // Offline: every name resolves nowhere and any proxy is a closed port, so a page that
    // fetched anything would show a request (and a failed load) below.
    let args: Vec<&std::ffi::OsStr> = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--no-first-run"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    let browser = Browser::new(LaunchOptions {
        path: Some(chromium),
        headless: true,
        sandbox: false,
        window_size: Some((1280, 1600)),
        args,
        idle_browser_timeout: Duration::from_secs(120),
        ..LaunchOptions::default()
    })
    .expect("Chromium starts");
    let tab = browser.new_tab().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sink = Arc::clone(&seen);
    tab.add_event_listener(Arc::new(move |e: &Event| {
        let mut s = sink.lock().unwrap();
        match e {
            Event::RuntimeConsoleAPICalled(c) if c.params.Type == ConsoleAPICalledEventTypeOption::Error => {
                s.console_errors.push(format!("console.error: {:?}", c.params.args));
            }
            Event::RuntimeExceptionThrown(x) => s.console_errors.push(format!("exception: {:?}", x.params.exception_details)),
            Event::LogEntryAdded(l) if l.params.entry.level == LogEntryLevel::Error => {
                s.console_errors.push(format!("log: {}", l.params.entry.text));
            }
            Event::NetworkRequestWillBeSent(r) => s.requests.push(r.params.request.url.clone()),
            _ => {}
        }
    }))
    .unwrap();
    tab.enable_runtime().unwrap();
    tab.enable_log().unwrap();
    tab.call_method(Network::Enable {
        max_total_buffer_size: None,
        max_resource_buffer_size: None,
        max_post_data_size: None,
        report_direct_socket_traffic: None,
        enable_durable_messages: None,
    })
    .unwrap();
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    tab.navigate_to(&url).unwrap().wait_until_navigated().unwrap();

    let eval = |js: &str| tab.evaluate(js, false).unwrap().value.unwrap_or(serde_json::Value::Null);
    let text = eval("document.body.innerText").as_str().unwrap_or_default().to_string();
    for s in SCHEMES {
        assert!(text.contains(s), "the page names scheme {s}");
    }
    for l in LINKS {
        assert!(text.contains(l), "the page names link {l}");
    }
    // A section per link, each with its throughput–delay plane and a time series per scheme,
    // drawn inline (SVG with marks in it).
    assert_eq!(eval("document.querySelectorAll('section.link').length").as_u64(), Some(2));
    assert_eq!(eval("document.querySelectorAll('figure.pantheon svg').length").as_u64(), Some(2));
    assert_eq!(eval("document.querySelectorAll('figure.series svg').length").as_u64(), Some(4));
    assert_eq!(eval("document.querySelectorAll('figure.missing, .problems').length").as_u64(), Some(0));
    let drawn = eval(
        "Array.from(document.querySelectorAll('figure svg')).filter(s => s.getBBox().width > 50 && \
         s.querySelectorAll('circle, polyline, path, line').length > 0).length",
    );
    assert_eq!(drawn.as_u64(), Some(6), "every figure has a size and marks");
    let broken = eval("Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length");
    assert_eq!(broken.as_u64(), Some(0), "no broken image");
    assert!(text.contains("emulator ceiling"), "the calibration row is on the page");

    let png = tab.capture_screenshot(Page::CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
    let (colours, coloured) = screenshot_colours(&png);
    assert!(colours > 8 && coloured > 0.02, "the screenshot is not blank: {colours} colours, {coloured:.3} not white");

    let seen = seen.lock().unwrap();
    eprintln!(
        "page: {} requests ({:?}), {} console errors; screenshot {colours} colours, {:.0} % not white",
        seen.requests.len(),
        seen.requests.iter().map(|u| u.chars().take(40).collect::<String>()).collect::<Vec<_>>(),
        seen.console_errors.len(),
        coloured * 100.0
    );
    assert!(seen.console_errors.is_empty(), "console errors: {:?}", seen.console_errors);
    let external: Vec<&String> = seen
        .requests
        .iter()
        .filter(|u| !(u.starts_with("file://") || u.starts_with("data:") || u.starts_with("about:")))
        .collect();
    assert!(external.is_empty(), "external requests: {external:?}");
    assert!(seen.requests.iter().any(|u| u.starts_with("file://")), "the listener saw the page load: {:?}", seen.requests);
    drop(tab);
    drop(browser);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Distinct colours (coarsely) in a PNG and the fraction of pixels that are not white.
fn screenshot_colours(png_bytes: &[u8]) -> (usize, f64) {
    let mut reader = png::Decoder::new(png_bytes).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut coloured = 0usize;
    let n = px.len() / step;
    for p in px.chunks(step) {
        colours.insert((p[0] >> 4, p[1 % step] >> 4, p[2 % step] >> 4));
        if p[..3.min(step)].iter().any(|&c| c < 240) {
            coloured += 1;
        }
    }
    (colours.len(), coloured as f64 / n.max(1) as f64)
}

/// A real experiment's results (`TINY` run by `ccp-lab run tiny.toml --calibrate --no-plots`,
/// the page and figures left out, kept in the repository),
/// copied and then damaged.
fn fixture_copy(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-tiny");
    let dst = dir.join("tiny");
    copy_dir(&src, &dst);
    dst
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

fn page_of(dirs: &[PathBuf], out: &Path) -> (report::Written, String) {
    let html = out.join("report.html");
    let w = report::generate(dirs, &html).expect("the page is written whatever the results");
    let page = std::fs::read_to_string(&html).unwrap();
    (w, page)
}

#[test]
fn the_intact_fixture_gives_a_complete_report() {
    let dir = common::scratch("report-intact");
    let tiny = fixture_copy(&dir);
    let (w, page) = page_of(&[tiny], &dir);
    assert_eq!((w.runs, w.problems), (4, 0));
    for s in SCHEMES.iter().chain(&LINKS) {
        assert!(page.contains(s), "{s}");
    }
    assert_eq!(page.matches("<figure class=\"series\">").count(), 4);
    assert!(dir.join("report-figures").read_dir().unwrap().count() >= 12, "SVG and PNG of every figure");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_result_directories_give_a_report_that_names_what_is_missing() {
    let dir = common::scratch("report-damaged");
    let tiny = fixture_copy(&dir);
    let runs = tiny.join("runs");
    // A run.json gone (runs.csv still lists the run), another cut short mid-file, a run's time
    // series emptied, another's CSV without its header, and runs.csv marking one run failed.
    let gone = runs.join("fixed-12/solo/cubic/rep0/run.json");
    std::fs::remove_file(&gone).unwrap();
    let cut = runs.join("fixed-12/solo/reno/rep0/run.json");
    let text = std::fs::read_to_string(&cut).unwrap();
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    std::fs::write(runs.join("fixed-24/solo/cubic/rep0/link.csv"), "").unwrap();
    std::fs::write(runs.join("fixed-24/solo/reno/rep0/flows.csv"), "1.0,reno#1,3.0\n").unwrap();
    let csv = std::fs::read_to_string(tiny.join("runs.csv")).unwrap();
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let failed = lines.iter().position(|l| l.contains("fixed-24") && l.contains("reno")).unwrap();
    // Missing fields (a row cut short) must not panic either.
    lines[failed] = "fixed-24,solo,reno".into();
    std::fs::write(tiny.join("runs.csv"), lines.join("\n")).unwrap();
    // And a directory that is no result at all, and one that does not exist.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let absent = dir.join("absent");

    let (w, page) = page_of(&[tiny.clone(), empty.clone(), absent.clone()], &dir);
    assert!(w.problems >= 5, "{} problems", w.problems);
    assert!(page.contains("Missing or damaged"));
    for (path, why) in [
        (gone.display().to_string(), "missing"),
        (cut.display().to_string(), ""),
        (runs.join("fixed-24/solo/cubic/rep0/link.csv").display().to_string(), ""),
        (empty.display().to_string(), "not a ccp-lab or ccp-sim result directory"),
        (absent.display().to_string(), "not a directory"),
    ] {
        let line = page.lines().find(|l| l.contains("<li>") && l.contains(&report::html::escape(&path)));
        let line = line.unwrap_or_else(|| panic!("the page names {path}"));
        assert!(line.contains(why), "{line}");
    }
    // Every scheme and link still has its place on the page.
    for s in SCHEMES.iter().chain(&LINKS) {
        assert!(page.contains(s), "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
