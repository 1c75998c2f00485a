//! Compiles the datapath's BPF objects (`src/bpf/*.bpf.c`; how: `ccp-bpf-build`). They are
//! embedded into the library with `include_bytes!`; no skeleton is generated, because the loader
//! works on an owned `libbpf_rs::Object`.

fn main() {
    ccp_bpf_build::compile("ccp-ebpf", &["ccp", "attach", "ce_marker", "reno_ref"]);
}
