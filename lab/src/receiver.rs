//! Receiver-side programs around a scheme's flows: the Inigo receiver (specs/inigo.md §4), which
//! `ccp-agent receiver` attaches to the receiver's network device.
//!
//! The hook drives the agent's CLI, from the host (the agent finds the namespace itself):
//! ```text
//! ccp-agent receiver enable  --netns <run>-rcv --dev ccp0 [--mode mark|window] [--threshold-pct P]
//!                            [--rfd-source arrival|tsecr] [--fairness F] [--clear-ce] [args…]
//! ccp-agent receiver status  --json --netns <run>-rcv --dev ccp0     # counters, kept in run.json
//! ccp-agent receiver disable --netns <run>-rcv --dev ccp0
//! ```
//! `ccp0` is the receiver namespace's TUN device, where the emulated link delivers the data
//! ([`ccp_router::topology::TUN_NAME`]; `ccp-router` names both ends' devices so). It is enabled
//! after the emulator has created the namespaces and before any flow starts, and disabled after
//! the flows stop — by [`ReceiverHook::finish`], or by its drop on any error or interruption. If
//! the agent binary has no `receiver` subcommand (`ccp-agent receiver --help` fails), the run fails
//! at once, before any namespace exists, saying so.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;

use crate::config::ReceiverSpec;
use crate::error::{Error, Result};

/// How long one `ccp-agent receiver` command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the output of a command that exited may take to arrive.
const PIPE_GRACE: Duration = Duration::from_secs(2);
/// Bytes of a failed command's output quoted in errors.
const OUTPUT_TAIL_BYTES: usize = 1500;

/// The `receiver enable` options of a specification (without `--netns`/`--dev`).
pub fn enable_args(spec: &ReceiverSpec) -> Vec<String> {
    let ReceiverSpec::Inigo { mode, threshold_pct, rfd_source, fairness, clear_ce, args } = spec;
    let mut v = Vec::new();
    let mut opt = |flag: &str, value: Option<String>| {
        if let Some(x) = value {
            v.push(flag.to_string());
            v.push(x);
        }
    };
    opt("--mode", mode.clone());
    opt("--threshold-pct", threshold_pct.map(|t| t.to_string()));
    opt("--rfd-source", rfd_source.clone());
    opt("--fairness", fairness.map(|f| f.to_string()));
    if *clear_ce {
        v.push("--clear-ce".into());
    }
    v.extend(args.iter().cloned());
    v
}

/// A one-line description for the scheme's description.
pub fn describe(spec: &ReceiverSpec) -> String {
    let args = enable_args(spec);
    if args.is_empty() {
        "inigo receiver".into()
    } else {
        format!("inigo receiver {}", args.join(" "))
    }
}

/// What run.json records about the receiver.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReceiverRecord {
    /// The `enable` command line.
    pub enable: String,
    /// `receiver status --json` after the flows (the agent's counters), as it printed them.
    pub status: Option<serde_json::Value>,
    /// Why the status could not be read, if it could not.
    pub status_error: Option<String>,
    /// Why `disable` failed, if it did (the namespace's deletion removes the device anyway).
    pub disable_error: Option<String>,
}

/// Reads a pipe to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut s);
        }
        let _ = tx.send(s);
    });
    rx
}

/// Runs `cmd` with a timeout; returns (success, stdout, stderr).
fn run(mut cmd: Command, timeout: Duration) -> Result<(bool, String, String)> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let shown = format!("{cmd:?}");
    let mut child = cmd.spawn().map_err(|e| Error::io(format!("starting {shown}"), e))?;
    let pid = child.id();
    // Readers on their own threads, so a chatty command cannot fill a pipe and block.
    let (out_t, err_t) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(timeout) {
        Ok(s) => s.map_err(|e| Error::io(format!("waiting for {shown}"), e))?,
        Err(_) => {
            if let Ok(p) = libc::pid_t::try_from(pid) {
                // SAFETY: signalling our own child by pid (not yet reaped: its waiter is blocked).
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            return Err(Error::Run(format!("{shown} did not finish within {timeout:?} (killed)")));
        }
    };
    // A daemon the command left behind may hold the pipes open: take what came by then.
    let stdout = out_t.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let stderr = err_t.recv_timeout(PIPE_GRACE).unwrap_or_default();
    Ok((status.success(), stdout, stderr))
}

