//! Compiles the receiver's BPF object (`src/bpf/inigo_receiver.bpf.c`; how: `ccp-bpf-build`).
//! It is embedded with `include_bytes!`; no skeleton.

fn main() {
    ccp_bpf_build::compile("ccp-inigo-receiver", &["inigo_receiver"]);
}
