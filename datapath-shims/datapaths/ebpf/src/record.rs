//! Ring-buffer records: the BPF program's words, decoded into plain Rust values.
//!
//! The `#[repr(C)]` structs mirror `src/bpf/ccp.h` field for field; the size assertions make a
//! change on one side without the other a compile error. Decoding never trusts the bytes: a
//! record that is short, of an unknown kind, of another layout version, or whose header size
//! disagrees with its kind is an error the caller counts and drops.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Layout version of the records this crate decodes (`CCP_REC_VERSION`).
pub const RECORD_VERSION: u8 = 1;

const KIND_CREATE: u8 = 1;
const KIND_REPORT: u8 = 2;
const KIND_CLOSE: u8 = 3;
const KIND_ACK: u8 = 4;

const AF_INET: u16 = libc::AF_INET as u16;
const AF_INET6: u16 = libc::AF_INET6 as u16;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawHdr {
    pub version: u8,
    pub kind: u8,
    pub size: u16,
    pub fid: u32,
    pub ts_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawCreate {
    pub hdr: RawHdr,
    pub cookie: u64,
    pub netns_cookie: u64,
    pub cgroup_id: u64,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub family: u16,
    pub sport: u16,
    pub dport: u16,
    pub flags: u16,
    pub mss: u32,
    pub cwnd_pkts: u32,
    pub ssthresh: u32,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub uid: u32,
    pub prev_cc: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawReport {
    pub hdr: RawHdr,
    pub start_ns: u64,
    pub acked_bytes: u64,
    pub rtt_sum_us: u64,
    pub pacing_rate: u64,
    pub acked_pkts: u32,
    pub sacked_pkts: u32,
    pub lost_pkts: u32,
    pub ce_pkts: u32,
    pub ece_acks: u32,
    pub acks: u32,
    pub rtt_min_us: u32,
    pub rtt_max_us: u32,
    pub rtt_last_us: u32,
    pub rtt_samples: u32,
    pub rtt_over_samples: u32,
    pub srtt_us: u32,
    pub rate_delivered: u32,
    pub rate_snd_us: u32,
    pub rate_rcv_us: u32,
    pub inflight_pkts: u32,
    pub pending_bytes: u32,
    pub cwnd_pkts: u32,
    pub ssthresh: u32,
    pub mss: u32,
    pub ctrl_seq: u32,
    pub timeouts: u16,
    pub urgent: u8,
    pub flags: u8,
    pub ca_state: u8,
    pub pad: [u8; 3],
    pub unacked_pkts: u32,
    pub rate_max_delivered: u32,
    pub rate_max_us: u32,
    pub extra_acked_pkts: u32,
    pub pad2: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawClose {
    pub hdr: RawHdr,
    pub bytes_acked: u64,
    pub lost: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawAck {
    pub hdr: RawHdr,
    pub bytes_acked: u64,
    pub packets_acked: u32,
    pub packets_misordered: u32,
    pub ce_pkts: u32,
    pub lost_pkts: u32,
    pub rtt_us: u32,
    pub rate_delivered: u32,
    pub rate_snd_us: u32,
    pub rate_rcv_us: u32,
    pub inflight_pkts: u32,
    pub pending_bytes: u32,
    pub cwnd_pkts: u32,
    pub mss: u32,
    pub flags: u8,
    pub pad: [u8; 7],
}

const _: () = assert!(size_of::<RawHdr>() == 16);
const _: () = assert!(size_of::<RawCreate>() == 120);
const _: () = assert!(size_of::<RawReport>() == 160);
/// Reports of instances built before fields were appended, decoded without them: before
/// `rate_max_*`, and before `extra_acked_pkts`.
const REPORT_SIZE_BEFORE_RATE_MAX: usize = 144;
const REPORT_SIZE_BEFORE_EXTRA_ACKED: usize = 152;
const _: () = assert!(size_of::<RawClose>() == 32);
const _: () = assert!(size_of::<RawAck>() == 80);

/// Marker for the raw structs: plain old data, every bit pattern valid.
///
/// # Safety
/// Implementors are `#[repr(C)]` structs of integers and byte arrays only.
pub(crate) unsafe trait Pod: Copy + Default {}
// SAFETY: all five are repr(C) structs of integers and byte arrays.
unsafe impl Pod for RawHdr {}
// SAFETY: as above.
unsafe impl Pod for RawCreate {}
// SAFETY: as above.
unsafe impl Pod for RawReport {}
// SAFETY: as above.
unsafe impl Pod for RawClose {}
// SAFETY: as above.
unsafe impl Pod for RawAck {}

/// Reads a `T` from the start of `bytes`, or `None` when too short.
pub(crate) fn read_pod<T: Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    let mut v = T::default();
    // SAFETY: T is plain old data (any bit pattern is valid) and `bytes` holds at least
    // size_of::<T>() bytes; the copy is unaligned-safe because it goes byte by byte.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut v as *mut T).cast::<u8>(), size_of::<T>()) };
    Some(v)
}

/// The bytes of a `T`.
pub(crate) fn pod_bytes<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: T is repr(C) plain old data with explicit padding fields, so every byte is
    // initialised; the slice borrows `v`.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

/// Why a report was sent before its interval ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgent {
    StateChange,
    Loss,
    Timeout,
}

/// One end of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
}

/// A flow came under the congestion control (new, attached, or switched from an old instance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    pub fid: u32,
    pub ts_ns: u64,
    /// The socket cookie, when something generated one (the attach programs do).
    pub cookie: Option<u64>,
    pub netns_cookie: u64,
    pub cgroup_id: u64,
    /// `None` for an address family other than IPv4/IPv6.
    pub local: Option<Endpoint>,
    pub remote: Option<Endpoint>,
    /// The flow had sent data before: it was switched here mid-flow.
    pub existing: bool,
    /// The connection negotiated ECN.
    pub ecn: bool,
    pub mss: u32,
    pub cwnd_pkts: u32,
    pub ssthresh: u32,
    pub srtt_us: u32,
    /// `None` until the kernel has an RTT sample.
    pub min_rtt_us: Option<u32>,
    /// The socket's owner (kernel uid, as the initial user namespace sees it). An instance
    /// older than this field sends 0 there (it was padding).
    pub uid: u32,
    /// The congestion control the flow ran before attach switched it, if recorded.
    pub prev_cc: Option<String>,
}

