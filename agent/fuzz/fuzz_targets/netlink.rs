//! The agent's side of ccp-kernel's netlink datagrams, from the socket to the runtime's events.
//!
//! The codec's own fuzz target (datapath-shims/datapaths/libccp/wire/fuzz) already covers
//! `ccp_wire::netlink::unframe` and the libccp message decoder on their own. This one covers what
//! the agent does with a received datagram: `NetlinkTransport::recv`'s steps (the sender check,
//! `sender_allowed`, then `unframe`, the payload copied into the adapter's buffer) in a transport
//! that takes its datagrams from the input instead of a socket (recvfrom needs one), driving the
//! real libccp adapter (`LibccpDatapath::poll_events`: every message decoded, flows created,
//! adopted, reprogrammed and closed, reports decoded by the standard fold).
//!
//! Input: one option byte (bit 0: `allow_user_peers`; bit 1: network address order; bits 2-4:
//! the poll budget − 1), then datagrams, each a sender byte (0: the kernel, else a user-space
//! port id), a little-endian u16 length and that many bytes (the last one cut short by the input).
//!
//! Never a panic; every datagram is refused, rejected as malformed, or counted; every message the
//! agent sends back encodes a valid libccp message; every report, settings-lost and close is for
//! a flow the runtime knows (started before, in the same poll or earlier); every report has an
//! MSS.
#![no_main]

use std::collections::{HashSet, VecDeque};
use std::io;
use std::time::Instant;

use ccp_agent::clock::Clock;
use ccp_agent::datapath::libccp::netlink::{port_name, sender_allowed};
use ccp_agent::datapath::libccp::transport::{Received, Transport};
use ccp_agent::datapath::libccp::{AddressOrder, LibccpDatapath};
use ccp_agent::datapath::{Datapath, DatapathEvent, FlowRef};
use libfuzzer_sys::fuzz_target;

/// What the agent's `NetlinkTransport` does with a datagram once recvfrom returned it.
struct Fuzzed {
    datagrams: VecDeque<(u32, Vec<u8>)>,
    allow_user_peers: bool,
    refused: u64,
    malformed: u64,
    delivered: u64,
    sent: u64,
}

impl Transport for Fuzzed {
    type Addr = u32;

    fn describe(&self) -> String {
        "netlink:fuzz".to_string()
    }

    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> io::Result<()> {
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], _: Instant) -> io::Result<Option<Received<u32>>> {
        loop {
            let Some((nl_pid, datagram)) = self.datagrams.pop_front() else { return Ok(None) };
            if !sender_allowed(nl_pid, self.allow_user_peers) {
                self.refused += 1;
                continue;
            }
            let payload = match ccp_wire::netlink::unframe(&datagram) {
                Ok(p) => p,
                Err(e) => {
                    self.malformed += 1;
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad netlink frame from port {nl_pid}: {e}")));
                }
            };
            let len = payload.len().min(buf.len());
            buf[..len].copy_from_slice(&payload[..len]);
            self.delivered += 1;
            return Ok(Some(Received { len, from: Some(nl_pid), uid: None }));
        }
    }

    fn send(&mut self, to: &u32, msg: &[u8], _: Instant) -> io::Result<()> {
        assert!(sender_allowed(*to, self.allow_user_peers), "a reply to port {to}, which is never heard");
        let (decoded, used) = ccp_wire::decode(msg).unwrap_or_else(|e| panic!("the agent sent an undecodable message: {e}"));
        assert_eq!(used, msg.len(), "the agent sent trailing bytes after {decoded:?}");
        let mut framed = Vec::new();
        ccp_wire::netlink::frame(msg, &mut framed);
        assert_eq!(ccp_wire::netlink::unframe(&framed), Ok(msg));
        self.sent += 1;
        Ok(())
    }

    fn addr_name(&self, addr: &u32) -> String {
        port_name(*addr)
    }

    fn refused(&self) -> u64 {
        self.refused
    }
}

fn datagrams(mut data: &[u8]) -> VecDeque<(u32, Vec<u8>)> {
    let mut out = VecDeque::new();
    while let [sender, lo, hi, rest @ ..] = data {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(rest.len());
        out.push_back((u32::from(*sender), rest[..len].to_vec()));
        data = &rest[len..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&options, rest)) = data.split_first() else { return };
    let allow_user_peers = options & 1 != 0;
    let order = if options & 2 != 0 { AddressOrder::Network } else { AddressOrder::Host };
    let budget = usize::from((options >> 2) & 7) + 1;
    let queued = datagrams(rest);
    let total = queued.len() as u64;
    let transport = Fuzzed { datagrams: queued, allow_user_peers, refused: 0, malformed: 0, delivered: 0, sent: 0 };
    let mut dp = LibccpDatapath::new(transport, order).expect("the standard fold compiles");
    let clock = Clock::start();

    // The runtime's flow table, as far as the adapter's `known` is concerned.
    let mut known: HashSet<FlowRef> = HashSet::new();
    let mut events = Vec::new();
    let mut polls = 0;
    loop {
        events.clear();
        let read = {
            let k = known.clone();
            dp.poll_events(&move |f| k.contains(&f), &mut events, budget, clock.now())
        };
        assert!(read <= budget);
        for e in &events {
            match e {
                DatapathEvent::FlowStarted { flow, info } => {
                    assert!(info.mss_bytes > 0 || info.existing.is_none(), "{info:?}");
                    known.insert(*flow);
                }
                DatapathEvent::Report { flow, report } => {
                    assert!(known.contains(flow), "report for unknown flow {flow}");
                    assert!(report.mss_bytes > 0, "{report:?}");
                    if let Some(rtt) = report.rtt {
                        assert!(rtt.samples > 0);
                    }
                }
                DatapathEvent::SettingsLost { flow } => assert!(known.contains(flow), "settings lost of unknown flow {flow}"),
                DatapathEvent::FlowClosed { flow, .. } => {
                    assert!(known.remove(flow), "close of unknown flow {flow}");
                }
                DatapathEvent::Writable { peer } => panic!("peer {peer} writable again, yet no send here finds a queue full"),
            }
        }
        polls += 1;
        if read < budget {
            break;
        }
        assert!(polls <= total + 1, "more polls than datagrams");
    }
    let t = dp.transport();
    assert!(t.datagrams.is_empty(), "datagrams left unread");
    assert_eq!(t.refused + t.malformed + t.delivered, total);
    let stats = dp.stats();
    assert_eq!(stats.datagrams, t.delivered);
    assert!(stats.decode_errors >= t.malformed);
    assert_eq!(stats.unreplyable_datagrams, 0);
});
