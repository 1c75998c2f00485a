//! The systemd unit's system call filter, outside systemd.
//!
//! The e2e tests cannot start `packaging/ccp-agent.service` (PID 1 need not be systemd where they
//! run), so `ccp-unit-seccomp` loads the same filter into itself and executes the agent. What
//! systemd does with the unit's directives (systemd.exec(5)), and so what this does:
//! - `SystemCallFilter=` without `~` is an allow-list: the named calls and groups, groups expanded
//!   as `systemd-analyze syscall-filter` lists them (the tables systemd compiles in), plus
//!   `@default`, which systemd adds to every allow-list;
//! - names are resolved by libseccomp for the native architecture, as systemd does (it links the
//!   same library); a name this architecture does not have (`mmap2`, `socketcall`) is skipped;
//! - every other call fails with `SystemCallErrorNumber=`, or kills the process without it;
//! - `SystemCallArchitectures=native`: calls through another ABI kill the process;
//! - `NoNewPrivileges=yes`: set before the filter (which lets an unprivileged process load it).
//!
//! The unit's other seccomp-based directives (`RestrictAddressFamilies=`, `RestrictNamespaces=`,
//! `MemoryDenyWriteExecute=`, ...) are not modelled here.

use std::collections::{BTreeMap, BTreeSet};

use libseccomp::{ScmpAction, ScmpFilterContext, ScmpSyscall};

/// systemd's named groups of system calls: `@name` → its entries (calls and other `@groups`).
#[derive(Debug, Default)]
pub struct Groups(BTreeMap<String, Vec<String>>);

