//! The kernel's own Reno registered as a BPF congestion control (`reno_ref.bpf.c`), so that a
//! benchmark measures its per-ACK cost the way it measures ccp's: `run_time_ns / run_cnt` of the
//! per-ACK program while `kernel.bpf_stats_enabled` is on. Unregistered on drop.

use std::os::fd::AsFd;

use libbpf_rs::{Link, MapCore, Object, ObjectBuilder};

use crate::instance::ProgStats;
use crate::{Error, RENO_REF_OBJECT};

/// The name it registers under (`setsockopt(TCP_CONGESTION)`, `iperf3 -C`).
pub const NAME: &str = "ccp_reno_ref";

pub struct RenoReference {
    _link: Link,
    object: Object,
}

impl RenoReference {
    pub fn register() -> Result<RenoReference, Error> {
        let bpf = |what: &'static str| move |e: libbpf_rs::Error| Error::Bpf(format!("{what}: {e}"));
        let open = ObjectBuilder::default().open_memory(RENO_REF_OBJECT).map_err(bpf("opening the Reno reference"))?;
        let mut object = open.load().map_err(bpf("loading the Reno reference"))?;
        let link = object
            .maps_mut()
            .find(|m| m.name() == "reno_ref")
            .ok_or_else(|| Error::Bpf("the Reno reference has no struct_ops map".into()))?
            .attach_struct_ops()
            .map_err(bpf("registering the Reno reference"))?;
        Ok(RenoReference { _link: link, object })
    }

    /// Run-time statistics of its per-ACK program (cong_avoid).
    pub fn cong_avoid_stats(&self) -> Option<ProgStats> {
        let prog = self.object.progs().find(|p| p.name() == "reno_ref_cong_avoid")?;
        crate::progstats::of("reno_ref_cong_avoid", prog.as_fd())
    }
}
