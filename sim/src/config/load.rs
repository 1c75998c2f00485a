//! Reading a scenario: the file, its `--set` overrides (`key.path=value`, the value parsed as
//! TOML), the parser's syntax and type errors on the offending key's line, Python algorithm paths
//! made absolute, and [`validate`].

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::locate::{find_key_after, locate};
use super::validate::validate;
use super::{RandomClasses, RandomConfig, Scenario};

/// A scenario that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {source}")]
    Io { file: String, source: std::io::Error },
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}:{line}: `{key}`: {message}")]
    Invalid { file: String, line: usize, key: String, message: String },
    #[error("--set {key}: {message}")]
    Override { key: String, message: String },
}

/// A loaded, validated scenario with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub scenario: Scenario,
    /// The file it was read from (for messages and relative paths).
    pub file: PathBuf,
    pub text: String,
    /// Keys changed on the command line, dotted.
    pub overrides: Vec<String>,
}

impl Loaded {
    /// Directory relative paths in the scenario resolve against.
    pub fn base_dir(&self) -> PathBuf {
        self.file.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The scenario's name: `name`, or the file stem.
    pub fn name(&self) -> String {
        self.scenario
            .name
            .clone()
            .unwrap_or_else(|| self.file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default())
    }

    /// An error about `key` (dotted, array items as `flows[2]`), on its line.
    pub fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let message = message.into();
        if self.overrides.iter().any(|o| key.starts_with(o.as_str()) || o.starts_with(key)) {
            return ConfigError::Override { key: key.to_string(), message };
        }
        ConfigError::Invalid {
            file: self.file.display().to_string(),
            line: locate(&self.text, key),
            key: key.to_string(),
            message,
        }
    }
}

/// Reads, overrides (`key.path=value` with a TOML value), parses and validates a scenario file.
pub fn load(file: &Path, overrides: &[String]) -> Result<Loaded, ConfigError> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Io { file: name.clone(), source })?;
    load_str(file, &text, overrides)
}

/// As [`load`], from text already read (`file` names it in messages).
pub fn load_str(file: &Path, text: &str, overrides: &[String]) -> Result<Loaded, ConfigError> {
    let name = file.display().to_string();
    let scenario: Scenario = if overrides.is_empty() {
        toml::from_str(text).map_err(|e| syntax_error(&name, text, &e))?
    } else {
        Scenario::deserialize(toml::Value::Table(overridden_table(file, text, overrides)?))
            .map_err(|e| ConfigError::Syntax { file: name.clone(), message: format!("after --set overrides: {e}") })?
    };
    let keys = overrides.iter().map(|o| o.split('=').next().unwrap_or("").trim().to_string()).collect();
    let mut loaded = Loaded { scenario, file: file.to_path_buf(), text: text.to_string(), overrides: keys };
    absolute_python_names(&mut loaded)?;
    validate(&loaded)?;
    Ok(loaded)
}

/// The scenario's TOML table with `overrides` applied, every value as written (before
/// [`absolute_python_names`]): what a sweep reads the files a run references from.
pub fn overridden_table(file: &Path, text: &str, overrides: &[String]) -> Result<toml::Table, ConfigError> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(&file.display().to_string(), text, &e))?;
    for o in overrides {
        apply_override(&mut table, o)?;
    }
    Ok(table)
}

/// The parser names the line; for unknown fields inside internally tagged tables it points at the
/// table header, so the field's own line is looked up instead.
fn syntax_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().to_string();
    let mut line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    if let Some(field) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
        if let Some(l) = line {
            if let Some(found) = find_key_after(text, l, field) {
                line = Some(found);
            }
        }
    }
    match line {
        Some(l) => ConfigError::Syntax { file: format!("{file}:{l}"), message },
        None => ConfigError::Syntax { file: file.to_string(), message },
    }
}

