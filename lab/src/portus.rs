//! The processes of a `portus:<binary>` scheme: an unmodified portus agent (an anchor such as
//! the Nimbus authors' `nimbus`, portus 0.8, or the CCP authors' `bbr`, portus 0.6, built by
//! scripts/anchors.sh) and `ccp-libccp-shim run`, which registers a struct_ops congestion
//! control under the run's unique name and relays its flows to the agent through the real
//! libccp. Both start before any flow and are stopped (by pid) after the last.
//!
//! The IPC directory is the run's own. Both portus versions bind `/tmp/ccp/portus`, hard-coded
//! (`ipc::unix::Socket::__new`), and reply to the datapath's address as libccp gives it: 0.6
//! joins it to `/tmp/ccp/`, 0.8 uses it as given, i.e. relative to its working directory. So
//! the agent runs in a private mount namespace (`unshare --mount --propagation private`) in
//! which the run's directory is bind-mounted on `/tmp/ccp`, with `/tmp/ccp` as its working
//! directory, and the shim (`--ipc-dir` that directory, `--bind relative`, its socket
//! `ccp-ebpf`) is reached the same way by both. Two runs, or a run and a test, never share a
//! socket. The directory lives under the temporary directory, not the run directory, because a
//! unix socket's path is limited to 107 bytes.
//!
//! Readiness: the agent's socket exists, then the shim's congestion control is registered
//! (`tcp_available_congestion_control`, as for ccp-agent); either process exiting, or the
//! timeout, fails the run with the log's tail. Logs stay in the run directory:
//! `portus-shim.log` and `portus-<binary>.log` (RUST_LOG `info,ccp_nimbus=debug`: the Nimbus
//! authors' mode switches are debug lines, [`crate::metrics::nimbus_log`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::{cc_registered, log_tail, owned_by_runner, stop_child};
use crate::config::SchemeSpec;
use crate::error::{Error, Result};

/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(50);
/// Placeholders a portus argument may hold ([`expand_args`]).
pub const PLACEHOLDERS: [&str; 1] = ["{link_bytes_per_s}"];
/// The anchor whose log [`crate::metrics::nimbus_log`] reads, and the state it gives.
pub const NIMBUS: &str = "nimbus";
const NIMBUS_STATE: &str = "mode";
/// What the agent logs: info everywhere, and the Nimbus authors' debug lines (mode switches and
/// per-report rates).
const AGENT_LOG_FILTER: &str = "info,ccp_nimbus=debug";

/// Checks a `portus:<binary>` name: a file name in the binaries' directory.
pub fn check_binary_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("portus:{name:?}: name a binary of [portus] bin_dir (letters, digits, '_', '-', '.'), e.g. portus:nimbus"))
    }
}

/// The rules of a portus scheme beyond its name: its arguments, and classification only where
/// the lab can read the mode out of the log (the Nimbus authors' `nimbus`, state `mode`).
pub fn validate_scheme(key: &str, binary: &str, s: &SchemeSpec) -> std::result::Result<(), (String, String)> {
    for a in &s.portus_args {
        if a == "--ipc" || a.starts_with("--ipc=") {
            return Err((
                format!("{key}.portus_args"),
                "the lab gives the IPC (`--ipc unix` in a run-private directory): leave --ipc out".into(),
            ));
        }
        let mut rest = a.as_str();
        while let Some(i) = rest.find('{') {
            let tail = &rest[i..];
            let name = tail.find('}').map_or(tail, |j| &tail[..=j]);
            if !PLACEHOLDERS.contains(&name) {
                return Err((
                    format!("{key}.portus_args"),
                    format!("unknown placeholder {name:?} (known: {})", PLACEHOLDERS.join(", ")),
                ));
            }
            rest = &tail[name.len()..];
        }
    }
    if let Some(c) = &s.classify {
        if binary != NIMBUS || c.state != NIMBUS_STATE {
            return Err((
                format!("{key}.classify"),
                format!(
                    "a portus scheme's classification is read from its log, which the lab can do for portus:{NIMBUS} \
                     with state = \"{NIMBUS_STATE}\" (0 = competitive, 1 = delay) only"
                ),
            ));
        }
    }
    Ok(())
}

/// Portus arguments with the placeholders replaced (`link_rate_bps`: the link's mean rate).
pub fn expand_args(args: &[String], link_rate_bps: f64) -> Vec<String> {
    let bytes = format!("{}", (link_rate_bps / 8.0).round());
    args.iter().map(|a| a.replace(PLACEHOLDERS[0], &bytes)).collect()
}

