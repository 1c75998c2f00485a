//! The files a run reads: its scenario and every file the scenario references once the run's
//! overrides are applied (the random workload's CDF, Python algorithms' files, learned policies'
//! models and manifests), as written.
//!
//! [`Layout`] places a sweep's files under their common ancestor so that a copy of that tree on
//! another machine (a Ray worker's temporary directory) resolves every reference, relative to the
//! scenario's directory, to the copy of the file this machine would have read.

use std::path::{Component, Path, PathBuf};

use crate::config;

/// A file a scenario names.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// The key naming it: `workload.random.cdf`, `cc.algorithm`, `workload.flows[1].cc.algorithm`.
    pub key: String,
    /// The path as written, relative to the scenario's directory (or absolute).
    pub path: PathBuf,
}

/// What one run reads.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The scenario file's text.
    pub text: String,
    /// The directory references are relative to (the scenario file's, as given).
    pub base: PathBuf,
    pub references: Vec<Reference>,
}

impl Inputs {
    /// Loads `scenario` with `overrides` (the errors are the run's) and lists what it references.
    pub fn of_run(scenario: &Path, overrides: &[String]) -> Result<Inputs, String> {
        let loaded = config::load(scenario, overrides).map_err(|e| e.to_string())?;
        let mut references = Vec::new();
        let w = &loaded.scenario.workload;
        for (i, r) in w.random_classes().iter().enumerate() {
            references.push(Reference { key: format!("{}.cdf", w.random_key(i)), path: r.cdf.clone() });
        }
        // File-backed algorithms' names are absolute once loaded; the table keeps them as written.
        let table = config::load::overridden_table(scenario, &loaded.text, overrides).map_err(|e| e.to_string())?;
        algorithm_files(&toml::Value::Table(table), "", &mut references)?;
        Ok(Inputs { base: loaded.base_dir(), text: loaded.text, references })
    }

    /// Where reference `r` is read from on this machine.
    pub fn local_path(&self, r: &Reference) -> PathBuf {
        self.base.join(&r.path)
    }
}

