//! The Rust side of `src/bpf/inigo_receiver.h`: the same structs, byte for byte (sizes are
//! asserted here and the C compiler lays the header out the same way), and the counter indexes.

/// `INIGO_MAGIC`: written into the settings entry last; until then the programs pass everything.
pub const MAGIC: u32 = 0x494e_4731;
/// `INIGO_LAYOUT`: an instance pinned with another layout is refused, not reinterpreted.
/// 2: `F_NO_TICK_SLACK` (layout 1's programs have no tick slack and would ignore the flag).
/// 3: `F_CUT_SSTHRESH`.
pub const LAYOUT: u32 = 3;

pub const MODE_MARK: u32 = 0;
pub const MODE_WINDOW: u32 = 1;
pub const RFD_ARRIVAL: u32 = 0;
pub const RFD_TSECR: u32 = 1;
pub const F_CLEAR_CE: u32 = 1 << 0;
pub const F_RTT_CREEP: u32 = 1 << 1;
pub const F_SS_HOLD: u32 = 1 << 2;
pub const F_RTT_X8: u32 = 1 << 3;
pub const F_NO_TICK_SLACK: u32 = 1 << 4;
pub const F_CUT_SSTHRESH: u32 = 1 << 5;

pub const C_HAVE_REF: u8 = 1 << 0;
pub const C_USEC_TS: u8 = 1 << 1;

/// Plain old data shared with the kernel: every bit pattern is valid and there is no implicit
/// padding (every struct below pads itself explicitly).
///
/// # Safety
/// Implement only for `#[repr(C)]` structs of integers without implicit padding.
pub unsafe trait Pod: Copy + Default {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: Pod types are repr(C) integers without padding; any byte view is initialised.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), std::mem::size_of::<Self>()) }
    }

    /// Reads the struct from the start of `bytes` (None when too short).
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < std::mem::size_of::<Self>() {
            return None;
        }
        // SAFETY: long enough, unaligned read, and every bit pattern is a valid Pod value.
        Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Self>()) })
    }
}

/// `struct inigo_settings`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawSettings {
    pub magic: u32,
    pub layout: u32,
    pub mode: u32,
    pub rfd_source: u32,
    pub threshold_pct: u32,
    pub fairness: u32,
    pub flags: u32,
    pub ts_tick_us: u32,
    pub rebase: u32,
    pub l2_len: u32,
    pub ifindex: u32,
    pub max_conns: u32,
    pub netns_dev: u64,
    pub netns_ino: u64,
    pub generation: u64,
}

/// `struct inigo_key`: a connection seen from the receiving host. Addresses and ports are in
/// network byte order; IPv4 uses the first address word.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Key {
    pub local: [u32; 4],
    pub remote: [u32; 4],
    pub lport: u16,
    pub rport: u16,
    pub family: u16,
    pub pad: u16,
}

impl Key {
    /// The key of a connection between `local` and `remote` (either both IPv4 or both IPv6).
    pub fn new(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Key {
        fn words(ip: std::net::IpAddr) -> ([u32; 4], u16) {
            match ip {
                std::net::IpAddr::V4(a) => ([u32::from_ne_bytes(a.octets()), 0, 0, 0], 4),
                std::net::IpAddr::V6(a) => {
                    let o = a.octets();
                    let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                    ([w(0), w(4), w(8), w(12)], 6)
                }
            }
        }
        let (l, family) = words(local.ip());
        let (r, _) = words(remote.ip());
        Key { local: l, remote: r, lport: local.port().to_be(), rport: remote.port().to_be(), family, pad: 0 }
    }
}

/// `struct inigo_conn`: what the receiver keeps per connection.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conn {
    pub generation: u64,
    pub ref_arrival_ns: u64,
    pub rfd_total_us: i64,
    pub bytes_total: u64,
    pub bytes_late: u64,
    pub segs_late: u64,
    pub ref_tsval: u32,
    pub ref_tsecr: u32,
    pub rtt_min_us: u32,
    /// The last `tcp_sock.rcv_rtt_est.rtt_us` read: the kernel's receive RTT estimate × 8.
    pub rtt_raw: u32,
    pub thresh_us: u32,
    pub alpha: u32,
    pub rcv_cwnd: u32,
    pub rcv_ssthresh: u32,
    pub tick_us: u32,
    pub advmss: u16,
    pub wscale: u8,
    pub flags: u8,
    pub busy: u32,
    pub pad: u32,
}

