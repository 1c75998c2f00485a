//! Compiles the receiver's BPF object (`src/bpf/inigo_receiver.bpf.c`) against a `vmlinux.h`
//! generated from the running kernel's BTF, as `ccp-ebpf` and `ccp-lab` do for theirs: the header
//! is generated, not committed, because struct layouts (`tcp_sock` here) differ between kernel
//! builds. The object is embedded with `include_bytes!`; no skeleton.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = Path::new("src/bpf");
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-env-changed=CCP_EBPF_BTF");
    let btf = env::var("CCP_EBPF_BTF").unwrap_or_else(|_| BTF.to_string());
    let vmlinux = out.join("vmlinux.h");
    match Command::new("bpftool").args(["btf", "dump", "file", &btf, "format", "c"]).output() {
        Ok(o) if o.status.success() => std::fs::write(&vmlinux, o.stdout).expect("write vmlinux.h"),
        Ok(o) => panic!(
            "bpftool could not dump the kernel's BTF from {btf} (set CCP_EBPF_BTF to another file): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("bpftool is needed to build ccp-inigo-receiver (scripts/setup.sh installs it): {e}"),
    }
    let source = src.join("inigo_receiver.bpf.c");
    SkeletonBuilder::new()
        .source(&source)
        .obj(out.join("inigo_receiver.bpf.o"))
        // v3: 32-bit atomics (the per-connection try-lock); the generated vmlinux.h first.
        .clang_args([format!("-I{}", out.display()), format!("-I{}", src.display()), "-mcpu=v3".into(), "-Wall".into()])
        .build()
        .unwrap_or_else(|e| panic!("compiling {}: {e:#}", source.display()));
}
