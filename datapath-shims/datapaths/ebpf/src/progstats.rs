//! Run-time statistics of a BPF program, from `bpf_prog_get_info_by_fd`.
//!
//! The kernel counts `run_cnt`/`run_time_ns` only while `kernel.bpf_stats_enabled` is 1; the
//! benchmark turns it on for its measurement and back off.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use crate::instance::ProgStats;

/// Statistics of the loaded program with this id (from the agent's log, say).
pub fn by_id(id: u32) -> Option<ProgStats> {
    let fd = libbpf_rs::Program::fd_from_id(id).ok()?;
    let stats = of("", fd.as_fd())?;
    Some(stats)
}

/// Statistics of the program behind `fd`, named `name` (the kernel truncates names to 15).
pub(crate) fn of(name: &str, fd: BorrowedFd<'_>) -> Option<ProgStats> {
    // SAFETY: bpf_prog_info is plain old data; zeroed is its documented initial state.
    let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libbpf_rs::libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` and `len` are valid for writes; the kernel writes at most `len` bytes.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    (rc == 0).then(|| ProgStats { name: name.to_string(), id: info.id, run_cnt: info.run_cnt, run_time_ns: info.run_time_ns })
}
