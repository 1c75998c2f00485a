//! Anchors: a third-party congestion control written as BPF struct_ops, built from its C source
//! at run time and registered for one run (`cc = "bpf:path/to/file.c:map"`).
//!
//! This is how the kernel developers' own DCTCP (the selftest `bpf_dctcp.c`; this kernel has no
//! `tcp_dctcp`) runs beside the agent's: the project never carries its source, so the lab
//! compiles whatever file the experiment names (a kernel tree's, or `../shared/anchors/`'s copy)
//! with clang and libbpf's headers, loads the object and registers the one struct_ops map the
//! scheme names. The registered name is the one the source gives its `tcp_congestion_ops`,
//! learnt from the kernel (the names that appear in `tcp_available_congestion_control`), not
//! from the object's layout, which is the source's own copy of the kernel struct. Names are
//! global: a second registration of the same name fails with a message saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_rs::{Link, MapCore, Object, ObjectBuilder};

use crate::agent::{registered_ccs, tail};
use crate::error::{Error, Result};

/// The compiler, unless `CLANG` names another.
const DEFAULT_CLANG: &str = "clang";
/// Bytes of the compiler's output quoted in errors.
const COMPILER_TAIL_BYTES: usize = 2000;

/// A registered anchor congestion control; dropping it unregisters the name.
pub struct StructOpsAnchor {
    name: String,
    // Field order: the link unregisters before the object is freed.
    _link: Link,
    _object: Object,
}

impl std::fmt::Debug for StructOpsAnchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructOpsAnchor").field("name", &self.name).finish()
    }
}

/// Headers a BPF program may include that only a C library provides, as the kernel's own
/// definitions: the 6.1 tree's `bpf_dctcp.c` includes `<errno.h>` for EBUSY, and glibc's would
/// pull in 32-bit stubs under `-target bpf` (the selftests' build has tools/include for this).
const LIBC_SHIMS: [(&str, &str); 1] = [("errno.h", "#include <asm-generic/errno.h>\n")];

/// Compiles `source` into `object` for BPF (CO-RE, this machine's architecture), with the
/// source's directory, [`LIBC_SHIMS`] (written beside `object`) and the multiarch system headers
/// (asm/) on the include path.
pub fn compile(source: &Path, object: &Path) -> Result<()> {
    let clang = std::env::var_os("CLANG").unwrap_or_else(|| DEFAULT_CLANG.into());
    let dir = source.parent().unwrap_or(Path::new("."));
    let shims = object.with_extension("include");
    std::fs::create_dir_all(&shims).map_err(|e| Error::io(format!("creating {}", shims.display()), e))?;
    for (name, text) in LIBC_SHIMS {
        let p = shims.join(name);
        std::fs::write(&p, text).map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    }
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => other,
    };
    let multiarch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let out = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", &format!("-D__TARGET_ARCH_{arch}")])
        .arg(format!("-I{}", dir.display()))
        .arg(format!("-I{}", shims.display()))
        .arg(format!("-I{multiarch}"))
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(object)
        .output()
        .map_err(|e| {
            Error::Unavailable(format!(
                "compiling {}: cannot run {} ({e}); install clang (scripts/setup.sh does) or set CLANG",
                source.display(),
                clang.to_string_lossy()
            ))
        })?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr);
        return Err(Error::Unavailable(format!(
            "compiling {} for BPF failed ({}; it needs libbpf's headers, Debian's libbpf-dev):\n{}",
            source.display(),
            out.status,
            tail(&text, COMPILER_TAIL_BYTES)
        )));
    }
    Ok(())
}

impl StructOpsAnchor {
    /// Builds `source` into `work_dir` and registers its struct_ops map `map`.
    pub fn register(source: &Path, map: &str, work_dir: &Path) -> Result<StructOpsAnchor> {
        if !source.is_file() {
            return Err(Error::Unavailable(format!(
                "anchor source {} not found (a kernel tree's tools/testing/selftests/bpf/progs/, or ../shared/anchors/linux-bpf/)",
                source.display()
            )));
        }
        std::fs::create_dir_all(work_dir).map_err(|e| Error::io(format!("creating {}", work_dir.display()), e))?;
        let stem = source.file_stem().map_or_else(|| "anchor".into(), |s| s.to_string_lossy().into_owned());
        let object_path: PathBuf = work_dir.join(format!("{stem}.bpf.o"));
        compile(source, &object_path)?;
        let bpf = |what: String| move |e: libbpf_rs::Error| Error::Unavailable(format!("{}: {what}: {e}", source.display()));
        let open = ObjectBuilder::default().open_file(&object_path).map_err(bpf("opening the compiled object".into()))?;
        let mut object = open.load().map_err(bpf("loading (does this kernel have BPF struct_ops?)".into()))?;
        let before = registered_ccs();
        let mut maps = object.maps_mut();
        let found = maps.find(|m| m.name().to_string_lossy() == map);
        let Some(mut m) = found else {
            drop(maps);
            let names: Vec<String> = object.maps().map(|m| m.name().to_string_lossy().into_owned()).collect();
            return Err(Error::Unavailable(format!("{}: no map named {map:?} (its maps: {names:?})", source.display())));
        };
        let link = m.attach_struct_ops().map_err(|e| {
            let hint = if before.len() > 1 { " (is a congestion control of the same name already registered?)" } else { "" };
            Error::Unavailable(format!("{}: registering struct_ops map {map:?}{hint}: {e}", source.display()))
        })?;
        drop(maps);
        let new: Vec<String> = registered_ccs().difference(&before).cloned().collect();
        let [name] = new.as_slice() else {
            return Err(Error::Unavailable(format!(
                "{}: registering {map:?} added {} congestion controls ({new:?}) where one was expected",
                source.display(),
                new.len()
            )));
        };
        Ok(StructOpsAnchor { name: name.clone(), _link: link, _object: object })
    }

    /// The congestion control name the scheme's sockets select.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `bpf:PATH:MAP`'s source path and struct_ops map name.
pub fn parse(name: &str) -> std::result::Result<(&str, &str), String> {
    let how = "write bpf:path/to/file.c:map (the path relative to the experiment file, the struct_ops map to register)";
    let (path, map) = name.rsplit_once(':').ok_or_else(|| format!("bpf:{name:?}: {how}"))?;
    let is_ident = map.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && map.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if path.is_empty() || !path.ends_with(".c") || !is_ident {
        return Err(format!("bpf:{name:?}: {how}"));
    }
    Ok((path, map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_takes_a_c_file_and_a_map_name() {
        assert_eq!(parse("../a/bpf_dctcp.c:dctcp"), Ok(("../a/bpf_dctcp.c", "dctcp")));
        assert_eq!(parse("/x:y/f.c:m_1"), Ok(("/x:y/f.c", "m_1")));
        for bad in ["f.c", "f.c:", ":m", "f.o:m", "f.c:1m", "f.c:m-x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_source_is_named() {
        let e = StructOpsAnchor::register(Path::new("/nonexistent/x.c"), "m", Path::new("/tmp")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/x.c") && e.contains("not found"), "{e}");
    }

    #[test]
    fn a_compiler_error_is_quoted() {
        let dir = std::env::temp_dir().join(format!("ccp-lab-anchor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("broken.c");
        std::fs::write(&src, "this is not C;\n").unwrap();
        let e = compile(&src, &dir.join("broken.o")).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.contains("broken.c"), "{e}");
    }
}
