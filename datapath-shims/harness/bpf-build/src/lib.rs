//! The one way this workspace compiles BPF objects, for the build scripts of `ccp-ebpf`,
//! `ccp-inigo-receiver` and `ccp-lab`.
//!
//! `vmlinux.h` is generated at build time from the running kernel's BTF (bpftool, ~0.2 s)
//! rather than committed: struct layouts differ between kernel builds (`tcp_sock`,
//! `min_tso_segs` vs `tso_segs` in 6.18 trees), and CO-RE relocations cover only the fields the
//! programs read, not the `tcp_congestion_ops` layout the loader checks. `CCP_EBPF_BTF` names
//! another BTF file. Objects land in `OUT_DIR` as `NAME.bpf.o`, for `include_bytes!`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const BTF: &str = "/sys/kernel/btf/vmlinux";
/// Where every crate keeps its BPF sources (and the headers they share).
const SRC: &str = "src/bpf";

/// Compiles `src/bpf/NAME.bpf.c` into `$OUT_DIR/NAME.bpf.o` for each name, with the generated
/// `vmlinux.h` and `src/bpf` on the include path, for BPF ISA v3 (32-bit atomics). Panics with
/// what is missing: this runs in a build script, where a panic is the error report. `package`
/// names the crate in those messages.
pub fn compile(package: &str, objects: &[&str]) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = Path::new(SRC);
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-env-changed=CCP_EBPF_BTF");

    let btf = env::var("CCP_EBPF_BTF").unwrap_or_else(|_| BTF.to_string());
    match Command::new("bpftool").args(["btf", "dump", "file", &btf, "format", "c"]).output() {
        Ok(o) if o.status.success() => std::fs::write(out.join("vmlinux.h"), o.stdout).expect("write vmlinux.h"),
        Ok(o) => panic!(
            "bpftool could not dump the kernel's BTF from {btf} (set CCP_EBPF_BTF to another file): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("bpftool is needed to build {package} (scripts/setup.sh installs it): {e}"),
    }

    for name in objects {
        let source = src.join(format!("{name}.bpf.c"));
        SkeletonBuilder::new()
            .source(&source)
            .obj(out.join(format!("{name}.bpf.o")))
            // The generated vmlinux.h first, then the crate's own headers.
            .clang_args([format!("-I{}", out.display()), format!("-I{}", src.display()), "-mcpu=v3".into(), "-Wall".into()])
            .build()
            .unwrap_or_else(|e| panic!("compiling {}: {e:#}", source.display()));
    }
}
