//! `ccp-agent` on the eBPF datapath as the benchmarks run it: Reno for every flow, under the
//! benchmark's own congestion control name and pin directory, with its configuration, control
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
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "[control]\nsocket = \"{}\"\n[datapath]\nkind = \"ebpf\"\n[datapath.ebpf]\nname = \"{cc}\"\n\
                 pin_dir = \"{}\"\nstate_file = \"{}\"\n{ebpf}\n[default]\nalgorithm = \"reno\"\n",
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

    /// Stops it cleanly (it detaches and unpins what it installed); its whole log.
    pub fn stop(self) -> anyhow::Result<String> {
        self.proc.stop()
    }
}
