//! The agent process of an agent scheme: `ccp-agent run --datapath ebpf --algorithm NAME
//! [-p k=v…] [--trace-flows FILE]`, started before any flow and stopped (by pid) after the last.
//! A QUIC scheme steered by the agent (`quic:NAME`) runs it on its libccp unix datapath instead
//! (`--datapath unix --ipc-dir DIR`), where the QUIC senders connect.
//!
//! Readiness is the kernel's word, not a log line: the agent's eBPF datapath registers a
//! struct_ops congestion control (`ccp`), and flows can select it only once it appears in
//! `tcp_available_congestion_control`; the unix datapath is ready when its socket exists. Until
//! then, an agent scheme fails within `ready_timeout_s` with a message saying so (or at once if
//! the agent exits), never hangs.
//!
//! The agent runs in its own process group (a Ctrl-C at the terminal reaches only the runner,
//! which stops the agent after the flows, in order) and with PR_SET_PDEATHSIG, so it cannot
//! outlive a runner that is killed.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(50);
/// How long the agent gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Bytes of the agent's log quoted in errors.
const LOG_TAIL_BYTES: usize = 1500;

/// The congestion controls registered with the kernel.
pub fn registered_ccs() -> std::collections::BTreeSet<String> {
    std::fs::read_to_string(AVAILABLE_CC).unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// Whether congestion control `name` is registered with the kernel.
pub fn cc_registered(name: &str) -> bool {
    registered_ccs().contains(name)
}

/// The last `max_bytes` of `text` (from a character boundary), trimmed.
pub(crate) fn tail(text: &str, max_bytes: usize) -> &str {
    let start = text.len().saturating_sub(max_bytes);
    let start = (start..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
    text[start..].trim()
}

/// The default agent binary: `ccp-agent` beside the running executable (target/<profile>/), or
/// one directory up when the executable is a test in target/<profile>/deps.
pub fn default_binary() -> PathBuf {
    sibling_binary("ccp-agent")
}

/// The project binary `name` beside the running executable (target/<profile>/), or one
/// directory up when the executable is a test in target/<profile>/deps.
pub fn sibling_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let here = dir.join(name);
    if here.exists() || dir.file_name().is_none_or(|n| n != "deps") {
        return here;
    }
    dir.parent().map_or(here.clone(), |p| p.join(name))
}

/// How to start one agent.
#[derive(Debug, Clone)]
pub struct AgentLaunch {
    pub binary: PathBuf,
    pub algorithm: String,
    /// `name=value` each.
    pub params: Vec<String>,
    pub extra_args: Vec<String>,
    /// The congestion control its datapath registers.
    pub cc_name: String,
    pub ready_timeout: Duration,
    /// Where the agent's stdout and stderr go.
    pub log: PathBuf,
    /// Ask for `--trace-flows FILE` (only passed if the binary has the option).
    pub trace: Option<PathBuf>,
    /// Run the libccp unix datapath with its sockets in this directory instead of the eBPF one
    /// (`cc_name` is then not registered).
    pub unix_ipc_dir: Option<PathBuf>,
}

/// What an agent is ready for: its eBPF congestion control registered, or its socket bound.
fn is_ready(l: &AgentLaunch) -> bool {
    match &l.unix_ipc_dir {
        Some(dir) => dir.join(crate::traffic::quic::AGENT_SOCKET).exists(),
        None => cc_registered(&l.cc_name),
    }
}

/// The datapath and what being ready means on it, for error messages.
fn describe_datapath(l: &AgentLaunch) -> (String, String) {
    match &l.unix_ipc_dir {
        Some(dir) => {
            ("unix".into(), format!("its socket {} is not there", dir.join(crate::traffic::quic::AGENT_SOCKET).display()))
        }
        None => ("ebpf".into(), format!("the `{}` congestion control is not registered", l.cc_name)),
    }
}

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    child: Option<Child>,
    /// The run's pin directory, removed after the agent (it only empties it when it exits
    /// cleanly).
    pin_dir: PathBuf,
    log: PathBuf,
    /// The trace file, when the agent was asked to write one.
    pub trace: Option<PathBuf>,
    /// CLOCK_MONOTONIC ns when it was started (to align a trace whose times are relative).
    pub started_ns: u64,
}