/// One folded interval of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelReport {
    pub fid: u32,
    pub ts_ns: u64,
    pub start_ns: u64,
    pub acked_bytes: u64,
    pub acked_pkts: u32,
    pub sacked_pkts: u32,
    pub lost_pkts: u32,
    pub timeouts: u16,
    pub ce_pkts: u32,
    pub ece_acks: u32,
    pub acks: u32,
    pub rtt_min_us: u32,
    pub rtt_max_us: u32,
    pub rtt_last_us: u32,
    pub rtt_sum_us: u64,
    pub rtt_samples: u32,
    pub rtt_over_samples: u32,
    pub srtt_us: u32,
    /// The interval's last valid rate sample: packets delivered over `rate_snd_us` of sending
    /// and `rate_rcv_us` of ACKs. Zero when the interval had none.
    pub rate_delivered: u32,
    pub rate_snd_us: u32,
    pub rate_rcv_us: u32,
    /// The interval's fastest valid rate sample (delivered over the longer of its send and ACK
    /// intervals, as tcp_bbr.c's max filter sees each ACK's): packets over `rate_max_us`. Zero
    /// when the interval had none, or from an instance built before the fields.
    pub rate_max_delivered: u32,
    pub rate_max_us: u32,
    /// ACK aggregation against the control entry's rate (tcp_bbr.c's `extra_acked`), the
    /// interval's largest per-ACK value, packets; `None` when not measured (no rate set, no ACK
    /// delivered data, or an instance built before the field).
    pub extra_acked_pkts: Option<u32>,
    pub inflight_pkts: u32,
    /// Sent and not cumulatively acknowledged (`tp->packets_out`); 0 from an instance built
    /// before the field (it was padding).
    pub unacked_pkts: u32,
    pub pending_bytes: u32,
    pub cwnd_pkts: u32,
    pub ssthresh: u32,
    pub mss: u32,
    pub pacing_rate: u64,
    /// `pacing_rate` is enforced (the agent asked for pacing, or SO_MAX_PACING_RATE).
    pub paced: bool,
    pub app_limited: bool,
    /// The window limited the sender in the interval (`tcp_is_cwnd_limited()` at an ACK or at
    /// the report); a record that does not say (an older instance) reads as limited.
    pub cwnd_limited: bool,
    /// The in-kernel fallback steered the flow at the end of the interval.
    pub fallback: bool,
    /// Sequence number of the control entry in force (0: none).
    pub ctrl_seq: u32,
    pub urgent: Option<Urgent>,
    pub ca_state: u8,
}