/// The default directory of the portus binaries: `CCP_ANCHORS_BIN_DIR`, else
/// `$CCP_ANCHORS_CACHE/bin`, else ~/.cache/ccp-agent/anchors/bin (scripts/anchors.sh).
pub fn default_bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CCP_ANCHORS_BIN_DIR") {
        return PathBuf::from(d);
    }
    if let Some(c) = std::env::var_os("CCP_ANCHORS_CACHE") {
        return PathBuf::from(c).join("bin");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/ccp-agent/anchors/bin")
}

/// How to start one portus scheme.
#[derive(Debug, Clone)]
pub struct PortusLaunch {
    pub shim: PathBuf,
    /// The portus binary.
    pub binary: PathBuf,
    pub args: Vec<String>,
    /// The congestion control the shim registers and the flows select.
    pub cc_name: String,
    pub ready_timeout: Duration,
    /// Where both logs go.
    pub run_dir: PathBuf,
}

/// A running portus scheme.
#[derive(Debug)]
pub struct Portus {
    agent: Option<Child>,
    shim: Option<Child>,
    ipc_dir: PathBuf,
    pin_dir: PathBuf,
    pub agent_log: PathBuf,
    pub shim_log: PathBuf,
    /// CLOCK_MONOTONIC ns when it started.
    pub started_ns: u64,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns, when it started (the agent logs wall-clock times).
    pub wall_minus_mono_ns: i128,
    name: String,
}

fn realtime_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128)
}

fn log_file(path: &Path) -> Result<(Stdio, Stdio)> {
    let f = std::fs::File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    let f2 = f.try_clone().map_err(|e| Error::io(format!("dup of {}", path.display()), e))?;
    Ok((f.into(), f2.into()))
}

/// A fresh directory only root can enter, for the run's sockets.
fn private_dir(cc_name: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("ccp-lab-portus-{cc_name}"));
    if dir.exists() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    Ok(dir)
}

impl Portus {
    /// Starts the agent, then the shim, and waits until the shim's congestion control is
    /// registered.
    pub fn start(l: &PortusLaunch) -> Result<Portus> {
        let name = l.binary.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for (what, path, how) in [
            ("portus binary", &l.binary, "build it with scripts/anchors.sh or give [portus] bin_dir / CCP_ANCHORS_BIN_DIR"),
            ("ccp-libccp-shim binary", &l.shim, "build it (`cargo build --release -p ccp-ebpf-libccp`) or give [portus] shim"),
        ] {
            if !path.is_file() {
                return Err(Error::Unavailable(format!("{what} {} not found: {how}", path.display())));
            }
        }
        if cc_registered(&l.cc_name) {
            return Err(Error::Unavailable(format!(
                "the `{}` congestion control is already registered by another process: stop it first, so that this \
                 run's flows are driven by this run's portus agent",
                l.cc_name
            )));
        }
        let ipc_dir = private_dir(&l.cc_name)?;
        let mut p = Portus {
            agent: None,
            shim: None,
            pin_dir: PathBuf::from(format!("/sys/fs/bpf/{}", l.cc_name)),
            agent_log: l.run_dir.join(format!("portus-{name}.log")),
            shim_log: l.run_dir.join("portus-shim.log"),
            started_ns: ccp_router::clock::now(),
            wall_minus_mono_ns: 0,
            ipc_dir,
            name,
        };
        // Sampled together: the agent's log times are wall-clock.
        p.wall_minus_mono_ns = realtime_ns() - i128::from(ccp_router::clock::now());
        p.agent = Some(p.spawn_agent(l)?);
        let socket = p.ipc_dir.join("portus");
        p.wait(l, "its socket", || socket.exists())?;
        p.shim = Some(p.spawn_shim(l)?);
        let cc = l.cc_name.clone();
        p.wait(l, &format!("the `{cc}` congestion control"), || cc_registered(&cc))?;
        Ok(p)
    }

