//! Compiles ccp-lab's BPF objects (`src/bpf/*.bpf.c`: the receiver's CE-echo congestion control
//! and the per-ACK SRTT histogram) against a `vmlinux.h` generated from the running kernel's BTF,
//! as `ccp-ebpf` does for its objects (the header is generated, not committed, because struct
//! layouts differ between kernel builds).

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
        Err(e) => panic!("bpftool is needed to build ccp-lab (scripts/setup.sh installs it): {e}"),
    }
    for name in ["ce_echo", "srtt_hist"] {
        let source = src.join(format!("{name}.bpf.c"));
        SkeletonBuilder::new()
            .source(&source)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([format!("-I{}", out.display()), "-mcpu=v3".into(), "-Wall".into()])
            .build()
            .unwrap_or_else(|e| panic!("compiling {}: {e:#}", source.display()));
    }
}