/// A flow left the congestion control (closed, or switched to another one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    pub fid: u32,
    pub ts_ns: u64,
    pub bytes_acked: u64,
    pub lost: u32,
}

/// One ACK of a flow, from an instance loaded for per-ACK records: what libccp's
/// `ccp_primitives` are made of, in the kernel's units. Differences (`bytes_acked`,
/// `packets_misordered`) run from the flow's previous record, so a record lost to a full ring
/// loses no acknowledged bytes; the other counts are this ACK's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ack {
    pub fid: u32,
    pub ts_ns: u64,
    /// Newly cumulatively acknowledged bytes.
    pub bytes_acked: u64,
    /// Newly delivered packets minus newly SACKed ones.
    pub packets_acked: u32,
    /// Newly SACKed packets (growth of the SACKed count, never negative).
    pub packets_misordered: u32,
    /// Packets delivered with a CE mark, as the receiver echoed them.
    pub ce_pkts: u32,
    /// Packets newly marked lost.
    pub lost_pkts: u32,
    /// `None`: the ACK carried no RTT sample.
    pub rtt_us: Option<u32>,
    /// The ACK's rate sample, if valid: packets delivered over `rate_snd_us` of sending and
    /// `rate_rcv_us` of ACKs. Zero when the sample was invalid.
    pub rate_delivered: u32,
    pub rate_snd_us: u32,
    pub rate_rcv_us: u32,
    pub inflight_pkts: u32,
    pub pending_bytes: u32,
    pub cwnd_pkts: u32,
    pub mss: u32,
    /// A retransmission timeout, sent when the stack entered the Loss state (not for an ACK).
    pub timeout: bool,
    /// The in-kernel fallback steered the flow (no live control entry).
    pub fallback: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Create(Create),
    Report(KernelReport),
    Close(Close),
}

impl Record {
    pub fn fid(&self) -> u32 {
        match self {
            Record::Create(c) => c.fid,
            Record::Report(r) => r.fid,
            Record::Close(c) => c.fid,
        }
    }

    pub fn ts_ns(&self) -> u64 {
        match self {
            Record::Create(c) => c.ts_ns,
            Record::Report(r) => r.ts_ns,
            Record::Close(c) => c.ts_ns,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than a header")]
    Short(usize),
    #[error("record layout version {0} (this build decodes {RECORD_VERSION})")]
    Version(u8),
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("record kind {kind} claims {claimed} bytes in a {len}-byte sample; expected {expected}")]
    Size { kind: u8, claimed: u16, len: usize, expected: usize },
}

fn cstr16(b: &[u8; 16]) -> Option<String> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let s = String::from_utf8_lossy(&b[..end]).into_owned();
    (!s.is_empty()).then_some(s)
}

fn endpoint(family: u16, addr: &[u8; 16], port: u16) -> Option<Endpoint> {
    let addr = match family {
        AF_INET => IpAddr::V4(Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3])),
        AF_INET6 => IpAddr::V6(Ipv6Addr::from(*addr)),
        _ => return None,
    };
    Some(Endpoint { addr, port })
}

const AF_TIMEOUT: u8 = 1 << 0;
const AF_FALLBACK: u8 = 1 << 1;

