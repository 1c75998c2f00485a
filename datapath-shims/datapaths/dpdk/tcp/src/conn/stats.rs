//! Counters of what a connection sent, received and refused, for the caller's reports.

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Stream bytes cumulatively acknowledged.
    pub bytes_acked_total: u64,
    /// New stream bytes sent (first transmissions only).
    pub bytes_sent_total: u64,
    pub segs_sent: u64,
    pub pure_acks_sent: u64,
    pub retx_segs: u64,
    pub retx_bytes: u64,
    /// Retransmissions of segments RACK/DupThresh marked lost (not the timeout).
    pub fast_retx: u64,
    pub syn_retx: u64,
    pub timeouts: u64,
    pub lost_marked: u64,
    pub ece_acks: u64,
    pub cwr_sent: u64,
    pub dsack_blocks: u64,
    pub reordering_events: u64,
    /// Sum of all `rej_*` counters.
    pub rejected_segments: u64,
    /// ACK number beyond anything we sent.
    pub rej_ack_unsent: u64,
    /// ACK older than snd_una (reordered or stale).
    pub rej_old_ack: u64,
    /// Segment without the ACK flag in a synchronized state.
    pub rej_no_ack_flag: u64,
    /// SYN-ACK with a wrong ACK, or something other than a SYN-ACK in SynSent.
    pub rej_bad_synack: u64,
    /// RST outside the receive window (RFC 5961 §3 blind-reset defence).
    pub rej_bad_rst: u64,
    /// Segments arriving after Closed/Failed.
    pub rej_after_close: u64,
    /// SACK blocks ignored: empty/inverted or reaching beyond snd_nxt.
    pub rej_sack_blocks: u64,
    /// ACKs whose window would move the right edge left (honoured, counted).
    pub window_shrinks: u64,
    /// Payload bytes the peer sent us (we accept none).
    pub peer_data_ignored_bytes: u64,
    pub zero_window_probes: u64,
    /// RFC 8985 §7 tail loss probes sent.
    pub tlp_probes: u64,
    /// RFC 5961 §3.2 challenge ACKs owed for in-window, inexact RSTs.
    pub challenge_acks: u64,
    /// RSTs sent in SYN-SENT to clear a stale connection of our four-tuple at the peer.
    pub resets_sent: u64,
}