/// The files of every file-backed algorithm (`py:PATH:CLASS`, `onnx:PATH`) under a key named
/// `algorithm`.
fn algorithm_files(v: &toml::Value, key: &str, out: &mut Vec<Reference>) -> Result<(), String> {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if key.is_empty() { k.clone() } else { format!("{key}.{k}") };
                algorithm_files(v, &key, out)?;
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                algorithm_files(v, &format!("{key}[{i}]"), out)?;
            }
        }
        toml::Value::String(s)
            if (key == "algorithm" || key.ends_with(".algorithm")) && ccp_algorithms::registry::file_backed(s) =>
        {
            for path in ccp_algorithms::registry::files_of(s) {
                if !out.iter().any(|r| r.path == path) {
                    out.push(Reference { key: key.to_string(), path });
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A sweep's input files under one root.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The scenario, relative to the root.
    pub scenario: PathBuf,
    /// (path relative to the root, the file on this machine), sorted, each path once.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// Directories a reference passes through that hold none of the files (`a/../x.cdf`), relative
    /// to the root.
    pub dirs: Vec<PathBuf>,
}

impl Layout {
    /// Lays out `scenario` (as given, relative to `cwd` or absolute) and the references of every
    /// run. A reference must be relative (an absolute path would name a file of each worker's own
    /// file system), must not climb above `/`, and must name an existing file.
    pub fn new(cwd: &Path, scenario: &Path, runs: &[&Inputs]) -> Result<Layout, String> {
        let scenario_abs =
            normalize(&cwd.join(scenario)).ok_or_else(|| format!("{}: the path climbs above /", scenario.display()))?;
        let scenario_dir = scenario_abs.parent().unwrap_or(Path::new("/")).to_path_buf();
        let mut files = vec![(scenario_abs.clone(), scenario.to_path_buf())];
        let mut dirs = Vec::new();
        for run in runs {
            for r in &run.references {
                let what = format!("{} = {:?}", r.key, r.path.display().to_string());
                if r.path.is_absolute() {
                    return Err(format!(
                        "{what}: an absolute path would name a file on each worker's own machine; write it relative to \
                         the scenario's directory ({}) so the file travels with the scenario",
                        scenario_dir.display()
                    ));
                }
                let target = normalize(&scenario_dir.join(&r.path))
                    .ok_or_else(|| format!("{what}: escapes the file system's root from {}", scenario_dir.display()))?;
                let local = run.local_path(r);
                if !local.is_file() {
                    return Err(format!("{what}: {} is not a file", local.display()));
                }
                // Every directory the path names on the way must exist on the worker too.
                let mut walked = scenario_dir.clone();
                let components: Vec<Component> = r.path.components().collect();
                for c in &components[..components.len().saturating_sub(1)] {
                    walked.push(c);
                    if let (Component::Normal(_), Some(d)) = (c, normalize(&walked)) {
                        dirs.push(d);
                    }
                }
                files.push((target, local));
            }
        }
        let mut root = scenario_dir.clone();
        for p in files.iter().filter_map(|(t, _)| t.parent()).chain(dirs.iter().map(PathBuf::as_path)) {
            while !p.starts_with(&root) {
                root = root.parent().unwrap_or(Path::new("/")).to_path_buf();
            }
        }
        let rel = |p: &Path| p.strip_prefix(&root).map(Path::to_path_buf).unwrap_or_default();
        let mut files: Vec<(PathBuf, PathBuf)> = files.into_iter().map(|(t, local)| (rel(&t), local)).collect();
        files.sort();
        files.dedup_by(|a, b| a.0 == b.0);
        let mut dirs: Vec<PathBuf> = dirs
            .iter()
            .filter(|d| !files.iter().any(|(f, _)| root.join(f).starts_with(d)) && **d != scenario_dir)
            .map(|d| rel(d))
            .collect();
        dirs.sort();
        dirs.dedup();
        Ok(Layout { scenario: rel(&scenario_abs), files, dirs })
    }
}

/// `p` without `.` and `..` (absolute `p`; symbolic links are not followed: a copy of the tree
/// has none); `None` if it climbs above the root.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_none() || !out.pop() {
                    return None;
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(base: &Path, refs: &[(&str, &str)]) -> Inputs {
        Inputs {
            text: String::new(),
            base: base.to_path_buf(),
            references: refs.iter().map(|(k, p)| Reference { key: k.to_string(), path: p.into() }).collect(),
        }
    }

    #[test]
    fn layout_keeps_relative_references_resolving() {
        let tmp = std::env::temp_dir().join(format!("ccp-sim-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        for d in ["repo/configs/sim/sub", "repo/shared/workloads"] {
            std::fs::create_dir_all(tmp.join(d)).unwrap();
        }
        for f in ["repo/configs/sim/s.toml", "repo/configs/sim/a.cdf", "repo/shared/workloads/w.cdf", "repo/configs/sim/alg.py"] {
            std::fs::write(tmp.join(f), "x").unwrap();
        }
        let dir = tmp.join("repo/configs/sim");
        let one = inputs(&dir, &[("workload.random.cdf", "a.cdf"), ("cc.algorithm", "./alg.py")]);
        let two = inputs(&dir, &[("workload.random.cdf", "../../shared/workloads/w.cdf"), ("cc.algorithm", "sub/../alg.py")]);
        // The scenario given relative to the working directory.
        let l = Layout::new(&tmp, Path::new("repo/configs/sim/s.toml"), &[&one, &two]).unwrap();
        assert_eq!(l.scenario, Path::new("configs/sim/s.toml"));
        let rel: Vec<&Path> = l.files.iter().map(|(r, _)| r.as_path()).collect();
        assert_eq!(
            rel,
            ["configs/sim/a.cdf", "configs/sim/alg.py", "configs/sim/s.toml", "shared/workloads/w.cdf"].map(Path::new)
        );
        assert_eq!(l.files[3].1, dir.join("../../shared/workloads/w.cdf"), "read where ccp-sim reads it");
        assert_eq!(l.files[2].1, Path::new("repo/configs/sim/s.toml"));
        // `sub` holds no shipped file but `sub/..` must resolve on the worker.
        assert_eq!(l.dirs, vec![PathBuf::from("configs/sim/sub")]);

        let abs = inputs(&dir, &[("workload.random.cdf", "/etc/passwd")]);
        let e = Layout::new(&tmp, &dir.join("s.toml"), &[&abs]).unwrap_err();
        assert!(e.contains("workload.random.cdf = \"/etc/passwd\": an absolute path"), "{e}");
        let up = inputs(&dir, &[("cc.algorithm", "../../../../../../../../../../../../../x.py")]);
        let e = Layout::new(&tmp, &dir.join("s.toml"), &[&up]).unwrap_err();
        assert!(e.contains("escapes the file system's root"), "{e}");
        let missing = inputs(&dir, &[("workload.random.cdf", "nope.cdf")]);
        let e = Layout::new(&tmp, &dir.join("s.toml"), &[&missing]).unwrap_err();
        assert!(e.contains("nope.cdf is not a file"), "{e}");
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/b/../c/./d")), Some(PathBuf::from("/a/c/d")));
        assert_eq!(normalize(Path::new("/a/..")), Some(PathBuf::from("/")));
        assert_eq!(normalize(Path::new("/a/../..")), None);
    }
}
