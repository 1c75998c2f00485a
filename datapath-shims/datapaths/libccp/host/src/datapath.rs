//! Glue to libccp 1.2 (the `libccp` crate): the datapath and connection callbacks, and its
//! initialisation.
//!
//! libccp calls back only from inside `DatapathBuilder::init`, `Connection::start`, `invoke`,
//! `Datapath::recv_msg` and connection drops, all on the loop's thread: the callbacks share
//! [`Shared`] with the loop through an `Rc` and never re-enter libccp.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::callbacks::{log_level, Sent};
use crate::errors::{code, describe};
use crate::inbound::{judge, Verdict};
use crate::ipc::{agent_gone, AgentId, Channel};
use crate::throttle::Throttle;
use libccp::{CongestionOps, Datapath, DatapathBuilder, DatapathOps, LibccpError};
use tracing::{debug, warn};

/// What libccp's callbacks and the loop share.
pub struct Shared {
    pub chan: Channel,
    /// The sid of the last CREATE libccp sent: libccp assigns sids but the crate does not expose
    /// them, so they are read off the wire.
    create_sid: Cell<Option<u32>>,
    /// The agent the datapath serves: the one there at the start (libccp's own READY reached
    /// it), or the last to take READY since; none while there is none.
    agent: Cell<Option<AgentId>>,
    /// Agents found hung.
    agents_hung: Cell<u64>,
    /// A send found nobody reading the agent's socket.
    agent_lost: Cell<bool>,
    /// Whether the agent takes what is sent to it (a hung agent keeps its socket but not up).
    uptake: Cell<Uptake>,
    reports: Cell<u64>,
    send_errors: Cell<u64>,
    throttle: RefCell<Throttle>,
}

