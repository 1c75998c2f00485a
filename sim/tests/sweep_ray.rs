//! `ccp-sim sweep --executor ray` on a Ray cluster of two nodes (one CPU each) that this test
//! starts on the loopback and stops by the process groups it started: the same sweep run on local
//! threads and on Ray gives byte-identical run directories (summary.json apart from its two
//! wall-clock fields, `wall_s` and `events_per_s`) and the same sweep.csv apart from its wall-clock
//! columns; a second Ray invocation skips every run and rebuilds the same sweep.csv; a run that
//! fails at run time is retried once by Ray, then gives the local executor's error row and a
//! non-zero exit; an unreachable address and a Python without Ray give clear errors.
//!
//! Needs CCP_SIM_PYTHON, a Python with Ray (./test.sh exports scripts/ray-venv.sh's); without it
//! the Ray tests say SKIP and pass. With it set, a cluster that does not start fails the test.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{tiny_sweep_scenario, TINY_CDF, TINY_SWEEP};

const PYTHON_ENV: &str = "CCP_SIM_PYTHON";

/// The test's files, removed when dropped: `configs/` (scenario, sweep file), `workloads/` (the CDF,
/// referenced as `../workloads/tiny.cdf`: the Ray path ships both directories), a working
/// directory per executor, Ray's temporary directory.
struct Dirs(PathBuf);

