//! One kernel flow and its libccp connection.
//!
//! A flow exists from its CREATE record (or, after a shim restart, from its first fresh ACK
//! record) to its CLOSE record. It has a libccp connection while an agent is there and libccp has
//! a free slot; without one it runs on the in-kernel fallback. What libccp commanded is kept
//! apart from what the control map holds, so a write happens only when the command changes
//! (libccp calls `set_cwnd` after every program run, i.e. on every ACK).

use std::net::IpAddr;

use ccp_ebpf::{Control, Create, Endpoint, ReportEvery};
use libccp::{Connection, FlowInfo};

use crate::primitives::Rates;
use ccp_libccp_host::datapath::Commanded;

/// What CREATE tells the agent about a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub mss: u32,
    pub local: Option<Endpoint>,
    pub remote: Option<Endpoint>,
}

impl Desc {
    pub fn of_create(c: &Create) -> Desc {
        Desc { mss: c.mss, local: c.local, remote: c.remote }
    }

    /// libccp's flow info: addresses as host-order numbers (IPv6 flows have none: the field is
    /// 32 bits), the window the flow has now as its initial one.
    pub fn flow_info(&self, cwnd_bytes: u32, cong_alg: Option<&str>) -> FlowInfo {
        let v4 = |e: Option<Endpoint>| match e {
            Some(Endpoint { addr: IpAddr::V4(a), port }) => (u32::from(a), u32::from(port)),
            Some(Endpoint { addr: IpAddr::V6(_), port }) => (0, u32::from(port)),
            None => (0, 0),
        };
        let (src_ip, src_port) = v4(self.local);
        let (dst_ip, dst_port) = v4(self.remote);
        let info = || {
            FlowInfo::default().with_mss(self.mss).with_init_cwnd(cwnd_bytes).with_four_tuple(src_ip, src_port, dst_ip, dst_port)
        };
        // A name libccp refuses (over 63 bytes; the command line refuses those) is left out.
        match cong_alg {
            Some(name) => info().with_cong_alg(name).unwrap_or_else(|_| info()),
            None => info(),
        }
    }
}

pub struct Flow<'dp> {
    pub desc: Desc,
    pub conn: Option<Connection<'dp, Commanded>>,
    /// libccp's socket id for the connection (0: none).
    pub sid: u32,
    pub rates: Rates,
    /// The kernel's window in the latest record, bytes: what libccp is fed until it commands.
    pub kernel_cwnd: u32,
    /// What the control map holds for the flow; `None`: nothing (the fallback steers it).
    pub written: Option<Commanded>,
    pub seq: u32,
    /// libccp's connection table was full when the flow needed a connection.
    pub waiting: bool,
    pub acks: u64,
}

impl<'dp> Flow<'dp> {
    pub fn new(desc: Desc, kernel_cwnd: u32) -> Flow<'dp> {
        Flow { desc, conn: None, sid: 0, rates: Rates::default(), kernel_cwnd, written: None, seq: 0, waiting: false, acks: 0 }
    }

    /// What libccp last commanded (nothing without a connection).
    pub fn commanded(&self) -> Commanded {
        self.conn.as_ref().map(|c| **c).unwrap_or_default()
    }

    /// `snd_cwnd`/`snd_rate` for libccp: its own last command, else the kernel's window.
    pub fn feedback(&self) -> (u32, u32) {
        let c = self.commanded();
        (c.cwnd.unwrap_or(self.kernel_cwnd), c.rate.unwrap_or(0))
    }

    /// The control entry to write, if libccp commanded something the map does not hold yet.
    pub fn pending_control(&self) -> Option<(Commanded, Control)> {
        control_for(self.commanded(), self.written, self.desc.mss)
    }
}

fn control_for(c: Commanded, written: Option<Commanded>, mss: u32) -> Option<(Commanded, Control)> {
    if c == Commanded::default() || written == Some(c) {
        return None;
    }
    let control = Control {
        // The program rounds the window to packets and floors it at two: a command below one
        // MSS must still be a command, not "leave the window alone" (0 packets).
        cwnd_bytes: c.cwnd.map(|w| u64::from(w.max(mss))),
        pacing_bytes_per_s: c.rate.filter(|&r| r > 0).map(u64::from),
        report: ReportEvery::Default,
        ..Control::default()
    };
    // An entry commanding nothing would freeze the window outside the fallback's reach.
    (control.cwnd_bytes.is_some() || control.pacing_bytes_per_s.is_some()).then_some((c, control))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> Desc {
        Desc {
            mss: 1448,
            local: Some(Endpoint { addr: "10.77.0.1".parse().unwrap(), port: 40_000 }),
            remote: Some(Endpoint { addr: "10.77.0.2".parse().unwrap(), port: 5201 }),
        }
    }

    #[test]
    fn without_a_command_there_is_nothing_to_write_and_the_kernel_window_is_fed_back() {
        let f = Flow::new(desc(), 14_480);
        assert_eq!(f.pending_control(), None);
        assert_eq!(f.feedback(), (14_480, 0));
    }

    #[test]
    fn only_a_changed_command_is_written() {
        let c = Commanded { cwnd: Some(28_960), rate: None };
        let (held, control) = control_for(c, None, 1448).expect("a first command");
        assert_eq!(held, c);
        assert_eq!((control.cwnd_bytes, control.pacing_bytes_per_s), (Some(28_960), None));
        assert_eq!(control_for(c, Some(c), 1448), None, "a repeated command is not written again");
        assert_eq!(control_for(Commanded::default(), None, 1448), None);
    }

    #[test]
    fn a_tiny_window_still_commands_and_a_rate_paces() {
        let c = Commanded { cwnd: Some(100), rate: Some(125_000) };
        let (_, control) = control_for(c, Some(Commanded { cwnd: Some(100), rate: None }), 1448).unwrap();
        assert_eq!((control.cwnd_bytes, control.pacing_bytes_per_s), (Some(1448), Some(125_000)));
        assert_eq!(control_for(Commanded { cwnd: None, rate: Some(0) }, None, 1448), None, "commands nothing");
    }
}