impl Shared {
    pub fn new(chan: Channel) -> Shared {
        Shared {
            agent: Cell::new(chan.agent_identity()),
            agents_hung: Cell::new(0),
            chan,
            create_sid: Cell::new(None),
            agent_lost: Cell::new(false),
            uptake: Cell::new(Uptake::default()),
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

    /// The agent the datapath serves, if any.
    pub fn agent(&self) -> Option<AgentId> {
        self.agent.get()
    }

    /// Agents found hung so far.
    pub fn agents_hung(&self) -> u64 {
        self.agents_hung.get()
    }

    /// Sends `msg` to the agent (waiting a bounded time for room, see `ccp_libccp_host::ipc`),
    /// noting whether the agent took it.
    pub fn send(&self, msg: &[u8]) -> io::Result<()> {
        let r = self.chan.send(msg);
        let mut u = self.uptake.get();
        match &r {
            Ok(()) => u.taken(),
            Err(e) if no_room(e) => u.refused(Instant::now()),
            Err(_) => {}
        }
        self.uptake.set(u);
        r
    }

    /// How long the agent has refused every message for want of room in its queue, when the
    /// latest refusal is at most `fresh` old (see [`Uptake`]).
    pub fn refusing_for(&self, now: Instant, fresh: Duration) -> Option<Duration> {
        self.uptake.get().refusing_for(now, fresh)
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

    /// Logs `msg` at debug level the 1st, 10th, 100th, … time.
    pub fn debug_throttled(&self, msg: &str) {
        if let Some(count) = self.throttle.borrow_mut().hit(msg) {
            debug!(count, "{msg}");
        }
    }
}

/// What a datapath does with its flows as its agent comes and goes ([`Shared::follow_agent`]
/// and [`Shared::lose_agent`] decide when).
pub trait AgentPresence {
    /// The agent is gone (`why`, for the log): the flows continue on the datapath's fallback
    /// until an agent returns.
    fn agent_gone(&mut self, why: &str);

    /// An agent took READY: the datapath announces its flows.
    fn agent_back(&mut self);
}

/// What became of the agent since the loop last looked (once per tick).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentChange {
    /// As it was: the same agent reading, or still none.
    Same,
    /// It keeps its socket but has refused every message for want of room for this long (at
    /// least the silence timeout): it hangs.
    Hung(Duration),
    /// Its socket no longer takes datagrams.
    Gone,
    /// Another agent reads a new socket file in its place.
    Restarted(AgentId),
    /// An agent reads the socket where there was none.
    Arrived(AgentId),
}

impl Shared {
    /// Compares the agent the loop knows with what the socket file and the agent's uptake say
    /// now. `fresh`: how recent a refusal must be to count (a tick or two); `silence`: how long
    /// an agent may refuse everything before it counts as hung.
    pub fn agent_change(&self, known: Option<AgentId>, now: Instant, fresh: Duration, silence: Duration) -> AgentChange {
        if known.is_some() {
            if let Some(refusing) = self.refusing_for(now, fresh).filter(|d| *d >= silence) {
                return AgentChange::Hung(refusing);
            }
        }
        match (known, self.chan.agent_identity()) {
            (Some(old), Some(new)) if old == new => AgentChange::Same,
            (Some(_), Some(new)) => AgentChange::Restarted(new),
            (Some(_), None) => AgentChange::Gone,
            (None, Some(new)) => AgentChange::Arrived(new),
            (None, None) => AgentChange::Same,
        }
    }

    /// Once per tick: what became of the agent ([`Shared::agent_change`]) and the datapath's
    /// reaction. An agent that arrives or restarts is sent READY (with `datapath_id`) before
    /// the datapath serves it; one whose socket has no room for READY stays away until a later
    /// tick finds room.
    pub fn follow_agent(&self, dp: &mut dyn AgentPresence, datapath_id: u32, now: Instant, fresh: Duration, silence: Duration) {
        match self.agent_change(self.agent.get(), now, fresh, silence) {
            AgentChange::Same => {}
            AgentChange::Hung(refusing) => {
                self.agents_hung.set(self.agents_hung.get() + 1);
                self.lose_agent(
                    dp,
                    &format!(
                        "it has not read its socket for {} ms: every message since was refused for want of room",
                        refusing.as_millis()
                    ),
                );
            }
            AgentChange::Gone => self.lose_agent(dp, "its socket no longer takes datagrams"),
            AgentChange::Restarted(new) => {
                self.lose_agent(dp, "it restarted");
                self.welcome(dp, new, datapath_id);
            }
            AgentChange::Arrived(new) => self.welcome(dp, new, datapath_id),
        }
    }

    /// The agent is gone (`why`, for the log): the datapath hands its flows to its fallback.
    /// Nothing when it served none.
    pub fn lose_agent(&self, dp: &mut dyn AgentPresence, why: &str) {
        if self.agent.take().is_none() {
            return;
        }
        dp.agent_gone(why);
        // The closes libccp just tried to send failed the same way.
        self.take_agent_lost();
    }

    /// Agent `id` is served once it took READY.
    fn welcome(&self, dp: &mut dyn AgentPresence, id: AgentId, datapath_id: u32) {
        if self.send_ready(datapath_id) {
            self.agent.set(Some(id));
            dp.agent_back();
        }
    }

    /// Sends READY; false when the agent's socket takes none yet (it is not reading).
    fn send_ready(&self, datapath_id: u32) -> bool {
        match ccp_wire::Msg::Ready(ccp_wire::Ready { datapath_id }).to_bytes() {
            Ok(ready) => match self.send(&ready) {
                Ok(()) => {}
                Err(e) if no_room(&e) || agent_gone(&e) => {
                    self.debug_throttled(&format!("the agent's socket takes no READY yet ({e}): it is not reading"));
                    return false;
                }
                Err(e) => self.warn_throttled(&format!("sending READY failed: {e}")),
            },
            Err(e) => warn!(error = %e, "encoding READY failed"),
        }
        true
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
        match shared.send(msg) {
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

/// A send that failed because the agent's queue has no room: the agent is not reading (a full
/// queue of `net.unix.max_dgram_qlen` datagrams, or our socket's send buffer, which holds what
/// the agent has not read yet).
pub fn no_room(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock || matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENOMEM))
}

/// Whether the agent takes the messages sent to it.
///
/// An agent that hangs with its socket open (stopped, deadlocked, stuck in a long computation)
/// looks present: its socket file is there and accepts connections. What gives it away is its
/// queue: a reading agent empties it, a hung one leaves it full, so that every send fails for
/// want of room. Refusals since the last message it took say how long it has not read. A refusal
/// must also be recent: an old one followed by nothing sent (idle flows) says nothing about now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Uptake {
    /// The first refusal since the agent last took a message.
    refused_since: Option<Instant>,
    last_refused: Option<Instant>,
}

impl Uptake {
    /// The agent took a message: it reads.
    pub fn taken(&mut self) {
        *self = Uptake::default();
    }

    /// A message found no room in the agent's queue.
    pub fn refused(&mut self, now: Instant) {
        self.refused_since.get_or_insert(now);
        self.last_refused = Some(now);
    }

    /// How long every message has been refused, if the latest refusal is at most `fresh` old.
    pub fn refusing_for(&self, now: Instant, fresh: Duration) -> Option<Duration> {
        let (since, last) = (self.refused_since?, self.last_refused?);
        (now.saturating_duration_since(last) <= fresh).then(|| now.saturating_duration_since(since))
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

    const FRESH: Duration = Duration::from_millis(200);

    #[test]
    fn refusals_since_the_last_message_taken_say_how_long_the_agent_has_not_read() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut u = Uptake::default();
        assert_eq!(u.refusing_for(t0, FRESH), None, "nothing refused");
        u.refused(ms(0));
        u.refused(ms(300));
        u.refused(ms(900));
        assert_eq!(u.refusing_for(ms(1000), FRESH), Some(Duration::from_millis(1000)), "since the first refusal");
        u.taken();
        assert_eq!(u.refusing_for(ms(1000), FRESH), None, "a message taken: the agent reads");
        u.refused(ms(1100));
        assert_eq!(u.refusing_for(ms(1200), FRESH), Some(Duration::from_millis(100)), "counting again from there");
    }

    #[test]
    fn an_old_refusal_followed_by_nothing_sent_is_no_evidence() {
        let t0 = Instant::now();
        let mut u = Uptake::default();
        u.refused(t0);
        assert_eq!(u.refusing_for(t0 + Duration::from_millis(150), FRESH), Some(Duration::from_millis(150)));
        assert_eq!(u.refusing_for(t0 + Duration::from_secs(5), FRESH), None, "nothing tried since");
        u.refused(t0 + Duration::from_secs(5));
        assert_eq!(
            u.refusing_for(t0 + Duration::from_secs(5), FRESH),
            Some(Duration::from_secs(5)),
            "refused again: still not read"
        );
    }

    #[test]
    fn the_agent_is_seen_arriving_restarting_and_going() {
        use crate::ipc::{Bind, Endpoints};
        use std::os::unix::net::UnixDatagram;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        let ep = Endpoints { dir: dir.clone(), name: "dp".into(), agent: "agent".into(), bind: Bind::Absolute };
        let shared = Shared::new(Channel::open(&ep).unwrap());
        let (now, fresh, silence) = (Instant::now(), FRESH, Duration::from_secs(1));
        assert_eq!(shared.agent_change(None, now, fresh, silence), AgentChange::Same, "no agent, none known");
        let agent = UnixDatagram::bind(dir.join("agent")).unwrap();
        let AgentChange::Arrived(first) = shared.agent_change(None, now, fresh, silence) else { panic!("not seen arriving") };
        assert_eq!(shared.agent_change(Some(first), now, fresh, silence), AgentChange::Same);
        drop(agent);
        std::fs::remove_file(dir.join("agent")).unwrap();
        let _again = UnixDatagram::bind(dir.join("agent")).unwrap();
        assert!(matches!(shared.agent_change(Some(first), now, fresh, silence), AgentChange::Restarted(id) if id != first));
        drop(_again);
        std::fs::remove_file(dir.join("agent")).unwrap();
        assert_eq!(shared.agent_change(Some(first), now, fresh, silence), AgentChange::Gone);
    }

    /// What `follow_agent` and `lose_agent` asked of the datapath.
    #[derive(Default)]
    struct Seen(Vec<String>);

    impl AgentPresence for Seen {
        fn agent_gone(&mut self, why: &str) {
            self.0.push(format!("gone: {why}"));
        }
        fn agent_back(&mut self) {
            self.0.push("back".into());
        }
    }

    #[test]
    fn the_datapath_follows_its_agent_once_per_change_and_greets_it_with_ready() {
        use crate::ipc::{Bind, Endpoints};
        use std::os::unix::net::UnixDatagram;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        let ep = Endpoints { dir: dir.clone(), name: "dp".into(), agent: "agent".into(), bind: Bind::Absolute };
        let shared = Shared::new(Channel::open(&ep).unwrap());
        let (now, fresh, silence) = (Instant::now(), FRESH, Duration::from_secs(1));
        let mut dp = Seen::default();
        shared.follow_agent(&mut dp, 7, now, fresh, silence);
        assert!(dp.0.is_empty() && shared.agent().is_none(), "no agent, none served");
        let agent = UnixDatagram::bind(dir.join("agent")).unwrap();
        shared.follow_agent(&mut dp, 7, now, fresh, silence);
        assert_eq!(dp.0, ["back"]);
        assert!(shared.agent().is_some());
        let mut buf = [0u8; 64];
        let n = agent.recv(&mut buf).unwrap();
        assert!(matches!(ccp_wire::decode(&buf[..n]).unwrap().0, ccp_wire::Msg::Ready(r) if r.datapath_id == 7), "READY first");
        shared.follow_agent(&mut dp, 7, now, fresh, silence);
        assert_eq!(dp.0.len(), 1, "the same agent: nothing to do");
        drop(agent);
        std::fs::remove_file(dir.join("agent")).unwrap();
        shared.follow_agent(&mut dp, 7, now, fresh, silence);
        shared.lose_agent(&mut dp, "a message found its socket closed");
        assert_eq!(dp.0, ["back", "gone: its socket no longer takes datagrams"], "gone once");
        assert!(shared.agent().is_none());
    }

    #[test]
    fn only_a_full_queue_is_a_refusal() {
        assert!(no_room(&io::Error::from(io::ErrorKind::WouldBlock)));
        assert!(no_room(&io::Error::from_raw_os_error(libc::EAGAIN)));
        assert!(no_room(&io::Error::from_raw_os_error(libc::ENOBUFS)));
        assert!(!no_room(&io::Error::from_raw_os_error(libc::ECONNREFUSED)), "a closed socket is gone, not hung");
        assert!(!no_room(&io::Error::from_raw_os_error(libc::EMSGSIZE)));
    }
}

/// What [`read_agent`] handed on and dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FromAgent {
    /// Messages read (each message of a datagram counts).
    pub messages: u64,
    /// Messages dropped: malformed (`ccp-wire` refused them) or refused by libccp.
    pub rejected: u64,
}

/// Hands every datagram waiting on the agent's socket to libccp, message by message, once
/// `ccp-wire` has checked it ([`crate::inbound`]). `seen` is told each message's kind and sid
/// before libccp gets it. A malformed message or one libccp refuses is counted and logged
/// (throttled), never fatal.
pub fn read_agent(
    shared: &Shared,
    dp: &Datapath,
    recv_buf: &mut [u8],
    msg_buf: &mut Vec<u8>,
    mut seen: impl FnMut(&str, u32),
) -> FromAgent {
    let mut got = FromAgent::default();
    loop {
        let n = match shared.chan.try_recv(recv_buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                shared.warn_throttled(&format!("reading the IPC socket failed: {e}"));
                return got;
            }
        };
        for verdict in judge(&recv_buf[..n]) {
            got.messages += 1;
            match verdict {
                Verdict::Libccp { kind, sid, bytes } => {
                    seen(kind, sid);
                    msg_buf.clear();
                    msg_buf.extend_from_slice(bytes);
                    if let Err(e) = dp.recv_msg(msg_buf) {
                        got.rejected += 1;
                        shared.warn_throttled(&rejection(kind, sid, &e));
                    }
                }
                Verdict::Rejected(why) => {
                    got.rejected += 1;
                    shared.warn_throttled(&format!("dropped a message from the agent: {why}"));
                }
            }
        }
    }
}

/// How a message libccp refused is logged, e.g.
/// "libccp rejected UPDATE_FIELDS for sid 77: error -71 (LibccpUnknownConnection)".
pub fn rejection(kind: &str, sid: u32, e: &LibccpError) -> String {
    if kind == "CHANGE_PROG" && code(e).is_none() {
        // libccp returns a positive count the crate cannot map when the program is unknown.
        return format!("libccp rejected CHANGE_PROG for sid {sid}: it names a program that is not installed");
    }
    format!("libccp rejected {kind} for sid {sid}: {}", describe(e))
}