/// `struct inigo_test_hooks`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestHooks {
    pub now_ns: u64,
    pub sock: u32,
    pub rtt_raw: u32,
    pub rcv_wnd: u32,
    pub advmss: u16,
    pub wscale: u8,
    pub usec_ts: u8,
}

// SAFETY: repr(C) integers, explicitly padded (sizes asserted below).
unsafe impl Pod for RawSettings {}
// SAFETY: as above.
unsafe impl Pod for Key {}
// SAFETY: as above.
unsafe impl Pod for Conn {}
// SAFETY: as above.
unsafe impl Pod for TestHooks {}

const _: () = assert!(std::mem::size_of::<RawSettings>() == 72);
const _: () = assert!(std::mem::size_of::<Key>() == 40);
const _: () = assert!(std::mem::size_of::<Conn>() == 96);
const _: () = assert!(std::mem::size_of::<TestHooks>() == 24);
const _: () = assert!(std::mem::offset_of!(Conn, busy) == 88);

/// `enum inigo_counter`, in order, with the names user space shows.
pub const COUNTERS: [(&str, &str); 21] = [
    ("packets", "every packet the ingress program saw"),
    ("tcp", "TCP segments (IPv4, or IPv6 without extension headers; unfragmented)"),
    ("data", "TCP segments with payload"),
    ("timestamps", "data segments with the Timestamps option (the RFD runs on these)"),
    ("no_timestamps", "data segments without timestamps: passed untouched"),
    ("non_ecn", "marking mode: Not-ECT data segments, passed untouched"),
    ("no_socket", "no established socket for the 4-tuple: passed untouched"),
    ("init", "references saved, nothing judged: a connection's first segment, or no receive RTT estimate yet (T-R1)"),
    ("zero_delta", "the timestamps had not advanced: no RFD sample (T-R2)"),
    ("late", "judged late: D_total > RTT_min * pct / 100 (+ one tick with tick slack)"),
    ("ce_set", "marking mode: CE set"),
    ("ce_already", "marking mode: late and already CE (a switch's mark), left as is"),
    ("ce_cleared", "marking mode with clear_ce: CE cleared on a segment that was not late"),
    ("ss_exits", "window mode: receiver slow-start exits"),
    ("window_updates", "window mode: alpha and window-cap updates"),
    ("busy", "another CPU was updating the connection: passed untouched"),
    ("packets", "every packet the egress program saw (window mode only)"),
    ("tcp", "TCP segments"),
    ("acks", "ACKs of connections with receiver state"),
    ("capped", "ACKs whose advertised window was lowered to rcv_cwnd"),
    ("no_state", "ACKs of connections without receiver state"),
];

/// The first egress counter (`IC_OUT_PACKETS`).
pub const FIRST_EGRESS: usize = 16;
/// `IC_MAX`.
pub const NUM_COUNTERS: usize = COUNTERS.len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hold_network_order_ports_and_addresses() {
        let k = Key::new("10.0.0.2:5201".parse().unwrap(), "10.0.0.1:40000".parse().unwrap());
        let b = k.as_bytes();
        assert_eq!(&b[0..4], &[10, 0, 0, 2]);
        assert_eq!(&b[16..20], &[10, 0, 0, 1]);
        assert_eq!(&b[32..34], &5201u16.to_be_bytes());
        assert_eq!(&b[34..36], &40000u16.to_be_bytes());
        assert_eq!(k.family, 4);
        let k6 = Key::new("[fd00::2]:80".parse().unwrap(), "[fd00::1]:9".parse().unwrap());
        assert_eq!(k6.family, 6);
        assert_eq!(&k6.as_bytes()[0..2], &[0xfd, 0x00]);
        assert_eq!(k6.as_bytes()[15], 2);
    }

    #[test]
    fn structs_round_trip_through_bytes() {
        let c = Conn { rfd_total_us: -5, rcv_cwnd: 7, flags: 3, ..Conn::default() };
        assert_eq!(Conn::from_bytes(c.as_bytes()), Some(c));
        assert_eq!(Conn::from_bytes(&[0; 10]), None);
    }
}