impl Dirs {
    fn new(tag: &str) -> Dirs {
        // Short: Ray's Unix sockets live under its temporary directory (108-byte path limit).
        let root = std::env::temp_dir().join(format!("ccp-ray-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in ["configs", "workloads", "local", "ray", "fail-local", "fail-ray", "t"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("configs/tiny.toml"), tiny_sweep_scenario("../workloads/tiny.cdf")).unwrap();
        std::fs::write(root.join("configs/tiny-sweep.toml"), TINY_SWEEP).unwrap();
        std::fs::write(root.join("workloads/tiny.cdf"), TINY_CDF).unwrap();
        Dirs(root)
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `ray start --block` processes this test started, each the leader of its own process group:
/// stopped by signalling those groups (never `ray stop`, which stops every Ray of the machine),
/// also when the test fails.
struct Cluster {
    nodes: Vec<Child>,
    address: String,
}

impl Cluster {
    /// A head and one worker node on 127.0.0.1, one CPU each, Ray's files under `temp`.
    fn start(python: &str, temp: &Path) -> Cluster {
        let mut cluster = Cluster { nodes: Vec::new(), address: String::new() };
        let port = free_port();
        cluster.address = format!("127.0.0.1:{port}");
        let common = || -> Vec<String> {
            vec![
                "--node-ip-address=127.0.0.1".into(),
                "--num-cpus=1".into(),
                "--object-store-memory=100000000".into(),
                "--disable-usage-stats".into(),
                // Ports Ray would otherwise take at fixed numbers, shared with any other Ray here.
                format!("--dashboard-agent-listen-port={}", free_port()),
                "--block".into(),
            ]
        };
        let head = [
            "--head".to_string(),
            format!("--port={port}"),
            format!("--ray-client-server-port={}", free_port()),
            format!("--dashboard-port={}", free_port()),
            "--include-dashboard=false".into(),
            format!("--temp-dir={}", temp.display()),
        ];
        let mut head_args: Vec<String> = head.to_vec();
        head_args.extend(common());
        cluster.spawn(python, &head_args, &temp.join("head.log"));
        cluster.wait_started(&temp.join("head.log"), "head");
        let mut worker_args = vec![format!("--address={}", cluster.address)];
        worker_args.extend(common());
        cluster.spawn(python, &worker_args, &temp.join("worker.log"));
        cluster.wait_started(&temp.join("worker.log"), "worker");
        cluster
    }

    fn spawn(&mut self, python: &str, args: &[String], log: &Path) {
        let file = std::fs::File::create(log).unwrap();
        let child = Command::new(python)
            // The `ray` command of this Python, wherever its scripts directory is.
            .args(["-c", "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()", "start"])
            .args(args)
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .env("RAY_AUTH_MODE", "disabled")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{python}: {e}"));
        self.nodes.push(child);
    }

    /// Until `ray start` says the node runs; a node that exits or takes a minute fails the test.
    fn wait_started(&mut self, log: &Path, what: &str) {
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("Ray runtime started") {
                eprintln!("sweep_ray: Ray {what} started in {:.1} s", t0.elapsed().as_secs_f64());
                return;
            }
            let node = self.nodes.last_mut().unwrap();
            if let Ok(Some(status)) = node.try_wait() {
                panic!("ray start ({what}) exited with {status}:\n{text}");
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "ray start ({what}) not up after 60 s:\n{text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Worker first, then head; TERM, a moment to exit, then KILL for what is left of each group.
        for node in self.nodes.iter_mut().rev() {
            signal_group(node.id(), "TERM");
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) && self.nodes.iter_mut().any(|n| matches!(n.try_wait(), Ok(None))) {
            std::thread::sleep(Duration::from_millis(100));
        }
        for node in self.nodes.iter_mut().rev() {
            signal_group(node.id(), "KILL");
            let _ = node.wait();
        }
    }
}

/// Sends SIG`sig` to the process group `pgid` (a group this test made).
fn signal_group(pgid: u32, sig: &str) {
    let _ =
        Command::new("kill").args(["-s", sig, "--", &format!("-{pgid}")]).stdout(Stdio::null()).stderr(Stdio::null()).status();
}

/// A TCP port free on 127.0.0.1 now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port()
}

/// The Python with Ray, or `None` after a loud SKIP.
fn ray_python(test: &str) -> Option<String> {
    match std::env::var(PYTHON_ENV) {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            eprintln!(
                "\n*** SKIP sweep_ray::{test}: {PYTHON_ENV} is not set (a Python with Ray; ./test.sh sets it from \
                 scripts/ray-venv.sh). Not tested: ccp-sim sweep --executor ray. ***\n"
            );
            None
        }
    }
}

fn ccp_sim(cwd: &Path, args: &[&str]) -> Output {
    // Ray's token authentication turns itself on where ~/.ray/auth_token exists (a local ray.init()
    // writes one); the test's cluster and drivers do without, whatever this machine has.
    let o = Command::new(env!("CARGO_BIN_EXE_ccp-sim"))
        .current_dir(cwd)
        .args(args)
        .env("RAY_AUTH_MODE", "disabled")
        .output()
        .unwrap();
    eprintln!("$ ccp-sim {}\n{}{}", args.join(" "), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    o
}

/// Every file under `dir` but OUT's own (sweep.csv, ray.log): relative path → contents.
fn run_files(out: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, files);
            } else if p.parent() != Some(root) {
                let mut bytes = Vec::new();
                std::fs::File::open(&p).unwrap().read_to_end(&mut bytes).unwrap();
                files.insert(p.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(out, out, &mut files);
    files
}

/// summary.json without the fields that measure the machine (wall time, events per second).
fn without_wall_clock(bytes: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let m = v.as_object_mut().unwrap();
    assert!(m.remove("wall_s").is_some() && m.remove("events_per_s").is_some());
    v
}

/// sweep.csv with the wall-clock columns (wall_s, events_per_s) blanked.
fn csv_without_wall_clock(text: &str) -> Vec<String> {
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let wall = [header.iter().position(|c| *c == "wall_s").unwrap(), header.iter().position(|c| *c == "events_per_s").unwrap()];
    text.lines()
        .map(|l| {
            // Error rows end in a quoted field that may hold commas; the wall columns come before it.
            let mut fields: Vec<&str> = l.splitn(header.len(), ',').collect();
            for &w in &wall {
                if w < fields.len() {
                    fields[w] = "";
                }
            }
            fields.join(",")
        })
        .collect()
}

#[test]
fn ray_sweep_matches_local_and_resumes() {
    let Some(python) = ray_python("ray_sweep_matches_local_and_resumes") else { return };
    let t0 = Instant::now();
    let dirs = Dirs::new("sweep");
    let root = &dirs.0;

    // An address nobody listens on: a clear error, before Ray is involved any further.
    let closed = format!("127.0.0.1:{}", free_port());
    let o = ccp_sim(root, &["sweep", "configs/tiny-sweep.toml", "--out", "closed", "--executor", "ray", "--address", &closed]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains(&format!("cannot reach Ray at {closed}")), "{err}");
    assert!(!err.contains("Traceback"), "{err}");

    let cluster = Cluster::start(&python, &root.join("t"));
    let started = t0.elapsed();
    let sweep = ["sweep", "../configs/tiny-sweep.toml", "--out", "out"];

    let o = ccp_sim(&root.join("local"), &[&sweep[..], &["--executor", "local", "--quiet"]].concat());
    assert!(o.status.success());
    let ray_args = [&sweep[..], &["--executor", "ray", "--address", &cluster.address, "--python", &python]].concat();
    let o = ccp_sim(&root.join("ray"), &ray_args);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{said}{}", String::from_utf8_lossy(&o.stderr));
    assert!(said.contains("connected to Ray 2.60.0 at") && said.contains("2 nodes, 2 CPUs"), "{said}");
    assert!(said.contains("4 runs (0 failed)"), "{said}");

    // Every run's files are the local executor's, byte for byte, but for summary.json's wall-clock
    // fields (wall_s, events_per_s), compared apart: everything else in it exactly.
    let (local, ray) = (run_files(&root.join("local/out")), run_files(&root.join("ray/out")));
    assert_eq!(local.keys().collect::<Vec<_>>(), ray.keys().collect::<Vec<_>>());
    assert_eq!(local.len(), 4 * 8, "4 runs × (summary.json, 5 CSV files, overrides.txt, done)");
    for (path, bytes) in &local {
        if path.file_name().unwrap() == "summary.json" {
            assert_eq!(without_wall_clock(bytes), without_wall_clock(&ray[path]), "{}", path.display());
        } else {
            assert!(*bytes == ray[path], "{} differs", path.display());
        }
    }
    let local_csv = std::fs::read_to_string(root.join("local/out/sweep.csv")).unwrap();
    let ray_csv = std::fs::read_to_string(root.join("ray/out/sweep.csv")).unwrap();
    assert_eq!(csv_without_wall_clock(&local_csv), csv_without_wall_clock(&ray_csv));
    assert_eq!(ray_csv.lines().count(), 1 + 4 * 3, "a row per run and bucket");

    // Again: every run is complete; nothing reaches Ray, and sweep.csv comes back from the runs'
    // files exactly, wall-clock columns included.
    let done_before = std::fs::metadata(root.join("ray/out/dctcp/load30/done")).unwrap().modified().unwrap();
    let o = ccp_sim(&root.join("ray"), &ray_args);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && said.contains("4 of 4 runs already complete"), "{said}");
    assert!(said.contains("4 skipped as complete, 0 failed") && !said.contains("connected to Ray"), "{said}");
    assert_eq!(std::fs::read_to_string(root.join("ray/out/sweep.csv")).unwrap(), ray_csv);
    assert_eq!(std::fs::metadata(root.join("ray/out/dctcp/load30/done")).unwrap().modified().unwrap(), done_before);

    // A run killed half-way (no `done`, a truncated file): only it runs again, to the same files.
    let partial = root.join("ray/out/reno-droptail/load60");
    std::fs::remove_file(partial.join("done")).unwrap();
    std::fs::write(partial.join("flows.csv"), "id,cl").unwrap();
    let o = ccp_sim(&root.join("ray"), &ray_args);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && said.contains("3 of 4 runs already complete"), "{said}");
    assert!(
        run_files(&root.join("ray/out"))[Path::new("reno-droptail/load60/flows.csv")]
            == local[Path::new("reno-droptail/load60/flows.csv")]
    );
    assert_eq!(
        csv_without_wall_clock(&std::fs::read_to_string(root.join("ray/out/sweep.csv")).unwrap()),
        csv_without_wall_clock(&local_csv)
    );

    // A run that fails when it runs (not when it is planned: the monitored port is looked up in
    // the built topology) is retried once by Ray, then gives the local executor's error row; the
    // other run is unaffected; the command fails. A worker binary that logs its calls counts them.
    let real = env!("CARGO_BIN_EXE_ccp-sim");
    let calls = root.join("calls.log");
    let wrapper = root.join("ccp-sim-logged");
    std::fs::write(&wrapper, format!("#!/bin/sh\necho \"$*\" >> '{}'\nexec '{real}' \"$@\"\n", calls.display())).unwrap();
    std::process::Command::new("chmod").arg("755").arg(&wrapper).status().unwrap();
    let fail = [
        "sweep",
        "../configs/tiny.toml",
        "--out",
        "out",
        "--loads",
        "30",
        "--variant",
        "ok=seed=4",
        "--variant",
        "bad=output.monitor=[\"nope\"]",
        "--quiet",
    ];
    let lo = ccp_sim(&root.join("fail-local"), &fail);
    let wrapper_arg = wrapper.display().to_string();
    let ro = ccp_sim(
        &root.join("fail-ray"),
        &[&fail[..], &["--executor", "ray", "--address", &cluster.address, "--worker-binary", &wrapper_arg]].concat(),
    );
    for o in [&lo, &ro] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("1 of 2 runs failed"), "{err}");
        assert!(err.contains("variant `bad`, load 30 %: output.monitor: no port named \"nope\""), "{err}");
        assert!(!err.contains("Traceback"), "{err}");
    }
    let lcsv = std::fs::read_to_string(root.join("fail-local/out/sweep.csv")).unwrap();
    let rcsv = std::fs::read_to_string(root.join("fail-ray/out/sweep.csv")).unwrap();
    assert_eq!(csv_without_wall_clock(&lcsv), csv_without_wall_clock(&rcsv));
    let bad: Vec<&str> = rcsv.lines().filter(|l| l.starts_with("bad,")).collect();
    assert_eq!(bad, lcsv.lines().filter(|l| l.starts_with("bad,")).collect::<Vec<_>>(), "the same error row");
    assert_eq!(bad.len(), 1);
    let calls = std::fs::read_to_string(&calls).unwrap();
    let runs_of = |set: &str| calls.lines().filter(|l| l.contains(set)).count();
    assert_eq!((runs_of("output.monitor"), runs_of("seed=4")), (2, 1), "the failing run ran twice:\n{calls}");
    assert!(!root.join("fail-ray/out/bad/load30/done").exists());