/// Applies one `a.b.c=value` override (the value parsed as TOML, or taken as a string if it does
/// not parse).
fn apply_override(table: &mut toml::Table, spec: &str) -> Result<(), ConfigError> {
    let (key, raw) = spec
        .split_once('=')
        .ok_or_else(|| ConfigError::Override { key: spec.to_string(), message: "expected key.path=value".into() })?;
    let key = key.trim();
    let raw = raw.trim();
    let value: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    };
    let parts: Vec<&str> = key.split('.').collect();
    let fail = |message: String| ConfigError::Override { key: key.to_string(), message };
    let mut cur = table;
    for p in &parts[..parts.len() - 1] {
        // `name[i]`: the i-th table of an array of tables (`workload.random[1].load`).
        let (name, index) = match p.strip_suffix(']').and_then(|q| q.split_once('[')) {
            Some((name, i)) => (name, Some(i.parse::<usize>().map_err(|_| fail(format!("`{p}`: the index is not a number")))?)),
            None => (*p, None),
        };
        let mut entry = cur.entry(name.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(i) = index {
            let items = entry.as_array_mut().ok_or_else(|| fail(format!("`{name}` is not an array")))?;
            let n = items.len();
            entry = items.get_mut(i).ok_or_else(|| fail(format!("`{name}` has {n} items, no [{i}]")))?;
        }
        if entry.is_array() {
            return Err(fail(format!("`{p}` is a list of tables: name one, as `{p}[0]`")));
        }
        cur = entry.as_table_mut().ok_or_else(|| fail(format!("`{p}` is not a table")))?;
    }
    cur.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

/// Makes every Python algorithm's path (`py:path/to/file.py:Class`) absolute, a relative one
/// relative to the scenario file's directory as the CDF's is, so the same scenario runs from
/// anywhere (and its results name the file run).
fn absolute_python_names(l: &mut Loaded) -> Result<(), ConfigError> {
    let base = l.base_dir();
    let w = &mut l.scenario.workload;
    let keys: Vec<String> = (0..w.random_classes().len()).map(|i| w.random_key(i)).collect();
    let mut names: Vec<(String, &mut String)> = vec![("cc".into(), &mut l.scenario.cc.algorithm)];
    for (i, f) in w.flows.iter_mut().enumerate() {
        if let Some(c) = f.cc.as_mut() {
            names.push((format!("workload.flows[{i}].cc"), &mut c.algorithm));
        }
    }
    let random: &mut [RandomConfig] = w.random.as_mut().map(RandomClasses::as_mut_slice).unwrap_or_default();
    for (r, key) in random.iter_mut().zip(keys) {
        if let Some(c) = r.cc.as_mut() {
            names.push((format!("{key}.cc"), &mut c.algorithm));
        }
    }
    if let Some(c) = w.incast.as_mut().and_then(|r| r.cc.as_mut()) {
        names.push(("workload.incast.cc".into(), &mut c.algorithm));
    }
    let mut failed = None;
    for (table, name) in names {
        match ccp_algorithms::registry::absolute_name(name, &base) {
            Ok(abs) => *name = abs,
            Err(e) => {
                failed = Some((table, format!("{name}: {e}")));
                break;
            }
        }
    }
    match failed {
        Some((table, e)) => Err(l.invalid(&format!("{table}.algorithm"), e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::test_support::{line_of, load_text, GOOD};
    use crate::config::QdiscConfig;

    #[test]
    fn a_good_scenario_loads() {
        let l = load_text(GOOD).unwrap();
        assert_eq!(l.scenario.workload.flows.len(), 2);
        assert_eq!(l.name(), "test");
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let bad = GOOD.replace("k_pkts = 20", "k_pks = 20");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}:", line_of(&bad, "k_pks", 0))), "{e}");
        assert!(e.contains("k_pks"), "{e}");
        let bad = format!("{GOOD}\n[transport]\nmss_bytes = \"big\"\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}:", line_of(&bad, "mss_bytes", 0))), "{e}");
        // Inside a `kind`-tagged table the parser only knows the table: its header is named.
        let bad = GOOD.replace("link_gbps = 10", "link_gbps = \"fast\"");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}:", line_of(&bad, "[topology]", 0))) && e.contains("fast"), "{e}");
    }

    #[test]
    fn overrides_apply_and_are_named() {
        let l = load_str(Path::new("t.toml"), GOOD, &["switch.qdisc.k_pkts=5".into(), "cc.algorithm=\"dctcp\"".into()]).unwrap();
        assert!(matches!(l.scenario.switch.qdisc, QdiscConfig::Dctcp { k_pkts: Some(5), .. }));
        assert_eq!(l.scenario.cc.algorithm, "dctcp");
        let e = load_str(Path::new("t.toml"), GOOD, &["switch.qdisc.k_pkts=99999".into()]).unwrap_err().to_string();
        assert!(e.starts_with("--set switch.qdisc.k_pkts"), "{e}");
    }
}
