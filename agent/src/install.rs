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
        assert!(!unit.contains('@'), "every placeholder filled: {unit}");

        std::fs::write(p.config_dir.join("agent.toml"), "# mine\n").unwrap();
        let steps = install(&fake_bin, &p, false).unwrap();
        assert!(steps.contains(&Step::KeptConfig(p.config_dir.join("agent.toml"))));
        assert_eq!(std::fs::read_to_string(p.config_dir.join("agent.toml")).unwrap(), "# mine\n");
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
