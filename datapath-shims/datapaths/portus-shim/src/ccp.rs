//! Glue to libccp 1.2 (the `libccp` crate): the datapath and connection callbacks, its
//! initialisation, and its error codes.
//!
//! libccp calls back only from inside `DatapathBuilder::init`, `Connection::start`, `invoke`,
//! `Datapath::recv_msg` and connection drops, all on the loop's thread: the callbacks share
//! [`Shared`] with the loop through an `Rc` and never re-enter libccp.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

pub use ccp_libccp_errors::{code, describe};
use libccp::{CongestionOps, Datapath, DatapathBuilder, DatapathOps};
use tracing::{debug, warn};

use crate::ipc::{agent_gone, Channel};
use crate::throttle::Throttle;

/// libccp message types this side needs to recognise (`serialize.h`).
const CREATE: u16 = 0;
const MEASURE: u16 = 1;

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

/// The `u16 type | u16 len | u32 sid` header every libccp message starts with.
fn header(msg: &[u8]) -> Option<(u16, u32)> {
    let typ = u16::from_le_bytes(msg.get(0..2)?.try_into().ok()?);
    let sid = u32::from_le_bytes(msg.get(4..8)?.try_into().ok()?);
    Some((typ, sid))
}

/// libccp's datapath callbacks: messages go to the agent, log lines to the log.
struct ToAgent(Rc<Shared>);

impl DatapathOps for ToAgent {
    fn send_msg(&mut self, msg: &[u8]) {
        let shared = &self.0;
        let hdr = header(msg);
        if let Some((CREATE, sid)) = hdr {
            shared.create_sid.set(Some(sid));
        }
        match shared.chan.send(msg) {
            Ok(()) => {
                // A MEASURE without fields is the close of a flow.
                let fields = msg.get(12..16).is_some_and(|n| n != [0; 4]);
                if matches!(hdr, Some((MEASURE, _))) && fields {
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
        // Levels of `enum ccp_log_level`: TRACE, DEBUG, INFO, WARN, ERROR. Its warnings repeat
        // per ACK until a program is installed; what matters is reported with error codes by
        // the loop, so libccp's own lines stay at debug.
        let level = ["trace", "debug", "info", "warn"].get(level as usize).copied().unwrap_or("error");
        self.0.debug_throttled(&format!("libccp {level}: {}", msg.trim_end()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_without_trusting_the_length() {
        assert_eq!(header(&[0, 0, 96, 0, 7, 0, 0, 0]), Some((CREATE, 7)));
        assert_eq!(header(&[1, 0, 16]), None);
    }
}