fn urgent(v: u8) -> Option<Urgent> {
    match v {
        1 => Some(Urgent::StateChange),
        2 => Some(Urgent::Loss),
        3 => Some(Urgent::Timeout),
        _ => None,
    }
}

const RF_APP_LIMITED: u8 = 1 << 0;
const RF_FALLBACK: u8 = 1 << 1;
const RF_PACED: u8 = 1 << 2;
const RF_WINDOW_UNUSED: u8 = 1 << 3;
const RF_EXTRA_ACKED: u8 = 1 << 4;
const CF_EXISTING: u16 = 1 << 0;
const CF_ECN: u16 = 1 << 1;

impl From<&RawCreate> for Create {
    fn from(r: &RawCreate) -> Create {
        Create {
            fid: r.hdr.fid,
            ts_ns: r.hdr.ts_ns,
            cookie: (r.cookie != 0).then_some(r.cookie),
            netns_cookie: r.netns_cookie,
            cgroup_id: r.cgroup_id,
            local: endpoint(r.family, &r.saddr, r.sport),
            remote: endpoint(r.family, &r.daddr, r.dport),
            existing: r.flags & CF_EXISTING != 0,
            ecn: r.flags & CF_ECN != 0,
            mss: r.mss,
            cwnd_pkts: r.cwnd_pkts,
            ssthresh: r.ssthresh,
            srtt_us: r.srtt_us,
            min_rtt_us: (r.min_rtt_us != u32::MAX).then_some(r.min_rtt_us),
            uid: r.uid,
            prev_cc: cstr16(&r.prev_cc),
        }
    }
}

impl From<&RawReport> for KernelReport {
    fn from(r: &RawReport) -> KernelReport {
        KernelReport {
            fid: r.hdr.fid,
            ts_ns: r.hdr.ts_ns,
            start_ns: r.start_ns,
            acked_bytes: r.acked_bytes,
            acked_pkts: r.acked_pkts,
            sacked_pkts: r.sacked_pkts,
            lost_pkts: r.lost_pkts,
            timeouts: r.timeouts,
            ce_pkts: r.ce_pkts,
            ece_acks: r.ece_acks,
            acks: r.acks,
            rtt_min_us: r.rtt_min_us,
            rtt_max_us: r.rtt_max_us,
            rtt_last_us: r.rtt_last_us,
            rtt_sum_us: r.rtt_sum_us,
            rtt_samples: r.rtt_samples,
            rtt_over_samples: r.rtt_over_samples,
            srtt_us: r.srtt_us,
            rate_delivered: r.rate_delivered,
            rate_snd_us: r.rate_snd_us,
            rate_rcv_us: r.rate_rcv_us,
            rate_max_delivered: r.rate_max_delivered,
            rate_max_us: r.rate_max_us,
            extra_acked_pkts: (r.flags & RF_EXTRA_ACKED != 0).then_some(r.extra_acked_pkts),
            inflight_pkts: r.inflight_pkts,
            unacked_pkts: r.unacked_pkts,
            pending_bytes: r.pending_bytes,
            cwnd_pkts: r.cwnd_pkts,
            ssthresh: r.ssthresh,
            mss: r.mss,
            pacing_rate: r.pacing_rate,
            paced: r.flags & RF_PACED != 0,
            app_limited: r.flags & RF_APP_LIMITED != 0,
            cwnd_limited: r.flags & RF_WINDOW_UNUSED == 0,
            fallback: r.flags & RF_FALLBACK != 0,
            ctrl_seq: r.ctrl_seq,
            urgent: urgent(r.urgent),
            ca_state: r.ca_state,
        }
    }
}