    drop(cluster);
    eprintln!("sweep_ray: {:.1} s in all, {:.1} s of it starting Ray", t0.elapsed().as_secs_f64(), started.as_secs_f64());
}

#[test]
fn a_python_without_ray_is_named_with_the_fix() {
    let dirs = Dirs::new("noray");
    let root = &dirs.0;
    // A Python that cannot import ray whatever is installed: python3 without site-packages.
    let Ok(o) = Command::new("python3").args(["-S", "-c", "pass"]).output() else {
        eprintln!("\n*** SKIP sweep_ray::a_python_without_ray_is_named_with_the_fix: no python3 on PATH ***\n");
        return;
    };
    assert!(o.status.success());
    let python = root.join("python-without-ray");
    std::fs::write(&python, "#!/bin/sh\nexec python3 -S \"$@\"\n").unwrap();
    Command::new("chmod").arg("755").arg(&python).status().unwrap();
    let python = python.display().to_string();
    let o = ccp_sim(root, &["sweep", "configs/tiny-sweep.toml", "--out", "out", "--executor", "ray", "--python", &python]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("cannot import ray (ModuleNotFoundError: No module named 'ray')"), "{err}");
    assert!(err.contains("scripts/ray-venv.sh") && err.contains("ray[client]==2.60.0"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
    assert!(!root.join("out/sweep.csv").exists());

    let o = ccp_sim(
        root,
        &["sweep", "configs/tiny-sweep.toml", "--out", "out", "--executor", "ray", "--python", "/nonexistent/python"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("cannot run /nonexistent/python (--python, or CCP_SIM_PYTHON)"), "{err}");

    // Options of the other executor.
    let o = ccp_sim(root, &["sweep", "configs/tiny-sweep.toml", "--out", "out", "--address", "x:1"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--address and --worker-binary are for --executor ray"));
    let o = ccp_sim(root, &["sweep", "configs/tiny-sweep.toml", "--out", "out", "--executor", "ray", "--jobs", "2"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--jobs is for --executor local"));
}

/// The driver writes the files a worker returns into the run's directory; a name that would land
/// outside it (a worker is another machine) is refused, not written. Needs only Python, not Ray.
#[test]
fn the_driver_refuses_worker_file_names_outside_the_run() {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("ray/ccp_sim_ray.py");
    let check = r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("driver", sys.argv[1])
d = importlib.util.module_from_spec(spec)
spec.loader.exec_module(d)
assert d.inside("/run", "summary.json") == "/run/summary.json"
assert d.inside("/run", "plots/q.png") == "/run/plots/q.png"
for bad in ["../x", "/etc/passwd", "a/../../x", "..", "."]:
    try:
        d.inside("/run", bad)
    except ValueError:
        continue
    sys.exit(f"not refused: {bad!r}")
"#;
    let out = Command::new("python3").arg("-c").arg(check).arg(&driver).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
