//! `ccp-agent install`: put the binary, a configuration and the systemd unit in place.
//!
//! Idempotent and conservative: an existing configuration is never overwritten, every path is
//! printed, and `--dry-run` shows what would happen without touching anything.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The shipped unit, with `@BINDIR@` and `@CONFDIR@` to fill in.
const UNIT_TEMPLATE: &str = include_str!("../../packaging/ccp-agent.service");
/// The shipped, documented default configuration.
const DEFAULT_CONFIG: &str = include_str!("../../configs/agent.toml");

#[derive(Debug, Clone)]
pub struct InstallPaths {
    pub bin_dir: PathBuf,
    pub config_dir: PathBuf,
    pub unit_dir: PathBuf,
}

impl Default for InstallPaths {
    fn default() -> Self {
        InstallPaths {
            bin_dir: PathBuf::from("/usr/local/bin"),
            config_dir: PathBuf::from("/etc/ccp-agent"),
            unit_dir: PathBuf::from("/etc/systemd/system"),
        }
    }
}

/// One thing install did (or would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    CopiedBinary(PathBuf),
    WroteConfig(PathBuf),
    KeptConfig(PathBuf),
    WroteUnit(PathBuf),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::CopiedBinary(p) => write!(f, "binary        {}", p.display()),
            Step::WroteConfig(p) => write!(f, "configuration {} (new)", p.display()),
            Step::KeptConfig(p) => write!(f, "configuration {} (kept: it exists)", p.display()),
            Step::WroteUnit(p) => write!(f, "systemd unit  {}", p.display()),
        }
    }
}

pub fn unit_text(paths: &InstallPaths) -> String {
    UNIT_TEMPLATE
        .replace("@BINDIR@", &paths.bin_dir.display().to_string())
        .replace("@CONFDIR@", &paths.config_dir.display().to_string())
}

/// The `[Service]` directives of a unit, as (key, value) in order (the shipped unit's are
/// checked by the tests below and applied outside systemd by the e2e tests' seccomp launcher).
pub fn service_directives(unit: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut in_service = false;
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service && !line.is_empty() && !line.starts_with('#') {
            let (k, v) = line.split_once('=').with_context(|| format!("not a directive: {line:?}"))?;
            out.push((k.to_string(), v.to_string()));
        }
    }
    Ok(out)
}

