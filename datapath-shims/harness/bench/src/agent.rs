//! `ccp-agent` on the eBPF datapath as the benchmarks run it: one algorithm for every flow (Reno
//! unless a benchmark says otherwise), under the benchmark's own congestion control name and pin directory, with its configuration, control
//! socket and attach state in a directory of its own, so it never meets a real agent's.

use std::path::Path;
use std::process::Command;

use crate::process::Proc;

pub struct EbpfAgent {
    // Dropped in this order: the agent stops before its directory goes.
    proc: Proc,
    _dir: tempfile::TempDir,
}

impl EbpfAgent {
    /// Starts `bin` registering congestion control `cc`, pinned at `pin_dir`, with `ebpf` as
    /// further `[datapath.ebpf]` lines, and waits until the congestion control is registered.
    pub fn start(bin: &Path, cc: &str, pin_dir: &Path, ebpf: &str) -> anyhow::Result<EbpfAgent> {
        EbpfAgent::start_running(bin, cc, pin_dir, ebpf, "reno")
    }

    /// As [`EbpfAgent::start`], every flow on `algorithm`.
    pub fn start_running(bin: &Path, cc: &str, pin_dir: &Path, ebpf: &str, algorithm: &str) -> anyhow::Result<EbpfAgent> {
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "[control]\nsocket = \"{}\"\n[datapath]\nkind = \"ebpf\"\n[datapath.ebpf]\nname = \"{cc}\"\n\
                 pin_dir = \"{}\"\nstate_file = \"{}\"\n{ebpf}\n[default]\nalgorithm = \"{algorithm}\"\n",
                dir.path().join("ctl.sock").display(),
                pin_dir.display(),
                dir.path().join("attach.json").display()
            ),
        )?;
        let mut cmd = Command::new(bin);
        cmd.args(["--log-level", "info", "run", "-c"]).arg(&config);
        let mut proc = Proc::spawn(cmd, "the agent")?;
        proc.wait_log("ebpf congestion control registered")?;
        Ok(EbpfAgent { proc, _dir: dir })
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    pub fn log(&self) -> String {
        self.proc.log()
    }

    /// Its control socket.
    pub fn control_socket(&self) -> std::path::PathBuf {
        self._dir.path().join("ctl.sock")
    }

    /// `ctl status --summary`: the agent's status without its per-flow rows.
    pub fn status_summary(&self) -> anyhow::Result<serde_json::Value> {
        use std::io::{BufRead, Write};
        let mut s = std::os::unix::net::UnixStream::connect(self.control_socket())?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        s.write_all(b"{\"cmd\":\"status\",\"summary\":true}\n")?;
        let mut line = String::new();
        std::io::BufReader::new(s).read_line(&mut line)?;
        Ok(serde_json::from_str(&line)?)
    }

    /// Stops it cleanly (it detaches and unpins what it installed); its whole log.
    pub fn stop(self) -> anyhow::Result<String> {
        self.proc.stop()
    }
}