    fn spawn_agent(&self, l: &PortusLaunch) -> Result<Child> {
        let script =
            "dir=$1; bin=$2; shift 2; mkdir -p /tmp/ccp && mount --bind \"$dir\" /tmp/ccp && cd /tmp/ccp && exec \"$bin\" \"$@\"";
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]);
        cmd.arg(&self.ipc_dir).arg(&l.binary).args(["--ipc", "unix"]).args(&l.args);
        cmd.env("RUST_LOG", AGENT_LOG_FILTER).env("NO_COLOR", "1");
        let (out, err) = log_file(&self.agent_log)?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        owned_by_runner(&mut cmd);
        cmd.spawn().map_err(|e| Error::io(format!("starting {} under unshare (util-linux)", l.binary.display()), e))
    }

    fn spawn_shim(&self, l: &PortusLaunch) -> Result<Child> {
        let mut cmd = Command::new(&l.shim);
        cmd.args(["--log-level", "info", "run", "--name", &l.cc_name, "--bind", "relative", "--ipc-dir"]);
        cmd.arg(&self.ipc_dir).arg("--pin-dir").arg(&self.pin_dir);
        cmd.arg("--state-file").arg(l.run_dir.join("portus-shim-attach.json"));
        let (out, err) = log_file(&self.shim_log)?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        owned_by_runner(&mut cmd);
        cmd.spawn().map_err(|e| Error::io(format!("starting {}", l.shim.display()), e))
    }

    /// Polls `ready` until it holds; fails (stopping both) if a process exits, on the timeout
    /// or on Ctrl-C.
    fn wait(&mut self, l: &PortusLaunch, what: &str, ready: impl Fn() -> bool) -> Result<()> {
        let deadline = Instant::now() + l.ready_timeout;
        loop {
            if ready() {
                return Ok(());
            }
            if let Err(e) = self.check_alive() {
                self.stop();
                return Err(Error::Unavailable(format!("portus {}: waiting for {what}: {e}", self.name)));
            }
            if Instant::now() >= deadline || crate::cancel::requested() {
                self.stop();
                if crate::cancel::requested() {
                    return Err(Error::Interrupted);
                }
                return Err(Error::Unavailable(format!(
                    "portus {}: no {what} {:.0} s after starting it (IPC directory {}). Agent log ({}):\n{}\nShim log ({}):\n{}",
                    self.name,
                    l.ready_timeout.as_secs_f64(),
                    self.ipc_dir.display(),
                    self.agent_log.display(),
                    log_tail(&self.agent_log),
                    self.shim_log.display(),
                    log_tail(&self.shim_log)
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Fails if the agent or the shim has exited (the flows would run on the shim's fallback, or
    /// on the kernel's default, which is not the scheme under test).
    pub fn check_alive(&mut self) -> Result<()> {
        for (child, what, log) in
            [(&mut self.agent, "the portus agent", &self.agent_log), (&mut self.shim, "ccp-libccp-shim", &self.shim_log)]
        {
            if let Some(status) = child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(Error::Run(format!("{what} exited ({status}); log ({}):\n{}", log.display(), log_tail(log))));
            }
        }
        Ok(())
    }

    /// Stops the shim, then the agent, and removes the pins and the socket directory.
    /// Idempotent.
    pub fn stop(&mut self) {
        if let Some(c) = self.shim.take() {
            stop_child(c, "ccp-libccp-shim");
        }
        if let Some(c) = self.agent.take() {
            stop_child(c, &format!("portus {}", self.name));
        }
        if let Ok(dir) = std::fs::read_dir(&self.pin_dir) {
            for e in dir.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
            let _ = std::fs::remove_dir(&self.pin_dir);
        }
        let _ = std::fs::remove_dir_all(&self.ipc_dir);
    }

    /// After [`Portus::stop`]: the mode trace of a Nimbus run, read from its log and written as
    /// an agent trace (`portus-trace.jsonl` in the run directory, CLOCK_MONOTONIC µs) for the
    /// run's classification; none for other binaries.
    pub fn trace(&self, run_dir: &Path) -> Result<Option<PathBuf>> {
        if self.name != NIMBUS {
            return Ok(None);
        }
        let log = std::fs::read_to_string(&self.agent_log)
            .map_err(|e| Error::io(format!("reading {}", self.agent_log.display()), e))?;
        let t = crate::metrics::nimbus_log::nimbus_trace(&log, self.wall_minus_mono_ns);
        if t.unreadable > 0 {
            eprintln!("ccp-lab: {}: {} Nimbus lines could not be read", self.agent_log.display(), t.unreadable);
        }
        let path = run_dir.join("portus-trace.jsonl");
        std::fs::write(&path, t.jsonl).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(Some(path))
    }
}

impl Drop for Portus {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> SchemeSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn names_args_and_classification_are_checked() {
        assert!(check_binary_name("nimbus").is_ok() && check_binary_name("bbr-0.6").is_ok());
        for bad in ["", "../nimbus", "a/b", ".hidden", "x y"] {
            assert!(check_binary_name(bad).is_err(), "{bad}");
        }
        let ok = spec("name = \"theirs\"\ncc = \"portus:nimbus\"\nportus_args = [\"--use_switching\", \"--uest\", \"{link_bytes_per_s}\"]\nclassify = { state = \"mode\", elastic_if_equals = 0 }\n");
        assert_eq!(validate_scheme("s", "nimbus", &ok), Ok(()));
        let e = validate_scheme("s", "bbr", &ok).unwrap_err();
        assert!(e.0 == "s.classify" && e.1.contains("portus:nimbus"), "{e:?}");
        let ipc = spec("name = \"t\"\ncc = \"portus:bbr\"\nportus_args = [\"--ipc\", \"netlink\"]\n");
        assert_eq!(validate_scheme("s", "bbr", &ipc).unwrap_err().0, "s.portus_args");
        let unknown = spec("name = \"t\"\ncc = \"portus:bbr\"\nportus_args = [\"--x={sender_ns}\"]\n");
        assert!(validate_scheme("s", "bbr", &unknown).unwrap_err().1.contains("{sender_ns}"));
        assert_eq!(
            expand_args(&["--uest".into(), "{link_bytes_per_s}".into()], 48e6),
            vec!["--uest".to_string(), "6000000".to_string()]
        );
    }

    #[test]
    fn experiment_files_with_portus_schemes() {
        let file = |scheme: &str| {
            format!(
                "duration_s = 20\n[network]\nrtt_ms = 20\nbuffer_bdp = 1\n[[links]]\nkind = \"fixed\"\nname = \"l\"\nrate_mbps = 48\n\
                 [[schemes]]\nname = \"s\"\n{scheme}\n"
            )
        };
        let load = |scheme: &str| crate::config::parse(Path::new("x.toml"), &file(scheme));
        let key = |scheme: &str| match load(scheme) {
            Err(Error::Config { key, message, .. }) => format!("{key}: {message}"),
            other => panic!("{other:?}"),
        };
        let l = load("cc = \"portus:nimbus\"\nportus_args = [\"--use_switching\", \"--bw_est_mode\"]\nclassify = { state = \"mode\", elastic_if_equals = 0 }").unwrap();
        let s = crate::scheme::Scheme::from_spec(&l.experiment.schemes[0]).unwrap();
        assert_eq!(s.cc, crate::scheme::Cc::Portus("nimbus".into()));
        assert_eq!(s.flow_cc("ccpl1x2", 0), "ccpl1x2", "flows select the shim's congestion control");
        assert!(s.describe().starts_with("portus nimbus --use_switching --bw_est_mode via ccp-libccp-shim"), "{}", s.describe());
        assert_eq!(l.experiment.portus.ready_timeout_s, 15.0);
        assert!(key("cc = \"portus:../bin/x\"").starts_with("schemes[0].cc: "));
        assert!(key("cc = \"portus:bbr\"\nparams = { a = 1 }").starts_with("schemes[0].params: only agent"));
        assert!(key("cc = \"kernel:bbr\"\nportus_args = [\"-v\"]").starts_with("schemes[0].portus_args: only portus"));
        assert!(
            key("cc = \"portus:bbr\"\nclassify = { state = \"mode\", elastic_if_equals = 0 }").starts_with("schemes[0].classify")
        );
        assert!(key("cc = \"portus:nimbus\"\n[portus]\nready_timeout_s = 0").starts_with("portus.ready_timeout_s"));
    }

    #[test]
    fn missing_binaries_are_reported_before_anything_starts() {
        let dir = std::env::temp_dir();
        let l = PortusLaunch {
            shim: PathBuf::from("/nonexistent/ccp-libccp-shim"),
            binary: PathBuf::from("/nonexistent/nimbus"),
            args: vec![],
            cc_name: "ccplabnone".into(),
            ready_timeout: Duration::from_millis(100),
            run_dir: dir,
        };
        let e = Portus::start(&l).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/nimbus not found") && e.contains("anchors.sh"), "{e}");
    }
}
