//! One DPDK Ethernet port: the EAL, an RX and a TX queue, and frames as mbufs.
//!
//! `csrc/port.c` holds the only C: DPDK's burst and mbuf functions are static inline, so Rust
//! reaches them through that file's small exported wrappers, declared here. The EAL is
//! process-global and can be started once per process; [`Port::open`] does both.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

#[repr(C)]
pub struct RteMbuf {
    _opaque: [u8; 0],
}

extern "C" {
    fn ccpd_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn ccpd_eal_cleanup() -> c_int;
    fn ccpd_errno() -> c_int;
    fn ccpd_strerror(err: c_int) -> *const c_char;
    fn ccpd_port_count() -> u16;
    fn ccpd_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    fn ccpd_port_start(
        port: u16,
        rx_desc: u16,
        tx_desc: u16,
        n_mbufs: u32,
        mac: *mut u8,
        mtu: *mut u16,
        what: *mut *const c_char,
    ) -> c_int;
    fn ccpd_port_stop(port: u16);
    fn ccpd_rx(port: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    fn ccpd_tx(port: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    fn ccpd_data(m: *mut RteMbuf, len: *mut u16, segs: *mut u16) -> *mut u8;
    fn ccpd_alloc(len: u16, data: *mut *mut u8) -> *mut RteMbuf;
    fn ccpd_trim(m: *mut RteMbuf, len: u16) -> c_int;
    fn ccpd_free(m: *mut RteMbuf);
    fn ccpd_stats(port: u16, out: *mut u64) -> c_int;
}

fn strerror(err: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated string.
    unsafe { CStr::from_ptr(ccpd_strerror(err)) }.to_string_lossy().into_owned()
}

/// Largest frame the sender builds or accepts (a 1500-byte MTU plus the Ethernet header).
pub const MAX_FRAME: u16 = 1514;
/// Frames moved per burst call.
pub const BURST: usize = 64;

/// How to open the port.
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// EAL arguments after the program name (`--no-huge`, `--vdev`, …).
    pub eal_args: Vec<String>,
    /// The device's name as the EAL knows it (a vdev's name, e.g. `net_af_xdp0`); `None`: the
    /// only port there is.
    pub device: Option<String>,
    pub rx_desc: u16,
    pub tx_desc: u16,
    pub mbufs: u32,
}

/// Port counters from the driver.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_no_mbuf: u64,
}

/// The started port. Dropping it stops the port and releases the EAL.
pub struct Port {
    id: u16,
    mac: [u8; 6],
    mtu: u16,
}

impl Port {
    /// Starts the EAL with `cfg.eal_args` and the port on it.
    pub fn open(cfg: &PortConfig) -> Result<Port, String> {
        let mut args: Vec<CString> = Vec::with_capacity(cfg.eal_args.len() + 1);
        args.push(CString::new("ccp-dpdk").expect("no NUL"));
        for a in &cfg.eal_args {
            args.push(CString::new(a.as_str()).map_err(|_| format!("EAL argument {a:?} contains a NUL byte"))?);
        }
        let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
        argv.push(ptr::null_mut());
        // SAFETY: argv is a NULL-terminated array of NUL-terminated strings that outlive the
        // call; the EAL may permute the array but keeps pointers into `args`, which we never free
        // while the process runs (leaked below, as the EAL expects for argv).
        let rc = unsafe { ccpd_eal_init(args.len() as c_int, argv.as_mut_ptr()) };
        std::mem::forget(args);
        std::mem::forget(argv);
        if rc < 0 {
            // SAFETY: plain read of DPDK's per-thread errno.
            let err = unsafe { ccpd_errno() };
            return Err(format!(
                "the DPDK EAL did not start ({}); its arguments were: {}",
                strerror(err),
                cfg.eal_args.join(" ")
            ));
        }
        let id = match &cfg.device {
            Some(name) => {
                let c = CString::new(name.as_str()).map_err(|_| "device name contains a NUL byte".to_string())?;
                let mut id = 0u16;
                // SAFETY: valid C string and out pointer.
                if unsafe { ccpd_port_by_name(c.as_ptr(), &mut id) } != 0 {
                    cleanup();
                    return Err(format!(
                        "DPDK has no port named {name:?} (is it in a --vdev argument? {} port(s) exist)",
                        // SAFETY: plain query.
                        unsafe { ccpd_port_count() }
                    ));
                }
                id
            }
            None => {
                // SAFETY: plain query.
                match unsafe { ccpd_port_count() } {
                    1 => 0,
                    n => {
                        cleanup();
                        return Err(format!("DPDK found {n} ports; name the one to use"));
                    }
                }
            }
        };
        let mut mac = [0u8; 6];
        let mut mtu = 0u16;
        let mut what: *const c_char = ptr::null();
        // SAFETY: out pointers are valid for the call; `what` ends up pointing at a static string.
        let rc = unsafe { ccpd_port_start(id, cfg.rx_desc, cfg.tx_desc, cfg.mbufs, mac.as_mut_ptr(), &mut mtu, &mut what) };
        if rc < 0 {
            // SAFETY: set to a static string literal by the C side before any failure.
            let step = if what.is_null() { "?".into() } else { unsafe { CStr::from_ptr(what) }.to_string_lossy().into_owned() };
            cleanup();
            return Err(format!("starting DPDK port {id} failed in {step}: {}", strerror(rc)));
        }
        Ok(Port { id, mac, mtu })
    }

    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    /// Receives up to `BURST` frames into `out` (which it clears first).
    pub fn rx(&self, out: &mut RxBatch) {
        out.release();
        // SAFETY: the array has room for BURST pointers; DPDK fills `n` of them with mbufs we
        // now own (freed by RxBatch).
        let n = unsafe { ccpd_rx(self.id, out.mbufs.as_mut_ptr(), BURST as u16) };
        out.len = usize::from(n);
    }