fn tail(s: &str) -> &str {
    let s = s.trim();
    let start = s.len().saturating_sub(OUTPUT_TAIL_BYTES);
    let start = (start..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
    &s[start..]
}

/// Fails unless `binary` has the `receiver` subcommand.
pub fn check_available(binary: &Path) -> Result<()> {
    if !binary.is_file() {
        return Err(Error::Unavailable(format!(
            "the scheme's receiver needs ccp-agent, and {} was not found: build it (`cargo build --release -p ccp-agent`) \
             or give [agent] binary / --agent",
            binary.display()
        )));
    }
    let mut cmd = Command::new(binary);
    cmd.args(["receiver", "--help"]);
    let (ok, out, err) = run(cmd, COMMAND_TIMEOUT)?;
    if !ok {
        return Err(Error::Unavailable(format!(
            "the scheme's receiver needs `ccp-agent receiver` (the Inigo receiver), but {} has no `receiver` subcommand \
             (`ccp-agent receiver --help` failed): build an agent that has it, or drop `receiver` from the scheme. Its output:\n{}",
            binary.display(),
            tail(if err.trim().is_empty() { &out } else { &err })
        )));
    }
    Ok(())
}

/// An enabled receiver; disabled by [`ReceiverHook::finish`] or on drop.
#[derive(Debug)]
pub struct ReceiverHook {
    binary: PathBuf,
    netns: String,
    dev: String,
    enabled: bool,
    pub record: ReceiverRecord,
}

impl ReceiverHook {
    /// `ccp-agent receiver enable --netns NS --dev DEV …`; fails with the agent's message.
    pub fn enable(binary: &Path, netns: &str, dev: &str, spec: &ReceiverSpec) -> Result<ReceiverHook> {
        let mut cmd = Command::new(binary);
        cmd.args(["receiver", "enable", "--netns", netns, "--dev", dev]).args(enable_args(spec));
        let line = format!("{} receiver enable --netns {netns} --dev {dev} {}", binary.display(), enable_args(spec).join(" "))
            .trim_end()
            .to_string();
        let hook = ReceiverHook {
            binary: binary.to_path_buf(),
            netns: netns.to_string(),
            dev: dev.to_string(),
            // Disable even after a failed enable: it may have attached part of its programs.
            enabled: true,
            record: ReceiverRecord { enable: line.clone(), ..ReceiverRecord::default() },
        };
        let (ok, out, err) = run(cmd, COMMAND_TIMEOUT)?;
        if !ok {
            return Err(Error::Run(format!("`{line}` failed:\n{}", tail(if err.trim().is_empty() { &out } else { &err }))));
        }
        Ok(hook)
    }

    fn command(&self, sub: &str, json: bool) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.args(["receiver", sub]);
        if json {
            cmd.arg("--json");
        }
        cmd.args(["--netns", &self.netns, "--dev", &self.dev]);
        cmd
    }

    /// Reads the counters (`status --json`) and disables the receiver; returns what to record.
    /// Neither failing fails the run: the flows are over, and the record says what went wrong.
    pub fn finish(mut self) -> ReceiverRecord {
        match run(self.command("status", true), COMMAND_TIMEOUT) {
            Ok((true, out, _)) => match serde_json::from_str(out.trim()) {
                Ok(v) => self.record.status = Some(v),
                Err(e) => {
                    self.record.status_error = Some(format!("`receiver status --json` printed no JSON ({e}): {}", tail(&out)))
                }
            },
            Ok((false, out, err)) => {
                self.record.status_error =
                    Some(format!("`receiver status --json` failed: {}", tail(if err.is_empty() { &out } else { &err })));
            }
            Err(e) => self.record.status_error = Some(e.to_string()),
        }
        self.record.disable_error = self.disable().err();
        std::mem::take(&mut self.record)
    }

    fn disable(&mut self) -> std::result::Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        self.enabled = false;
        match run(self.command("disable", false), COMMAND_TIMEOUT) {
            Ok((true, ..)) => Ok(()),
            Ok((false, out, err)) => {
                Err(format!("`receiver disable` failed: {}", tail(if err.is_empty() { &out } else { &err })))
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Drop for ReceiverHook {
    fn drop(&mut self) {
        if let Err(e) = self.disable() {
            eprintln!("ccp-lab: disabling the receiver on {} in {}: {e}", self.dev, self.netns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inigo(mode: Option<&str>, clear_ce: bool) -> ReceiverSpec {
        ReceiverSpec::Inigo {
            mode: mode.map(str::to_string),
            threshold_pct: Some(17),
            rfd_source: Some("arrival".into()),
            fairness: None,
            clear_ce,
            args: vec!["--verbose".into()],
        }
    }

    #[test]
    fn enable_arguments() {
        assert_eq!(
            enable_args(&inigo(Some("mark"), true)),
            ["--mode", "mark", "--threshold-pct", "17", "--rfd-source", "arrival", "--clear-ce", "--verbose"]
        );
        let bare = ReceiverSpec::Inigo {
            mode: None,
            threshold_pct: None,
            rfd_source: None,
            fairness: Some(10),
            clear_ce: false,
            args: vec![],
        };
        assert_eq!(enable_args(&bare), ["--fairness", "10"]);
        assert!(describe(&bare).starts_with("inigo receiver --fairness 10"));
    }

    /// A stand-in agent script in a scratch directory.
    fn fake_agent(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("ccp-agent");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::process::Command::new("chmod").arg("+x").arg(&p).status().unwrap();
        p
    }

    #[test]
    fn an_agent_without_the_subcommand_is_refused_clearly() {
        let dir = std::env::temp_dir().join(format!("ccplab-rcv-{}-a", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = fake_agent(&dir, "echo \"error: unrecognized subcommand '$1'\" >&2; exit 2");
        let e = check_available(&old).unwrap_err().to_string();
        assert!(e.contains("no `receiver` subcommand") && e.contains("unrecognized subcommand 'receiver'"), "{e}");
        let e = check_available(&dir.join("nope")).unwrap_err().to_string();
        assert!(e.contains("not found"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn enable_status_disable_are_called_in_order() {
        let dir = std::env::temp_dir().join(format!("ccplab-rcv-{}-b", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let calls = dir.join("calls");
        let agent = fake_agent(
            &dir,
            &format!(
                "echo \"$*\" >> {}\ncase \"$2\" in status) echo '{{\"late_pkts\": 3, \"marked\": 2}}';; esac\nexit 0",
                calls.display()
            ),
        );
        check_available(&agent).unwrap();
        let hook = ReceiverHook::enable(&agent, "ns-rcv", "ccp0", &inigo(Some("window"), false)).unwrap();
        let rec = hook.finish();
        assert_eq!(rec.status.as_ref().unwrap()["late_pkts"], 3, "{rec:?}");
        assert_eq!((rec.status_error.as_deref(), rec.disable_error.as_deref()), (None, None));
        assert!(
            rec.enable.ends_with(
                "receiver enable --netns ns-rcv --dev ccp0 --mode window --threshold-pct 17 --rfd-source arrival --verbose"
            ),
            "{}",
            rec.enable
        );
        let log = std::fs::read_to_string(&calls).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(
            lines,
            [
                "receiver --help",
                "receiver enable --netns ns-rcv --dev ccp0 --mode window --threshold-pct 17 --rfd-source arrival --verbose",
                "receiver status --json --netns ns-rcv --dev ccp0",
                "receiver disable --netns ns-rcv --dev ccp0",
            ]
        );
        // Dropped without finish (an error path): still disabled, once.
        std::fs::remove_file(&calls).unwrap();
        drop(ReceiverHook::enable(&agent, "ns-rcv", "ccp0", &inigo(None, false)).unwrap());
        let log = std::fs::read_to_string(&calls).unwrap();
        assert_eq!(log.lines().filter(|l| l.starts_with("receiver disable")).count(), 1, "{log}");
        // A failing enable reports the agent's words, and still disables what it may have done.
        std::fs::remove_file(&calls).unwrap();
        let failing = fake_agent(
            &dir,
            &format!(
                "echo \"$*\" >> {}\n[ \"$2\" = enable ] && {{ echo 'no such device ccp0' >&2; exit 1; }}\nexit 0",
                calls.display()
            ),
        );
        let e = ReceiverHook::enable(&failing, "ns-rcv", "ccp0", &inigo(None, false)).unwrap_err().to_string();
        assert!(e.contains("no such device ccp0"), "{e}");
        let log = std::fs::read_to_string(&calls).unwrap();
        assert!(log.contains("receiver disable"), "{log}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
