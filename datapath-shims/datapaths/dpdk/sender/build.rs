//! Compiles `csrc/port.c` against Debian's DPDK (pkg-config `libdpdk`, installed by
//! `scripts/setup.sh`) and links the DPDK libraries it needs. The drivers (net_af_xdp,
//! net_af_packet, …) are plugins the EAL loads from its driver directory at start-up.

fn main() {
    println!("cargo:rerun-if-changed=csrc/port.c");
    let dpdk = match pkg_config::Config::new().atleast_version("22.11").cargo_metadata(true).probe("libdpdk") {
        Ok(lib) => lib,
        Err(e) => panic!(
            "DPDK 22.11 or newer was not found through pkg-config (libdpdk): {e}\n\
             Install it with scripts/setup.sh (Debian: apt-get install libdpdk-dev dpdk)."
        ),
    };
    let mut build = cc::Build::new();
    build.file("csrc/port.c").warnings(true).flag_if_supported("-Wno-deprecated-declarations");
    for p in &dpdk.include_paths {
        build.include(p);
    }
    // DPDK's headers need rte_config.h first and a CPU baseline of at least SSE4.2.
    build.flag("-include").flag("rte_config.h").flag("-march=corei7");
    build.compile("ccpd_port");
}
