//! The next hop's MAC address, by ARP (RFC 826), and answers to ARP requests for our address.
//!
//! The sender talks to one next hop: the receiver itself when it is on the port's subnet, or a
//! router given with `--dst-mac`. Until the address is known nothing is sent but a request every
//! [`REQUEST_EVERY_US`]; the kernel receiver asks for our MAC too (to send its ACKs) and is
//! answered from here, since no kernel stack owns the port.

use std::net::Ipv4Addr;

use ccp_user_tcp::wire::ArpIn;

/// How often an unanswered request is repeated.
pub const REQUEST_EVERY_US: u64 = 200_000;

#[derive(Debug)]
pub struct Neigh {
    pub our_mac: [u8; 6],
    pub our_ip: Ipv4Addr,
    pub peer_ip: Ipv4Addr,
    peer_mac: Option<[u8; 6]>,
    /// Given on the command line: never replaced by what ARP says.
    fixed: bool,
    last_request_us: Option<u64>,
    pub requests_sent: u64,
}

/// An ARP reply to send: to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub target_mac: [u8; 6],
    pub target_ip: Ipv4Addr,
}

impl Neigh {
    pub fn new(our_mac: [u8; 6], our_ip: Ipv4Addr, peer_ip: Ipv4Addr, fixed_peer_mac: Option<[u8; 6]>) -> Neigh {
        Neigh {
            our_mac,
            our_ip,
            peer_ip,
            peer_mac: fixed_peer_mac,
            fixed: fixed_peer_mac.is_some(),
            last_request_us: None,
            requests_sent: 0,
        }
    }

    pub fn peer_mac(&self) -> Option<[u8; 6]> {
        self.peer_mac
    }

    /// Learns from an ARP packet; the reply to send if it asked for our address.
    pub fn on_arp(&mut self, a: &ArpIn) -> Option<Reply> {
        if !self.fixed && a.sender_ip == self.peer_ip && a.sender_mac != [0; 6] && a.sender_mac[0] & 1 == 0 {
            self.peer_mac = Some(a.sender_mac);
        }
        (a.op_request && a.target_ip == self.our_ip).then_some(Reply { target_mac: a.sender_mac, target_ip: a.sender_ip })
    }

    /// Whether a request for the peer is due now (and, if so, counts it as sent).
    pub fn request_due(&mut self, now_us: u64) -> bool {
        if self.peer_mac.is_some() {
            return false;
        }
        let due = self.last_request_us.is_none_or(|t| now_us.saturating_sub(t) >= REQUEST_EVERY_US);
        if due {
            self.last_request_us = Some(now_us);
            self.requests_sent += 1;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn arp(op_request: bool, sender_mac: [u8; 6], sender_ip: [u8; 4], target_ip: [u8; 4]) -> ArpIn {
        ArpIn { op_request, sender_mac, sender_ip: sender_ip.into(), target_ip: target_ip.into() }
    }

    #[test]
    fn the_peer_is_learned_from_its_reply_and_requests_stop() {
        let mut n = Neigh::new(US, [10, 0, 0, 1].into(), [10, 0, 0, 2].into(), None);
        assert!(n.request_due(0));
        assert!(!n.request_due(100_000), "not before the repeat interval");
        assert!(n.request_due(200_000));
        assert_eq!(n.on_arp(&arp(false, PEER, [10, 0, 0, 2], [10, 0, 0, 1])), None, "a reply needs no answer");
        assert_eq!(n.peer_mac(), Some(PEER));
        assert!(!n.request_due(1_000_000));
        assert_eq!(n.requests_sent, 2);
    }

    #[test]
    fn requests_for_our_address_are_answered_and_others_ignored() {
        let mut n = Neigh::new(US, [10, 0, 0, 1].into(), [10, 0, 0, 2].into(), None);
        let r = n.on_arp(&arp(true, PEER, [10, 0, 0, 2], [10, 0, 0, 1]));
        assert_eq!(r, Some(Reply { target_mac: PEER, target_ip: [10, 0, 0, 2].into() }));
        assert_eq!(n.peer_mac(), Some(PEER), "the asker's address is learned too");
        assert_eq!(n.on_arp(&arp(true, [2, 0, 0, 0, 0, 3], [10, 0, 0, 3], [10, 0, 0, 9])), None, "not our address");
        assert_eq!(n.peer_mac(), Some(PEER), "another host is not the peer");
    }

    #[test]
    fn a_given_next_hop_is_kept_and_bogus_senders_are_not_learned() {
        let gw = [2, 0, 0, 0, 0, 9];
        let mut n = Neigh::new(US, [10, 0, 0, 1].into(), [10, 0, 0, 2].into(), Some(gw));
        n.on_arp(&arp(false, PEER, [10, 0, 0, 2], [10, 0, 0, 1]));
        assert_eq!(n.peer_mac(), Some(gw));
        let mut m = Neigh::new(US, [10, 0, 0, 1].into(), [10, 0, 0, 2].into(), None);
        m.on_arp(&arp(false, [0xff; 6], [10, 0, 0, 2], [10, 0, 0, 1]));
        m.on_arp(&arp(false, [0; 6], [10, 0, 0, 2], [10, 0, 0, 1]));
        assert_eq!(m.peer_mac(), None, "broadcast and zero addresses are not a host");
    }
}
