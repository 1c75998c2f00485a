//! Compiles the BPF objects against a `vmlinux.h` generated from the running kernel's BTF.
//!
//! The header is generated at build time (bpftool, ~0.2 s) rather than committed: field
//! layouts differ between 6.18 trees (`min_tso_segs` vs `tso_segs`), and CO-RE relocations
//! cover only what the programs read, not the `tcp_congestion_ops` layout the loader checks.
//! The objects are embedded into the library with `include_bytes!`; no skeleton is generated,
//! because the loader works on an owned `libbpf_rs::Object`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const OBJECTS: &[&str] = &["ccp", "attach", "ce_marker"];
const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = Path::new("src/bpf");
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-env-changed=CCP_EBPF_BTF");

    let btf = env::var("CCP_EBPF_BTF").unwrap_or_else(|_| BTF.to_string());
    let vmlinux = out.join("vmlinux.h");
    let dump = Command::new("bpftool").args(["btf", "dump", "file", &btf, "format", "c"]).output();
    match dump {
        Ok(o) if o.status.success() => std::fs::write(&vmlinux, o.stdout).expect("write vmlinux.h"),
        Ok(o) => panic!(
            "bpftool could not dump the kernel's BTF from {btf} (set CCP_EBPF_BTF to another file): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("bpftool is needed to build ccp-ebpf (scripts/setup.sh installs it): {e}"),
    }

    for name in OBJECTS {
        let source = src.join(format!("{name}.bpf.c"));
        let obj = out.join(format!("{name}.bpf.o"));
        SkeletonBuilder::new()
            .source(&source)
            .obj(&obj)
            // v3: atomic fetch-and-add for flow ids; -I order: the generated vmlinux.h first.
            .clang_args([format!("-I{}", out.display()), format!("-I{}", src.display()), "-mcpu=v3".into(), "-Wall".into()])
            .build()
            .unwrap_or_else(|e| panic!("compiling {}: {e:#}", source.display()));
    }
}
