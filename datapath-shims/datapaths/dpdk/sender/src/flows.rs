//! One connection of the sender: its TCP state machine, its libccp connection while an agent
//! steers it, and the fallback that steers it otherwise.
//!
//! Who sets the window is decided per ACK, in one place ([`Flow::control`]): the agent's last
//! command through libccp while the connection has a libccp connection, the fallback otherwise.
//! The fallback is resumed from the window the connection has when the agent goes, and the
//! agent is announced the window the connection has when it comes back (CREATE's initial
//! window), so neither hand-over resets a running connection.

use std::net::SocketAddrV4;

use ccp_libccp_host::datapath::Commanded;
use ccp_libccp_host::primitives::{to_libccp, Primitives};
use ccp_user_tcp::conn::{AckSample, Conn};
use ccp_user_tcp::fallback::Fallback;
use libccp::{Connection, FlowInfo, LibccpError};

/// What libccp reads as "no RTT sample on this ACK" (the kernel datapath's convention; the
/// agent's fold program skips samples at or above 2·10⁹).
const NO_RTT_SAMPLE: u64 = u32::MAX as u64;

/// What happened when an ACK was handed to the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steered {
    /// The fallback set the window.
    Fallback,
    /// libccp ran the agent's program.
    Agent,
    /// libccp has no program for the connection yet (the agent has not installed one).
    NoProgram,
    /// libccp's program failed on this ACK.
    InvokeError(i32),
}

pub struct Flow<'dp> {
    pub conn: Conn,
    pub local_port: u16,
    pub ccp: Option<Connection<'dp, Commanded>>,
    /// libccp's socket id (0: none yet).
    pub sid: u32,
    pub fallback: Fallback,
    /// libccp's table was full when the connection needed a slot.
    pub waiting: bool,
    /// When the ACK whose invoke sent the latest report arrived (until the agent's next command).
    pub report_at: Option<std::time::Instant>,
}

impl<'dp> Flow<'dp> {
    pub fn new(conn: Conn, local_port: u16, fallback: Fallback) -> Flow<'dp> {
        Flow { conn, local_port, ccp: None, sid: 0, fallback, waiting: false, report_at: None }
    }

    /// libccp's flow info: the window the connection has now as its initial one.
    pub fn flow_info(&self, local: SocketAddrV4, remote: SocketAddrV4, cong_alg: Option<&str>) -> FlowInfo {
        let info = || {
            FlowInfo::default().with_mss(u32::from(self.conn.mss())).with_init_cwnd(self.conn.cwnd_bytes()).with_four_tuple(
                u32::from(*local.ip()),
                u32::from(local.port()),
                u32::from(*remote.ip()),
                u32::from(remote.port()),
            )
        };
        match cong_alg {
            Some(name) => info().with_cong_alg(name).unwrap_or_else(|_| info()),
            None => info(),
        }
    }

    /// The agent is gone (or never was): the fallback continues from the current window.
    pub fn hand_to_fallback(&mut self) {
        self.ccp = None;
        self.sid = 0;
        self.waiting = false;
        self.fallback.resume(self.conn.cwnd_bytes());
    }

    /// Hands one ACK's measurements to whoever steers the connection, and applies the window
    /// and rate that result.
    pub fn control(&mut self, s: &AckSample) -> Steered {
        let mss = u32::from(self.conn.mss());
        let Some(ccp) = self.ccp.as_mut() else {
            let cwnd = self.fallback.on_sample(s, mss);
            self.conn.set_cwnd_bytes(cwnd);
            return Steered::Fallback;
        };
        // libccp's Cwnd/Rate registers start from its own last command (a lagging value fed
        // back would make it re-issue that and undo the agent: ebpf-datapath pitfall G).
        let commanded: Commanded = **ccp;
        let p = primitives(s, commanded.cwnd.unwrap_or(self.conn.cwnd_bytes()), commanded.rate.unwrap_or(0));
        ccp.load_primitives(to_libccp(&p));
        let steered = match ccp.invoke() {
            Ok(()) => Steered::Agent,
            Err(LibccpError::LibccpProgIsNull) => Steered::NoProgram,
            Err(e) => Steered::InvokeError(ccp_libccp_host::errors::code(&e).unwrap_or(0)),
        };
        let now: Commanded = **ccp;
        if let Some(cwnd) = now.cwnd {
            // A command below one segment still sends one: a zero window would stall the
            // connection with nothing to clock the next command in.
            self.conn.set_cwnd_bytes(cwnd.max(mss));
        }
        if let Some(rate) = now.rate {
            self.conn.set_rate_bytes_per_s(u64::from(rate));
        }
        steered
    }
}

/// libccp's per-ACK primitives from the sender's measurements.
pub fn primitives(s: &AckSample, snd_cwnd: u32, snd_rate: u32) -> Primitives {
    Primitives {
        bytes_acked: s.bytes_acked,
        packets_acked: s.packets_acked,
        bytes_misordered: s.bytes_misordered,
        packets_misordered: s.packets_misordered,
        ecn_bytes: s.ecn_bytes,
        ecn_packets: s.ecn_packets,
        lost_pkts_sample: s.lost_pkts_sample,
        was_timeout: s.was_timeout,
        rtt_sample_us: s.rtt_sample_us.map_or(NO_RTT_SAMPLE, u64::from),
        rate_outgoing: s.rate_outgoing,
        rate_incoming: s.rate_incoming,
        bytes_in_flight: s.bytes_in_flight,
        packets_in_flight: s.packets_in_flight,
        snd_cwnd,
        snd_rate: u64::from(snd_rate),
        bytes_pending: s.bytes_pending,
    }
}