    /// A buffer to build a frame of at most `len` bytes in; `None` when the pool is empty.
    pub fn alloc(&self, len: u16) -> Option<TxFrame> {
        let mut data: *mut u8 = ptr::null_mut();
        // SAFETY: out pointer valid; a non-null mbuf has `len` writable bytes at `data`.
        let m = unsafe { ccpd_alloc(len, &mut data) };
        (!m.is_null()).then_some(TxFrame { m, data, len })
    }

    /// Hands the frames of `batch` to the device, oldest first; what it has no room for stays
    /// in `batch` for the next call (a full ring is back-pressure, not loss). Returns how many
    /// it took.
    pub fn tx(&self, batch: &mut TxBatch) -> usize {
        let n = batch.mbufs.len();
        let mut sent = 0;
        while sent < n {
            // SAFETY: the pointers are mbufs we own; DPDK takes ownership of those it sends.
            let k = unsafe { ccpd_tx(self.id, batch.mbufs.as_mut_ptr().add(sent), (n - sent).min(BURST) as u16) };
            if k == 0 {
                break;
            }
            sent += usize::from(k);
        }
        batch.mbufs.drain(..sent);
        sent
    }

    pub fn stats(&self) -> PortStats {
        let mut v = [0u64; 8];
        // SAFETY: `v` has the 8 slots the C side writes.
        if unsafe { ccpd_stats(self.id, v.as_mut_ptr()) } < 0 {
            return PortStats::default();
        }
        PortStats {
            rx_packets: v[0],
            tx_packets: v[1],
            rx_bytes: v[2],
            tx_bytes: v[3],
            rx_missed: v[4],
            rx_errors: v[5],
            tx_errors: v[6],
            rx_no_mbuf: v[7],
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: the port was started by `open`; nothing uses it after this.
        unsafe { ccpd_port_stop(self.id) };
        cleanup();
    }
}

fn cleanup() {
    // SAFETY: releases the EAL's resources; called once, after the port is stopped.
    unsafe { ccpd_eal_cleanup() };
}

/// Frames received in one burst; freed on the next receive or when dropped.
pub struct RxBatch {
    mbufs: [*mut RteMbuf; BURST],
    len: usize,
}

impl Default for RxBatch {
    fn default() -> Self {
        RxBatch { mbufs: [ptr::null_mut(); BURST], len: 0 }
    }
}

impl RxBatch {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Frame `i`'s bytes; `None` for a chained (multi-segment) frame, which the sender never
    /// expects from a 1500-byte-MTU peer.
    pub fn frame(&self, i: usize) -> Option<&[u8]> {
        let m = *self.mbufs[..self.len].get(i)?;
        let (mut len, mut segs) = (0u16, 0u16);
        // SAFETY: `m` is a received mbuf we own until `release`; the slice lives no longer.
        let data = unsafe { ccpd_data(m, &mut len, &mut segs) };
        (segs == 1 && !data.is_null()).then(|| unsafe { std::slice::from_raw_parts(data, usize::from(len)) })
    }

    fn release(&mut self) {
        for &m in &self.mbufs[..self.len] {
            // SAFETY: received mbufs we own.
            unsafe { ccpd_free(m) };
        }
        self.len = 0;
    }
}

impl Drop for RxBatch {
    fn drop(&mut self) {
        self.release();
    }
}

/// A frame being built.
pub struct TxFrame {
    m: *mut RteMbuf,
    data: *mut u8,
    len: u16,
}

impl TxFrame {
    pub fn buf(&mut self) -> &mut [u8] {
        // SAFETY: `len` writable bytes at `data`, owned by this frame's mbuf.
        unsafe { std::slice::from_raw_parts_mut(self.data, usize::from(self.len)) }
    }

    /// Keeps the first `used` bytes (what the frame builder wrote) and queues the frame.
    pub fn finish(self, used: usize, batch: &mut TxBatch) {
        let used = used.min(usize::from(self.len)) as u16;
        // SAFETY: trimming within the appended length.
        unsafe { ccpd_trim(self.m, self.len - used) };
        batch.mbufs.push(self.m);
        std::mem::forget(self);
    }
}

impl Drop for TxBatch {
    fn drop(&mut self) {
        for &m in &self.mbufs {
            // SAFETY: frames the device never took are still ours.
            unsafe { ccpd_free(m) };
        }
    }
}

impl Drop for TxFrame {
    fn drop(&mut self) {
        // SAFETY: an unsent frame's mbuf is ours.
        unsafe { ccpd_free(self.m) };
    }
}

/// Frames waiting for the next [`Port::tx`].
#[derive(Default)]
pub struct TxBatch {
    mbufs: Vec<*mut RteMbuf>,
}

impl TxBatch {
    pub fn len(&self) -> usize {
        self.mbufs.len()
    }
}
