//! Glue to libccp: the datapath and connection callbacks, initialisation, and error codes.
//!
//! This mirrors how a real libccp user-space datapath integrates (ccp-anchors §2.5): every
//! message libccp produces goes to the agent over the [`Channel`], and every datagram received
//! is handed to `Datapath::recv_msg` (by the driver).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use ccp_libccp_host::callbacks::{log_level, Sent};
use ccp_libccp_host::errors::describe;
use ccp_libccp_host::ipc::Channel;
use ccp_libccp_host::throttle::Throttle;
use libccp::{CongestionOps, Datapath, DatapathBuilder, DatapathOps};

/// State shared between libccp's callbacks and the driver (same thread; libccp calls back
/// only from inside `init`, `Connection::start`, `invoke` and connection drops).
#[derive(Default)]
pub struct Shared {
    /// The sid of the last CREATE libccp sent: libccp assigns sids but the crate does not
    /// expose them, so they are read off the wire.
    create_sid: Cell<Option<u32>>,
    /// MEASURE messages with at least one field sent to the agent, per sid.
    reports: RefCell<HashMap<u32, u64>>,
    /// CREATEs no agent took (none was reading its socket), per sid, to be sent again.
    unsent_creates: RefCell<HashMap<u32, Vec<u8>>>,
    throttle: RefCell<Throttle>,
}

impl Shared {
    pub fn take_create_sid(&self) -> Option<u32> {
        self.create_sid.take()
    }

    /// The reports flow `sid` sent, counted afresh for the next flow libccp gives the sid.
    pub fn take_reports(&self, sid: u32) -> u64 {
        self.reports.borrow_mut().remove(&sid).unwrap_or(0)
    }

    /// Sends flow `sid`'s CREATE again if no agent took it. libccp re-sends a CREATE at the
    /// flow's next invoke when its send callback fails, but the crate's callback cannot fail:
    /// without this, a flow started while the agent restarts would never be announced to it.
    pub fn retry_create(&self, sid: u32, chan: &Channel) {
        let Some(msg) = self.unsent_creates.borrow().get(&sid).cloned() else {
            return;
        };
        if chan.send(&msg).is_ok() {
            self.unsent_creates.borrow_mut().remove(&sid);
        }
    }

    /// Flow `sid` ended: its CREATE is never sent again (libccp hands the sid out anew).
    pub fn forget_create(&self, sid: u32) {
        self.unsent_creates.borrow_mut().remove(&sid);
    }

    /// Writes `msg` to stderr the 1st, 10th, 100th, … time: some conditions repeat on every ACK.
    pub fn diag(&self, msg: &str) {
        match self.throttle.borrow_mut().hit(msg) {
            Some(1) => eprintln!("ccp-test-datapath: {msg}"),
            Some(count) => eprintln!("ccp-test-datapath: {msg} (seen {count} times)"),
            None => {}
        }
    }
}

/// libccp's datapath callbacks: messages go to the agent, log lines to stderr.
struct AgentSender {
    chan: Rc<Channel>,
    shared: Rc<Shared>,
}

impl DatapathOps for AgentSender {
    fn send_msg(&mut self, msg: &[u8]) {
        let sent = Sent::of(msg);
        if let Some(Sent::Create { sid }) = sent {
            self.shared.create_sid.set(Some(sid));
        }
        match self.chan.send(msg) {
            Ok(()) => {
                if let Some(Sent::Report { sid }) = sent {
                    *self.shared.reports.borrow_mut().entry(sid).or_default() += 1;
                }
            }
            Err(e) => {
                if let Some(Sent::Create { sid }) = sent {
                    self.shared.unsent_creates.borrow_mut().insert(sid, msg.to_vec());
                }
                let what = sent.map_or("a message", |s| s.name());
                self.shared.diag(&format!("sending {what} to {} failed: {e}", self.chan.agent_path().display()));
            }
        }
    }

    fn log(&self, level: u32, msg: &str) {
        self.shared.diag(&format!("libccp {}: {}", log_level(level), msg.trim_end()));
    }
}

/// Per-connection callbacks: remember what libccp commands. The driver applies it to the flow
/// and feeds it back as `snd_cwnd`/`snd_rate`, so libccp's `Cwnd`/`Rate` registers always
/// start from the last commanded values (ebpf-datapath pitfall G: feeding a lagging value back
/// makes libccp re-issue it and lose the agent's update).
pub struct Commanded {
    pub cwnd: u32,
    pub rate: u32,
}

impl CongestionOps for Commanded {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = cwnd;
    }

    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = rate;
    }
}

/// Makes sure libccp's connection table starts out zeroed.
///
/// libccp 1.2.0's `DatapathBuilder::init` `malloc`s its 1024-slot connection table
/// (1024 × 216 B = 216 KiB) without zeroing it, while `ccp_connection_start` claims the first
/// slot whose `index` is 0: garbage makes slots look taken, so sids come out random (466, 478,
/// … were observed; ebpf-datapath §8), or no connection can be started at all (what a heap
/// dirtied with a freed 300 KiB block produced when this was checked). glibc serves a request that size from fresh, kernel-
/// zeroed mmap pages only if it is above `M_MMAP_THRESHOLD`, and that threshold (128 KiB by
/// default) grows dynamically, up to 32 MiB, each time a large mmap'ed block is freed; after
/// that the table can be carved out of recycled, dirty heap memory. Pinning the threshold at
/// 64 KiB also switches the dynamic adjustment off, so the table comes from fresh pages as long
/// as the heap holds no free chunk of 216 KiB, which is the case this early in the process.
/// Without patching the crate we cannot `calloc` the table; the driver double-checks the
/// outcome by verifying that the first flows get sids 1, 2, 3, … (Other C libraries are left
/// alone: musl, for one, always serves requests this large with mmap.)
fn pin_mmap_threshold() {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallopt only adjusts allocator parameters; it is safe to call at any time.
        let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * 1024) };
        if ok != 1 {
            eprintln!("ccp-test-datapath: mallopt(M_MMAP_THRESHOLD) failed; sids may be random");
        }
    }
}

/// Initialises libccp, which sends READY to the agent.
pub fn init_datapath(id: u32, chan: &Rc<Channel>, shared: Rc<Shared>) -> Result<Datapath, String> {
    pin_mmap_threshold();
    DatapathBuilder::default()
        .with_id(id)
        .with_ops(AgentSender { chan: Rc::clone(chan), shared })
        .init()
        .map_err(|e| format!("libccp initialisation failed: {}", describe(&e)))
}
