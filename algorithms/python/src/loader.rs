//! `py:path/to/file.py:Class` names to algorithm descriptors.
//!
//! A name resolves to the class as the file holds it now: the file is read on every resolve,
//! and a changed file is executed again as a new module, giving a new version of the class for
//! flows created from then on (existing flows keep the instances they have). An unchanged file
//! resolves to the version already loaded. The descriptor's name is canonical — `py:` then the
//! absolute path, `:` and the class — so the same class reached through different relative
//! paths is one algorithm.
//!
//! A process that runs with privileges sets a [`set_file_check`] (ccp-agent: owner and mode),
//! because loading a file runs it.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ccp_contract::{AlgorithmFactory, AlgorithmInfo, ParamError, ParamSpec, Params};

use crate::host::{host, Done, Work};
use crate::hosted::PyFactory;

/// Class versions one process loads at most: each costs a module and a descriptor that live as
/// long as the process.
pub const MAX_VERSIONS: usize = 256;

/// Largest Python file loaded, bytes.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// A check a file must pass before it is executed.
pub type FileCheck = fn(&Path) -> Result<(), String>;

static FILE_CHECK: OnceLock<FileCheck> = OnceLock::new();

/// Sets the check every Python file passes before it is loaded (once per process).
pub fn set_file_check(check: FileCheck) {
    let _ = FILE_CHECK.set(check);
}

/// `py:PATH:CLASS` split; the path may itself hold colons, the class name cannot.
pub fn parse(name: &str) -> Result<(&str, &str), String> {
    let rest = name
        .strip_prefix(crate::SCHEME)
        .and_then(|r| r.strip_prefix(':'))
        .ok_or_else(|| format!("{name:?} is not a Python algorithm name: write py:path/to/file.py:ClassName"))?;
    let (path, class) =
        rest.rsplit_once(':').ok_or_else(|| format!("{name:?} names no class: write py:path/to/file.py:ClassName"))?;
    let is_ident = !class.is_empty()
        && !class.starts_with(|c: char| c.is_ascii_digit())
        && class.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if path.is_empty() || !is_ident {
        return Err(format!("{name:?}: write py:path/to/file.py:ClassName (the class a Python identifier)"));
    }
    Ok((path, class))
}

/// Whether `name` names a Python algorithm (`py:…`).
pub fn is_python(name: &str) -> bool {
    name.strip_prefix(crate::SCHEME).is_some_and(|r| r.starts_with(':'))
}

struct Version {
    hash: u64,
    info: &'static AlgorithmInfo,
}

#[derive(Default)]
struct Loaded {
    /// The newest version of each (file, class).
    newest: HashMap<(PathBuf, String), Version>,
    /// Interpreter class of each descriptor name's newest version.
    class_of: HashMap<&'static str, usize>,
    versions: usize,
}

fn loaded() -> &'static Mutex<Loaded> {
    static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
    LOADED.get_or_init(Mutex::default)
}

/// The registry's provider for `py:` names.
pub fn resolve(name: &str) -> Result<&'static AlgorithmInfo, String> {
    let (path, class) = parse(name)?;
    let path = Path::new(path).canonicalize().map_err(|e| format!("cannot open {path}: {e}"))?;
    let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} is {} bytes; Python algorithms are limited to {MAX_FILE_BYTES}", path.display(), meta.len()));
    }
    if let Some(check) = FILE_CHECK.get() {
        check(&path)?;
    }
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    let hash = h.finish();

    // One load at a time: two resolves of a changed file must not load it twice.
    let mut l = loaded().lock().unwrap_or_else(|e| e.into_inner());
    let key = (path.clone(), class.to_string());
    if let Some(v) = l.newest.get(&key) {
        if v.hash == hash {
            return Ok(v.info);
        }
    }
    if l.versions >= MAX_VERSIONS {
        return Err(format!("{MAX_VERSIONS} Python class versions are loaded in this process; restart it to load more"));
    }
    let module_name = format!("ccp_agent_user_{}", l.versions);
    let done = host()
        .and_then(|h| h.call(Work::Load { path: path.clone(), module_name, class: class.to_string() }))
        .map_err(|e| format!("loading {}: {e}", path.display()))?;
    let Done::Loaded(c) = done else { return Err("the interpreter answered another kind of call".into()) };
    l.versions += 1;
    let name: &'static str = match l.newest.get(&key) {
        Some(v) => v.info.name,
        None => leak(format!("{}:{}:{class}", crate::SCHEME, path.display())),
    };
    let summary = if c.summary.is_empty() { format!("Python class {class}") } else { c.summary };
    let reference = if c.reference.is_empty() { path.display().to_string() } else { c.reference };
    let params: &'static [ParamSpec] = Box::leak(c.params.into_boxed_slice());
    let info: &'static AlgorithmInfo =
        Box::leak(Box::new(AlgorithmInfo { name, summary: leak(summary), reference: leak(reference), params, build }));
    l.class_of.insert(name, c.class);
    l.newest.insert(key, Version { hash, info });
    Ok(info)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The descriptor's `build`: a factory for the newest version of the class named by `params`.
fn build(params: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let name = params.algorithm();
    let class = loaded().lock().unwrap_or_else(|e| e.into_inner()).class_of.get(name).copied();
    let class = class.ok_or_else(|| ParamError::Unavailable { name: name.to_string(), reason: "not loaded".into() })?;
    Ok(Arc::new(PyFactory { name, class, params: params.values().to_vec() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_path_and_class() {
        assert_eq!(parse("py:a/b.py:Reno"), Ok(("a/b.py", "Reno")));
        assert_eq!(parse("py:/x:y/b.py:My_CC2"), Ok(("/x:y/b.py", "My_CC2")));
        for bad in ["py:a.py", "py::Reno", "py:a.py:", "py:a.py:2x", "py:a.py:Re-no", "reno", "python:a.py:X"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(is_python("py:a.py:X") && !is_python("reno") && !is_python("python:a.py:X"));
    }
}