impl Groups {
    /// The groups of the systemd on this machine (`systemd-analyze syscall-filter`).
    pub fn of_this_machine() -> Result<Groups, String> {
        let out = std::process::Command::new("systemd-analyze")
            .args(["syscall-filter", "--no-pager"])
            .output()
            .map_err(|e| format!("systemd-analyze (package systemd, scripts/setup.sh): {e}"))?;
        if !out.status.success() {
            return Err(format!("systemd-analyze syscall-filter: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(Groups::parse(&String::from_utf8_lossy(&out.stdout)))
    }

    /// `systemd-analyze syscall-filter`'s listing: a `@group` line, then its entries indented,
    /// `#` lines being comments.
    pub fn parse(listing: &str) -> Groups {
        let mut groups = BTreeMap::new();
        let mut current: Option<&mut Vec<String>> = None;
        for line in listing.lines() {
            let entry = line.trim();
            if line.starts_with('@') {
                current = Some(groups.entry(entry.to_string()).or_default());
            } else if !line.starts_with(' ') || entry.is_empty() {
                current = None;
            } else if !entry.starts_with('#') {
                if let Some(entries) = current.as_mut() {
                    entries.push(entry.to_string());
                }
            }
        }
        Groups(groups)
    }

    /// The calls `entry` names: itself, or every call of its group, recursively.
    fn expand(&self, entry: &str, out: &mut BTreeSet<String>) -> Result<(), String> {
        if !entry.starts_with('@') {
            out.insert(entry.to_string());
            return Ok(());
        }
        let entries = self.0.get(entry).ok_or_else(|| format!("systemd here knows no group {entry}"))?;
        for e in entries {
            self.expand(e, out)?;
        }
        Ok(())
    }
}

/// The seccomp filter a unit's directives make (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFilter {
    /// The `SystemCallFilter=` entries as written, for messages.
    pub written: Vec<String>,
    /// Every call allowed, groups expanded.
    pub allowed: BTreeSet<String>,
    /// What a call outside the list gets: `Some(errno)`, or `None` (the process is killed).
    pub errno: Option<i32>,
    pub no_new_privileges: bool,
}

/// The errno names this knows (systemd takes any errno name; these are the likely ones).
fn errno_named(name: &str) -> Option<i32> {
    Some(match name {
        "EPERM" => libc::EPERM,
        "EACCES" => libc::EACCES,
        "ENOSYS" => libc::ENOSYS,
        _ => name.parse().ok()?,
    })
}

impl UnitFilter {
    /// The filter of the unit text `unit` (its `[Service]` section).
    pub fn of_unit(unit: &str, groups: &Groups) -> Result<UnitFilter, String> {
        let directives = ccp_agent::install::service_directives(unit).map_err(|e| format!("{e:#}"))?;
        let values = |key: &str| -> Vec<&str> { directives.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect() };
        let mut written = Vec::new();
        for value in values("SystemCallFilter") {
            if value.trim().is_empty() {
                written.clear();
            } else if value.trim_start().starts_with('~') || value.contains(':') {
                return Err(format!("SystemCallFilter={value}: only allow-lists are modelled here"));
            } else {
                written.extend(value.split_whitespace().map(str::to_string));
            }
        }
        if written.is_empty() {
            return Err("the unit has no SystemCallFilter=".into());
        }
        if values("SystemCallArchitectures") != ["native"] {
            return Err("only SystemCallArchitectures=native is modelled here".into());
        }
        let errno = match values("SystemCallErrorNumber").last() {
            None | Some(&"kill") => None,
            Some(name) => Some(errno_named(name).ok_or_else(|| format!("SystemCallErrorNumber={name}: unknown here"))?),
        };
        let mut allowed = BTreeSet::new();
        groups.expand("@default", &mut allowed)?;
        for entry in &written {
            groups.expand(entry, &mut allowed)?;
        }
        Ok(UnitFilter { written, allowed, errno, no_new_privileges: values("NoNewPrivileges") == ["yes"] })
    }

    /// Takes `name` off the list (a negative control: the agent must then fail); an error when
    /// it was not on it.
    pub fn without(&mut self, name: &str) -> Result<(), String> {
        if self.allowed.remove(name) {
            Ok(())
        } else {
            Err(format!("{name} is not allowed by the unit's SystemCallFilter in the first place"))
        }
    }

    /// Loads the filter into this process (and what it executes from now on). Returns the number
    /// of calls allowed on this architecture.
    pub fn load(&self) -> Result<usize, String> {
        let default = self.errno.map_or(ScmpAction::KillProcess, ScmpAction::Errno);
        let err = |what: &str, e: libseccomp::error::SeccompError| format!("{what}: {e}");
        let mut ctx = ScmpFilterContext::new(default).map_err(|e| err("seccomp_init", e))?;
        ctx.set_act_badarch(ScmpAction::KillProcess).map_err(|e| err("bad-architecture action", e))?;
        ctx.set_ctl_nnp(self.no_new_privileges).map_err(|e| err("no_new_privs", e))?;
        let mut native = 0;
        for name in &self.allowed {
            let Ok(call) = ScmpSyscall::from_name(name) else {
                // systemd: "System call %s is not known, ignoring."
                continue;
            };
            match ctx.add_rule_exact(ScmpAction::Allow, call) {
                Ok(_) => native += 1,
                // Another architecture's call (a pseudo number here): systemd ignores it too.
                Err(e) if e.errno() == Some(libseccomp::error::SeccompErrno::EDOM) => {}
                Err(e) => return Err(err(&format!("allowing {name}"), e)),
            }
        }
        ctx.load().map_err(|e| err("seccomp_load", e))?;
        Ok(native)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "@default\n    # Always permitted\n    brk\n    exit_group\n\n\
                           @network-io\n    # Sockets\n    socket\n    sendmsg\n\n\
                           @system-service\n    # Services\n    @network-io\n    ioctl\n\n\
                           # Unlisted System Calls (supported by the local kernel, but not included in any of the groups listed above):\n\
                           #   bpf\n";

    fn unit(service: &str) -> String {
        format!("[Unit]\nDescription=x\n\n[Service]\nSystemCallArchitectures=native\nNoNewPrivileges=yes\n{service}\n[Install]\nWantedBy=multi-user.target\n")
    }

    #[test]
    fn groups_expand_recursively_and_default_is_always_in() {
        let groups = Groups::parse(LISTING);
        let f =
            UnitFilter::of_unit(&unit("SystemCallFilter=@system-service bpf\nSystemCallErrorNumber=EPERM\n"), &groups).unwrap();
        let allowed: Vec<&str> = f.allowed.iter().map(String::as_str).collect();
        assert_eq!(allowed, ["bpf", "brk", "exit_group", "ioctl", "sendmsg", "socket"]);
        assert_eq!(f.errno, Some(libc::EPERM));
        assert!(f.no_new_privileges);
        assert_eq!(f.written, ["@system-service", "bpf"]);
    }

    #[test]
    fn lines_add_up_an_empty_one_resets_and_no_errno_kills() {
        let groups = Groups::parse(LISTING);
        let f = UnitFilter::of_unit(
            &unit("SystemCallFilter=ioctl\nSystemCallFilter=\nSystemCallFilter=bpf\nSystemCallFilter=socket\n"),
            &groups,
        )
        .unwrap();
        assert_eq!(f.written, ["bpf", "socket"]);
        assert_eq!(f.errno, None);
    }

    #[test]
    fn what_is_not_modelled_is_refused_rather_than_guessed() {
        let groups = Groups::parse(LISTING);
        for service in [
            "SystemCallFilter=~@mount\n",
            "SystemCallFilter=bpf:EPERM\n",
            "SystemCallFilter=@nosuchgroup\n",
            "SystemCallErrorNumber=EPERM\n",
            "SystemCallFilter=bpf\nSystemCallErrorNumber=EWHATEVER\n",
        ] {
            assert!(UnitFilter::of_unit(&unit(service), &groups).is_err(), "{service}");
        }
        let mut f = UnitFilter::of_unit(&unit("SystemCallFilter=bpf\n"), &groups).unwrap();
        assert!(f.without("bpf").is_ok());
        assert!(f.without("bpf").is_err(), "taking off what is not on the list is a mistake in the test");
    }

    /// The shipped unit against this machine's systemd: the groups it names exist, and the calls
    /// the agent is known to need are in (the e2e tests show the rest).
    #[test]
    fn the_shipped_unit_allows_what_the_agent_is_known_to_need() {
        let groups = match Groups::of_this_machine() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("SKIPPED: {e}");
                return;
            }
        };
        let text = ccp_agent::install::unit_text(&ccp_agent::install::InstallPaths::default());
        let f = UnitFilter::of_unit(&text, &groups).unwrap();
        for call in ["bpf", "setns", "sched_setscheduler", "epoll_wait", "mmap", "futex", "clone3", "recvmsg", "chown", "mount"] {
            assert!(f.allowed.contains(call), "{call} is not allowed: {:?}", f.written);
        }
        for call in ["perf_event_open", "ptrace", "init_module", "reboot", "kexec_load", "umount2", "settimeofday"] {
            assert!(!f.allowed.contains(call), "{call} is allowed");
        }
        assert_eq!(f.errno, Some(libc::EPERM));
    }
}
