//! Compiles ccp-lab's BPF objects: the receiver's CE-echo congestion control and the per-ACK
//! SRTT histogram (`src/bpf/*.bpf.c`; how: `ccp-bpf-build`).

fn main() {
    ccp_bpf_build::compile("ccp-lab", &["ce_echo", "srtt_hist"]);
}