/// Installs `binary` (normally the running executable) under `paths`.
pub fn install(binary: &Path, paths: &InstallPaths, dry_run: bool) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    let bin = paths.bin_dir.join("ccp-agent");
    let config = paths.config_dir.join("agent.toml");
    let unit = paths.unit_dir.join("ccp-agent.service");
    // Validate what we ship before installing it.
    crate::config::AgentConfig::parse("shipped agent.toml", DEFAULT_CONFIG, &crate::config::Overrides::default())
        .context("the shipped configuration does not validate")?;
    if !dry_run {
        for dir in [&paths.bin_dir, &paths.config_dir, &paths.unit_dir] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if binary != bin {
            // Copy to a temporary name and rename, so a running binary is replaced atomically.
            let tmp = bin.with_extension("new");
            std::fs::copy(binary, &tmp).with_context(|| format!("copying {} to {}", binary.display(), tmp.display()))?;
            std::fs::rename(&tmp, &bin).with_context(|| format!("installing {}", bin.display()))?;
        }
    }
    steps.push(Step::CopiedBinary(bin));
    if config.exists() {
        steps.push(Step::KeptConfig(config));
    } else {
        if !dry_run {
            std::fs::write(&config, DEFAULT_CONFIG).with_context(|| format!("writing {}", config.display()))?;
        }
        steps.push(Step::WroteConfig(config));
    }
    if !dry_run {
        std::fs::write(&unit, unit_text(paths)).with_context(|| format!("writing {}", unit.display()))?;
    }
    steps.push(Step::WroteUnit(unit));
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(root: &Path) -> InstallPaths {
        InstallPaths { bin_dir: root.join("bin"), config_dir: root.join("etc"), unit_dir: root.join("systemd") }
    }

    #[test]
    fn installs_binary_config_and_unit_and_keeps_an_existing_config() {
        let dir = tempfile::tempdir().unwrap();
        let fake_bin = dir.path().join("ccp-agent-built");
        std::fs::write(&fake_bin, b"binary").unwrap();
        let p = paths(dir.path());
        let steps = install(&fake_bin, &p, false).unwrap();
        assert!(steps.contains(&Step::WroteConfig(p.config_dir.join("agent.toml"))));
        assert_eq!(std::fs::read(p.bin_dir.join("ccp-agent")).unwrap(), b"binary");
        let unit = std::fs::read_to_string(p.unit_dir.join("ccp-agent.service")).unwrap();
        assert!(unit.contains(&format!(
            "ExecStart={}/ccp-agent run --config {}/agent.toml",
            p.bin_dir.display(),
            p.config_dir.display()
        )));
        // Placeholders are @NAME@; systemd's own @groups (SystemCallFilter) are lower case.
        let between_ats: Vec<&str> = unit.split('@').collect();
        let placeholders: Vec<&&str> = between_ats[1..between_ats.len() - 1]
            .iter()
            .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .collect();
        assert!(placeholders.is_empty(), "every placeholder filled: {placeholders:?}");

        std::fs::write(p.config_dir.join("agent.toml"), "# mine\n").unwrap();
        let steps = install(&fake_bin, &p, false).unwrap();
        assert!(steps.contains(&Step::KeptConfig(p.config_dir.join("agent.toml"))));
        assert_eq!(std::fs::read_to_string(p.config_dir.join("agent.toml")).unwrap(), "# mine\n");
    }

    /// Every capability the unit keeps: why, and where the code shows it is needed (any of the
    /// files holds the text). Evidence that disappears means the capability may be dropped.
    fn needed_capabilities() -> Vec<(&'static str, &'static str, Vec<&'static str>, &'static str)> {
        let instance = include_str!("../../datapath-shims/datapaths/ebpf/src/instance.rs");
        let attach_bpf = include_str!("../../datapath-shims/datapaths/ebpf/src/bpf/attach.bpf.c");
        let ccp_bpf = include_str!("../../datapath-shims/datapaths/ebpf/src/bpf/ccp.bpf.c");
        let sysctl = include_str!("../../datapath-shims/datapaths/ebpf/src/attach/sysctl.rs");
        let netns = include_str!("../../datapath-shims/datapaths/ebpf/src/netns.rs");
        let bpffs = include_str!("../../datapath-shims/datapaths/ebpf/src/bpffs.rs");
        let ebpf_mod = include_str!("datapath/ebpf/mod.rs");
        let ebpf_settings = include_str!("datapath/ebpf/settings.rs");
        let netlink = include_str!("datapath/libccp/netlink.rs");
        let permissions = include_str!("permissions.rs");
        let ipc = include_str!("../../datapath-shims/datapaths/libccp/host/src/ipc.rs");
        vec![
            ("CAP_BPF", "loads BPF programs and maps (the struct_ops congestion control)", vec![instance], "attach_struct_ops"),
            ("CAP_PERFMON", "loads struct_ops programs (a perfmon program type)", vec![ccp_bpf], "SEC(\"struct_ops\")"),
            ("CAP_PERFMON", "loads the iter/tcp switcher (a tracing program)", vec![attach_bpf], "SEC(\"iter/tcp\")"),
            ("CAP_NET_ADMIN", "attaches sockops programs to cgroups", vec![attach_bpf], "SEC(\"sockops\")"),
            ("CAP_NET_ADMIN", "sets a namespace's default congestion control", vec![sysctl], "tcp_congestion_control"),
            ("CAP_NET_ADMIN", "joins ccp-kernel's netlink multicast group", vec![netlink], "NETLINK_ADD_MEMBERSHIP"),
            ("CAP_SYS_ADMIN", "enters network namespaces with setns(2)", vec![netns], "libc::setns"),
            ("CAP_SYS_ADMIN", "mounts the bpf filesystem when none is mounted", vec![bpffs], "libc::mount"),
            ("CAP_SYS_NICE", "switches itself to SCHED_FIFO (realtime_priority)", vec![ebpf_mod, ebpf_settings], "SCHED_FIFO"),
            ("CAP_CHOWN", "gives sockets and the socket directory to a configured group", vec![permissions], "libc::chown"),
            (
                "CAP_DAC_OVERRIDE",
                "replies to the 0600 sockets of datapaths run by group members",
                vec![ipc],
                "SOCKET_MODE: u32 = 0o600",
            ),
        ]
    }

    #[test]
    fn the_unit_keeps_only_capabilities_the_code_needs() {
        let unit = unit_text(&InstallPaths::default());
        let directives = service_directives(&unit).unwrap();
        let bounding: Vec<&str> = directives
            .iter()
            .find(|(k, _)| k == "CapabilityBoundingSet")
            .map(|(_, v)| v.split_whitespace().collect())
            .expect("the unit limits the capability bounding set");
        let needed = needed_capabilities();
        for cap in &bounding {
            assert!(needed.iter().any(|(c, ..)| c == cap), "{cap} is in the unit but no reason for it is known here");
        }
        for (cap, why, files, evidence) in &needed {
            assert!(bounding.contains(cap), "{cap} (the agent {why}) is missing from the unit's CapabilityBoundingSet");
            assert!(
                files.iter().any(|f| f.contains(evidence)),
                "{cap} is kept because the agent {why}, but {evidence:?} is no longer found in the code: drop the \
                 capability (and its comment in packaging/ccp-agent.service) if nothing else needs it"
            );
        }
        // The bounding set limits root; an ambient set would only matter with User=.
        assert!(!directives.iter().any(|(k, _)| k == "AmbientCapabilities" || k == "User"));
    }

    /// Every system call the unit allows beyond systemd's `@system-service`: why, and where the
    /// code shows it is needed. Evidence that disappears means the call may be dropped.
    fn needed_system_calls() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
        let instance = include_str!("../../datapath-shims/datapaths/ebpf/src/instance.rs");
        let bpffs = include_str!("../../datapath-shims/datapaths/ebpf/src/bpffs.rs");
        vec![
            ("bpf", "loads and drives the BPF datapath (libbpf)", instance, "attach_struct_ops"),
            ("mount", "mounts the bpf filesystem when none is mounted", bpffs, "libc::mount"),
        ]
    }

    #[test]
    fn the_units_system_call_filter_adds_only_calls_the_code_needs() {
        let directives = service_directives(&unit_text(&InstallPaths::default())).unwrap();
        let get = |key: &str| -> Vec<&str> { directives.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect() };
        let filter: Vec<&str> = get("SystemCallFilter").iter().flat_map(|v| v.split_whitespace()).collect();
        assert_eq!(filter.first(), Some(&"@system-service"), "an allow-list on systemd's set for services: {filter:?}");
        assert!(!filter.iter().any(|e| e.starts_with('~') || e.contains(':')), "an allow-list only: {filter:?}");
        let needed = needed_system_calls();
        for entry in &filter[1..] {
            assert!(
                needed.iter().any(|(name, ..)| name == entry),
                "{entry} is allowed by the unit but no reason for it is known here"
            );
        }
        for (name, why, file, evidence) in &needed {
            assert!(filter.contains(name), "{name} (the agent {why}) is missing from the unit's SystemCallFilter");
            assert!(
                file.contains(evidence),
                "{name} is allowed because the agent {why}, but {evidence:?} is no longer found in the code: drop it \
                 (and its comment in packaging/ccp-agent.service) if nothing else needs it"
            );
        }
        // A call left out is an error the agent reports, not a kill (the unit says why).
        assert_eq!(get("SystemCallErrorNumber"), vec!["EPERM"]);
    }

    #[test]
    fn the_unit_is_sandboxed_and_says_why() {
        let unit = unit_text(&InstallPaths::default());
        let directives = service_directives(&unit).unwrap();
        let get = |key: &str| -> Vec<&str> { directives.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect() };
        for (key, value) in [
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("ProtectKernelModules", "yes"),
            ("ProtectKernelLogs", "yes"),
            ("ProtectControlGroups", "yes"),
            ("RestrictAddressFamilies", "AF_UNIX AF_NETLINK AF_INET AF_INET6"),
            ("LockPersonality", "yes"),
            ("SystemCallArchitectures", "native"),
            ("MemoryDenyWriteExecute", "yes"),
            ("UMask", "0077"),
            ("RestrictNamespaces", "net"),
            // Off on purpose: SCHED_FIFO, the host's /tmp/ccp, the congestion control sysctls.
            ("RestrictRealtime", "no"),
            ("PrivateTmp", "no"),
            ("ProtectKernelTunables", "no"),
            ("RuntimeDirectory", "ccp-agent"),
            ("RuntimeDirectoryPreserve", "restart"),
            ("LimitMEMLOCK", "infinity"),
        ] {
            assert_eq!(get(key), vec![value], "{key}");
        }
        // What the agent writes under ProtectSystem=strict: the runtime directory (control socket,
        // attach state) is RuntimeDirectory; pins and the unix socket directory are listed.
        let writable = get("ReadWritePaths");
        for path in ["/sys/fs/bpf", "/tmp"] {
            assert!(writable.iter().any(|w| w.trim_start_matches('-') == path), "{path} writable: {writable:?}");
        }
        assert!(crate::config::SYSTEM_CONTROL_SOCKET.starts_with("/run/ccp-agent/"));
        let shipped =
            crate::config::AgentConfig::parse("agent.toml", DEFAULT_CONFIG, &crate::config::Overrides::default()).unwrap();
        for (kind, key, under) in
            [("unix", "dir", "/tmp/"), ("ebpf", "pin_dir", "/sys/fs/bpf/"), ("ebpf", "state_file", "/run/ccp-agent/")]
        {
            let v = shipped.datapath.section(kind).get(key).and_then(|v| v.as_str().map(str::to_string));
            assert!(v.as_deref().is_some_and(|p| p.starts_with(under)), "[datapath.{kind}] {key} = {v:?} is not under {under}");
        }

        // Each sandboxing directive comes right after the comment that says why (a short run of
        // related directives may share one).
        let start = unit.find("# --- Sandboxing").expect("a sandboxing part");
        let sandbox = unit[start..].split("[Install]").next().unwrap();
        let mut run = None;
        for line in sandbox.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if line.starts_with('#') {
                run = Some(0);
            } else {
                let n = run.expect("a directive before any comment") + 1;
                assert!(n <= 4, "no comment says why: {line}");
                run = Some(n);
            }
        }
    }

    #[test]
    fn systemd_accepts_the_unit() {
        let Ok(out) = std::process::Command::new("systemd-analyze").arg("--version").output() else {
            eprintln!("SKIPPED systemd_accepts_the_unit: systemd-analyze is not installed");
            return;
        };
        assert!(out.status.success());
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        for d in [&p.bin_dir, &p.config_dir, &p.unit_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        // verify checks that ExecStart's binary exists and is executable.
        let bin = p.bin_dir.join("ccp-agent");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let unit = p.unit_dir.join("ccp-agent.service");
        std::fs::write(&unit, unit_text(&p)).unwrap();
        let out = std::process::Command::new("systemd-analyze").arg("verify").arg(&unit).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Warnings about this unit (unknown keys, bad values) come on stderr with its file name.
        let ours: Vec<&str> = stderr.lines().filter(|l| l.contains("ccp-agent.service")).collect();
        assert!(out.status.success() && ours.is_empty(), "systemd-analyze verify:\n{stderr}");
    }

    #[test]
    fn dry_run_touches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let steps = install(Path::new("/bin/true"), &p, true).unwrap();
        assert_eq!(steps.len(), 3);
        assert!(!p.bin_dir.exists() && !p.config_dir.exists() && !p.unit_dir.exists());
    }
}
