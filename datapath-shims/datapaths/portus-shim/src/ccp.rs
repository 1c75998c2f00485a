//! Glue to libccp 1.2 (the `libccp` crate): the datapath and connection callbacks, and its
//! initialisation.
//!
//! libccp calls back only from inside `DatapathBuilder::init`, `Connection::start`, `invoke`,
//! `Datapath::recv_msg` and connection drops, all on the loop's thread: the callbacks share
//! [`Shared`] with the loop through an `Rc` and never re-enter libccp.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ccp_libccp_host::callbacks::{log_level, Sent};
use ccp_libccp_host::errors::describe;
use ccp_libccp_host::ipc::{agent_gone, Channel};
use ccp_libccp_host::throttle::Throttle;
use libccp::{CongestionOps, Datapath, DatapathBuilder, DatapathOps};
use tracing::{debug, warn};

/// What libccp's callbacks and the loop share.
pub struct Shared {
    pub chan: Channel,
    /// The sid of the last CREATE libccp sent: libccp assigns sids but the crate does not expose
    /// them, so they are read off the wire.
    create_sid: Cell<Option<u32>>,
    /// A send found nobody reading the agent's socket.
    agent_lost: Cell<bool>,
    reports: Cell<u64>,
    send_errors: Cell<u64>,
    throttle: RefCell<Throttle>,
}

impl Shared {
    pub fn new(chan: Channel) -> Shared {
        Shared {
            chan,
            create_sid: Cell::new(None),
            agent_lost: Cell::new(false),
            reports: Cell::new(0),
            send_errors: Cell::new(0),
            throttle: RefCell::new(Throttle::default()),
        }
    }

    pub fn take_create_sid(&self) -> Option<u32> {
        self.create_sid.take()
    }

    /// Whether a send found the agent gone since the last call.
    pub fn take_agent_lost(&self) -> bool {
        self.agent_lost.take()
    }

    /// MEASURE messages with fields (reports, not closes) sent to the agent.
    pub fn reports(&self) -> u64 {
        self.reports.get()
    }

    pub fn send_errors(&self) -> u64 {
        self.send_errors.get()
    }

    /// Logs `msg` as a warning the 1st, 10th, 100th, … time.
    pub fn warn_throttled(&self, msg: &str) {
        if let Some(count) = self.throttle.borrow_mut().hit(msg) {
            warn!(count, "{msg}");
        }
    }

    fn debug_throttled(&self, msg: &str) {
        if let Some(count) = self.throttle.borrow_mut().hit(msg) {
            debug!(count, "{msg}");
        }
    }
}

/// libccp's datapath callbacks: messages go to the agent, log lines to the log.
struct ToAgent(Rc<Shared>);

impl DatapathOps for ToAgent {
    fn send_msg(&mut self, msg: &[u8]) {
        let shared = &self.0;
        let sent = Sent::of(msg);
        if let Some(Sent::Create { sid }) = sent {
            shared.create_sid.set(Some(sid));
        }
        match shared.chan.send(msg) {
            Ok(()) => {
                if let Some(Sent::Report { .. }) = sent {
                    shared.reports.set(shared.reports.get() + 1);
                }
            }
            Err(e) => {
                shared.send_errors.set(shared.send_errors.get() + 1);
                if agent_gone(&e) {
                    shared.agent_lost.set(true);
                } else {
                    shared.warn_throttled(&format!("sending to {} failed: {e}", shared.chan.agent_path().display()));
                }
            }
        }
    }

    fn log(&self, level: u32, msg: &str) {
        // Its warnings repeat per ACK until a program is installed; what matters is reported
        // with error codes by the loop, so libccp's own lines stay at debug.
        self.0.debug_throttled(&format!("libccp {}: {}", log_level(level), msg.trim_end()));
    }
}

/// What libccp last commanded for a connection. The loop applies it to the control map and
/// feeds it back as `snd_cwnd`/`snd_rate` (ebpf-datapath pitfall G: the kernel's own value lags
/// the command by an ACK or more, and libccp re-issues whatever it is fed, undoing the agent).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Commanded {
    pub cwnd: Option<u32>,
    pub rate: Option<u32>,
}

impl CongestionOps for Commanded {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = Some(cwnd);
    }

    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = Some(rate);
    }
}

/// Initialises libccp, which sends READY to the agent (if one is there), with a zeroed table of
/// `connections` slots in place of the crate's ([`crate::table`]).
pub fn init_datapath(id: u32, connections: usize, shared: &Rc<Shared>) -> Result<Datapath, String> {
    let mut dp = DatapathBuilder::default()
        .with_id(id)
        .with_ops(ToAgent(Rc::clone(shared)))
        .init()
        .map_err(|e| format!("libccp initialisation failed: {}", describe(&e)))?;
    crate::table::replace(&mut dp, connections)?;
    Ok(dp)
}