/// Whether `binary run` accepts `--trace-flows` (the lead adds it; older agents refuse
/// unknown options, so it is only passed when the help lists it).
fn supports_trace_flows(binary: &Path) -> bool {
    Command::new(binary)
        .args(["run", "--help"])
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--trace-flows"))
        .unwrap_or(false)
}

/// The last bytes of a process's log, for error messages.
pub(crate) fn log_tail(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let tail = tail(&s, LOG_TAIL_BYTES);
    if tail.is_empty() {
        "(the agent printed nothing)".into()
    } else {
        tail.to_string()
    }
}

impl Agent {
    /// Starts the agent and waits until its congestion control is registered.
    pub fn start(l: &AgentLaunch) -> Result<Agent> {
        if !l.binary.is_file() {
            return Err(Error::Unavailable(format!(
                "ccp-agent binary {} not found: build it (`cargo build --release -p ccp-agent`) or give [agent] binary / --agent",
                l.binary.display()
            )));
        }
        if l.unix_ipc_dir.is_none() && cc_registered(&l.cc_name) {
            return Err(Error::Unavailable(format!(
                "the `{}` congestion control is already registered by another process (another ccp-agent?): stop it first, \
                 so that this run's flows are driven by this run's agent",
                l.cc_name
            )));
        }
        let trace = l.trace.clone().filter(|_| supports_trace_flows(&l.binary));
        // The run's own agent config: the congestion control name, pin directory and attach
        // state are global resources, so each run gets its own (a second agent on the default
        // /sys/fs/bpf/ccp-agent would re-adopt the first one's flows); no control socket either.
        let config = l.log.with_file_name("agent.toml");
        let pin_dir = format!("/sys/fs/bpf/{}", l.cc_name);
        let (datapath, not_ready) = describe_datapath(l);
        let text = match &l.unix_ipc_dir {
            Some(_) => "# Written by ccp-lab for one run.\n[control]\nenabled = false\n".to_string(),
            None => format!(
                "# Written by ccp-lab for one run.\n[control]\nenabled = false\n\n[datapath]\nkind = \"ebpf\"\n\n\
                 [datapath.ebpf]\nname = \"{}\"\npin_dir = \"{pin_dir}\"\nstate_file = \"{}\"\n",
                l.cc_name,
                l.log.with_file_name("agent-attach.json").display()
            ),
        };
        std::fs::write(&config, text).map_err(|e| Error::io(format!("writing {}", config.display()), e))?;
        let mut cmd = Command::new(&l.binary);
        cmd.args(["run", "--datapath", &datapath, "--algorithm", &l.algorithm]);
        if let Some(dir) = &l.unix_ipc_dir {
            cmd.arg("--ipc-dir").arg(dir).args(["--ipc-name", crate::traffic::quic::AGENT_SOCKET]);
        }
        cmd.arg("--config").arg(&config);
        for p in &l.params {
            cmd.args(["-p", p]);
        }
        if let Some(t) = &trace {
            cmd.arg("--trace-flows").arg(t);
        }
        cmd.args(&l.extra_args);
        let log = std::fs::File::create(&l.log).map_err(|e| Error::io(format!("creating {}", l.log.display()), e))?;
        let log2 = log.try_clone().map_err(|e| Error::io("dup of the agent log", e))?;
        cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
        owned_by_runner(&mut cmd);
        let started_ns = ccp_router::clock::now();
        let child = cmd.spawn().map_err(|e| Error::io(format!("starting {}", l.binary.display()), e))?;
        let mut agent = Agent { child: Some(child), pin_dir: PathBuf::from(&pin_dir), log: l.log.clone(), trace, started_ns };
        let deadline = Instant::now() + l.ready_timeout;
        loop {
            if is_ready(l) {
                return Ok(agent);
            }
            if let Some(status) = agent.exited() {
                return Err(Error::Unavailable(format!(
                    "{not_ready}: `ccp-agent run --datapath {datapath} --algorithm {}` exited ({status}) \
                     before it was ready. Agent log ({}):\n{}",
                    l.algorithm,
                    l.log.display(),
                    log_tail(&l.log)
                )));
            }
            if Instant::now() >= deadline || crate::cancel::requested() {
                agent.stop();
                if crate::cancel::requested() {
                    return Err(Error::Interrupted);
                }
                return Err(Error::Unavailable(format!(
                    "{not_ready} {:.0} s after starting `ccp-agent run --datapath {datapath} \
                     --algorithm {}` (is the datapath built and loadable?). Agent log ({}):\n{}",
                    l.ready_timeout.as_secs_f64(),
                    l.algorithm,
                    l.log.display(),
                    log_tail(&l.log)
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The exit status if the agent has exited.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Fails if the agent died during the run (its flows would silently run on the datapath's
    /// fallback, which is not the scheme under test).
    pub fn check_alive(&mut self) -> Result<()> {
        match self.exited() {
            None => Ok(()),
            Some(status) => Err(Error::Run(format!(
                "ccp-agent exited during the run ({status}); log ({}):\n{}",
                self.log.display(),
                log_tail(&self.log)
            ))),
        }
    }

    /// Stops the agent: SIGTERM to its pid, SIGKILL after a grace period. Idempotent.
    pub fn stop(&mut self) {
        self.stop_process();
        if let Ok(dir) = std::fs::read_dir(&self.pin_dir) {
            for e in dir.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
            let _ = std::fs::remove_dir(&self.pin_dir);
        }
    }

    fn stop_process(&mut self) {
        if let Some(child) = self.child.take() {
            stop_child(child, "ccp-agent");
        }
    }
}

/// Makes a command's process the runner's to stop: its own process group (a Ctrl-C at the
/// terminal reaches only the runner, which stops it in order) and PR_SET_PDEATHSIG (it cannot
/// outlive a runner that is killed).
pub(crate) fn owned_by_runner(cmd: &mut Command) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// Stops a child (`what` names it in the warning): SIGTERM to its pid, SIGKILL after a grace
/// period.
pub(crate) fn stop_child(mut child: Child, what: &str) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(POLL);
    }
    eprintln!("ccp-lab: {what} (pid {}) ignored SIGTERM for {STOP_GRACE:?}; killing it", child.id());
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(binary: &Path, dir: &Path) -> AgentLaunch {
        AgentLaunch {
            binary: binary.to_path_buf(),
            algorithm: "abc".into(),
            params: vec![],
            extra_args: vec![],
            cc_name: "ccplabnone".into(),
            ready_timeout: Duration::from_millis(300),
            log: dir.join("agent.log"),
            trace: None,
            unix_ipc_dir: None,
        }
    }

    #[test]
    fn missing_binary_is_reported() {
        let dir = std::env::temp_dir();
        let e = Agent::start(&launch(Path::new("/nonexistent/ccp-agent"), &dir)).unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
    }

    #[test]
    fn an_agent_that_never_registers_times_out_with_its_log() {
        let dir = std::env::temp_dir().join(format!("ccplab-agent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A stand-in "agent" that prints and then idles without registering anything.
        let fake = dir.join("fake-agent");
        std::fs::write(&fake, "#!/bin/sh\necho fake agent says hello >&2\nexec sleep 30\n").unwrap();
        std::process::Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
        let t = Instant::now();
        let e = Agent::start(&launch(&fake, &dir)).unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
        assert!(e.contains("`ccplabnone` congestion control is not registered"), "{e}");
        assert!(e.contains("fake agent says hello"), "{e}");
        // One that exits at once is reported as such.
        std::fs::write(&fake, "#!/bin/sh\necho no ebpf here >&2\nexit 3\n").unwrap();
        let e = Agent::start(&launch(&fake, &dir)).unwrap_err().to_string();
        assert!(e.contains("exited") && e.contains("no ebpf here"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