impl From<&RawAck> for Ack {
    fn from(r: &RawAck) -> Ack {
        Ack {
            fid: r.hdr.fid,
            ts_ns: r.hdr.ts_ns,
            bytes_acked: r.bytes_acked,
            packets_acked: r.packets_acked,
            packets_misordered: r.packets_misordered,
            ce_pkts: r.ce_pkts,
            lost_pkts: r.lost_pkts,
            rtt_us: (r.rtt_us != 0).then_some(r.rtt_us),
            rate_delivered: r.rate_delivered,
            rate_snd_us: r.rate_snd_us,
            rate_rcv_us: r.rate_rcv_us,
            inflight_pkts: r.inflight_pkts,
            pending_bytes: r.pending_bytes,
            cwnd_pkts: r.cwnd_pkts,
            mss: r.mss,
            timeout: r.flags & AF_TIMEOUT != 0,
            fallback: r.flags & AF_FALLBACK != 0,
        }
    }
}

fn check_size<T>(hdr: &RawHdr, len: usize) -> Result<(), DecodeError> {
    let expected = size_of::<T>();
    if usize::from(hdr.size) != expected || len < expected {
        return Err(DecodeError::Size { kind: hdr.kind, claimed: hdr.size, len, expected });
    }
    Ok(())
}

/// Decodes one ring-buffer sample.
pub fn decode(bytes: &[u8]) -> Result<Record, DecodeError> {
    let hdr: RawHdr = read_pod(bytes).ok_or(DecodeError::Short(bytes.len()))?;
    if hdr.version != RECORD_VERSION {
        return Err(DecodeError::Version(hdr.version));
    }
    match hdr.kind {
        KIND_CREATE => {
            check_size::<RawCreate>(&hdr, bytes.len())?;
            let raw: RawCreate = read_pod(bytes).ok_or(DecodeError::Short(bytes.len()))?;
            Ok(Record::Create(Create::from(&raw)))
        }
        KIND_REPORT
            if [REPORT_SIZE_BEFORE_RATE_MAX, REPORT_SIZE_BEFORE_EXTRA_ACKED].contains(&usize::from(hdr.size))
                && bytes.len() >= usize::from(hdr.size) =>
        {
            let old = usize::from(hdr.size);
            let mut padded = [0u8; size_of::<RawReport>()];
            padded[..old].copy_from_slice(&bytes[..old]);
            let raw: RawReport = read_pod(&padded).ok_or(DecodeError::Short(bytes.len()))?;
            Ok(Record::Report(KernelReport::from(&raw)))
        }
        KIND_REPORT => {
            check_size::<RawReport>(&hdr, bytes.len())?;
            let raw: RawReport = read_pod(bytes).ok_or(DecodeError::Short(bytes.len()))?;
            Ok(Record::Report(KernelReport::from(&raw)))
        }
        KIND_CLOSE => {
            check_size::<RawClose>(&hdr, bytes.len())?;
            let raw: RawClose = read_pod(bytes).ok_or(DecodeError::Short(bytes.len()))?;
            Ok(Record::Close(Close { fid: raw.hdr.fid, ts_ns: raw.hdr.ts_ns, bytes_acked: raw.bytes_acked, lost: raw.lost }))
        }
        k => Err(DecodeError::Kind(k)),
    }
}

/// What the ring of an instance loaded for per-ACK records carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerAckRecord {
    Ack(Ack),
    /// Creates and closes (and the reports of a folded instance whose pins this one shares).
    Record(Record),
}

/// Decodes one ring-buffer sample of an instance loaded for per-ACK records. (`decode` refuses
/// per-ACK records as an unknown kind: a folded consumer has no use for them.)
pub fn decode_per_ack(bytes: &[u8]) -> Result<PerAckRecord, DecodeError> {
    let hdr: RawHdr = read_pod(bytes).ok_or(DecodeError::Short(bytes.len()))?;
    if hdr.version != RECORD_VERSION || hdr.kind != KIND_ACK {
        return decode(bytes).map(PerAckRecord::Record);
    }
    check_size::<RawAck>(&hdr, bytes.len())?;
    let raw: RawAck = read_pod(bytes).ok_or(DecodeError::Short(bytes.len()))?;
    Ok(PerAckRecord::Ack(Ack::from(&raw)))
}

/// Decodes a create record stored as a `flow_info` map value.
pub(crate) fn decode_create(bytes: &[u8]) -> Option<Create> {
    match decode(bytes) {
        Ok(Record::Create(c)) => Some(c),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
