//! A BPF ring-buffer consumer that owns its mappings and file descriptor.
//!
//! libbpf-rs's `RingBuffer` borrows the map and a callback for its whole life, which does not
//! fit a long-lived datapath object that also owns the map; and its `poll` only drains rings that
//! signalled epoll, while records submitted with `BPF_RB_NO_WAKEUP` never signal (pitfall E).
//! This consumer is drained explicitly, from an epoll wakeup or a timer alike, and its map fd is
//! itself the pollable descriptor (the kernel's ring buffer supports poll).
//!
//! Memory layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position (we write it),
//! page 1 the producer position; the data area follows and is mapped twice in a row, so a
//! record that wraps around the end is still contiguous. Each record has an 8-byte header whose
//! first word is the length with a busy bit (not yet committed) and a discard bit.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SZ: u64 = 8;

/// Where a walk over the data area stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Walk {
    /// The new consumer position.
    pub pos: u64,
    /// Samples handed to the callback.
    pub samples: usize,
    /// A header claimed a length that cannot fit the ring: the ring is not what we think it is.
    pub corrupt: bool,
}

/// Walks committed samples from `cons` up to `prod`, handing on at most `max`. `hdr(pos)` reads
/// the header word at ring position `pos` with acquire ordering; `sample(pos, len)` hands the
/// `len` bytes after it on.
pub(crate) fn walk(
    size: u64,
    mut cons: u64,
    prod: u64,
    max: usize,
    mut hdr: impl FnMut(u64) -> u32,
    mut sample: impl FnMut(u64, usize),
) -> Walk {
    let mut samples = 0;
    while cons < prod && samples < max {
        let word = hdr(cons);
        if word & BUSY_BIT != 0 {
            break;
        }
        let len = u64::from(word & !(BUSY_BIT | DISCARD_BIT));
        if len + HDR_SZ > size {
            return Walk { pos: cons, samples, corrupt: true };
        }
        if word & DISCARD_BIT == 0 {
            sample(cons, len as usize);
            samples += 1;
        }
        cons += (len + HDR_SZ + 7) & !7;
    }
    Walk { pos: cons, samples, corrupt: false }
}

/// Consumer side of one `BPF_MAP_TYPE_RINGBUF` map.
pub struct RingBuf {
    fd: OwnedFd,
    page: usize,
    size: u64,
    consumer: NonNull<u8>,
    producer: NonNull<u8>,
}

impl RingBuf {
    /// Maps the ring of `map` (a ring-buffer map of `size` data bytes, a power of two).
    pub fn new(map: BorrowedFd<'_>, size: u32) -> io::Result<RingBuf> {
        if !size.is_power_of_two() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("ring size {size} is not a power of two")));
        }
        let fd = map.try_clone_to_owned()?;
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let data = size as usize;
        // SAFETY: mapping a ring-buffer map fd as the kernel documents: one writable consumer
        // page at offset 0, then the read-only producer page plus the data area twice.
        let consumer = unsafe {
            libc::mmap(std::ptr::null_mut(), page, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if consumer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * data,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                page as libc::off_t,
            )
        };
        if producer == libc::MAP_FAILED {
            let err = io::Error::last_os_error();
            // SAFETY: unmapping the mapping made above.
            unsafe { libc::munmap(consumer, page) };
            return Err(err);
        }
        let (Some(consumer), Some(producer)) = (NonNull::new(consumer.cast::<u8>()), NonNull::new(producer.cast::<u8>())) else {
            return Err(io::Error::other("mmap returned a null mapping"));
        };
        Ok(RingBuf { fd, page, size: u64::from(size), consumer, producer })
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page is mapped for our lifetime and 8-byte aligned at its start.
        unsafe { AtomicU64::from_ptr(self.consumer.as_ptr().cast::<u64>()) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: the producer page is mapped for our lifetime and 8-byte aligned at its start.
        unsafe { AtomicU64::from_ptr(self.producer.as_ptr().cast::<u64>()) }
    }

    fn data(&self) -> *const u8 {
        // SAFETY: the data area starts one page into the producer mapping.
        unsafe { self.producer.as_ptr().add(self.page) }
    }

    /// Hands every committed sample to `f`, in order, and releases its space; returns how many.
    /// Stops at the first sample still being written. A corrupt header (which the kernel never
    /// writes) ends the drain with an error rather than a read out of bounds.
    pub fn drain(&mut self, f: impl FnMut(&[u8])) -> io::Result<usize> {
        self.drain_at_most(usize::MAX, f)
    }

    /// As [`RingBuf::drain`], stopping after `max` samples (the rest stay for the next call).
    pub fn drain_at_most(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> io::Result<usize> {
        let mask = self.size - 1;
        let data = self.data();
        let mut total = 0;
        loop {
            let cons = self.consumer_pos().load(Ordering::Acquire);
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod || total >= max {
                return Ok(total);
            }
            let w = walk(
                self.size,
                cons,
                prod,
                max - total,
                |pos| {
                    // SAFETY: (pos & mask) + 8 <= size: the header lies in the first data copy,
                    // 8-aligned (records are 8-aligned).
                    unsafe { AtomicU32::from_ptr(data.add((pos & mask) as usize).cast_mut().cast::<u32>()) }
                        .load(Ordering::Acquire)
                },
                |pos, len| {
                    // SAFETY: walk() checked len + 8 <= size, and the data area is mapped twice
                    // in a row, so the sample is contiguous and within the mapping.
                    let s = unsafe { std::slice::from_raw_parts(data.add((pos & mask) as usize + HDR_SZ as usize), len) };
                    f(s);
                },
            );
            total += w.samples;
            self.consumer_pos().store(w.pos, Ordering::Release);
            if w.corrupt {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "ring buffer header with an impossible length"));
            }
            if w.pos == cons {
                // The next sample is still being written.
                return Ok(total);
            }
        }
    }
}

impl AsFd for RingBuf {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the two mappings made in new().
        unsafe {
            libc::munmap(self.consumer.as_ptr().cast(), self.page);
            libc::munmap(self.producer.as_ptr().cast(), self.page + 2 * self.size as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of `size` bytes laid out as the kernel lays it out, in a Vec.
    struct Fake {
        size: u64,
        data: Vec<u8>,
        prod: u64,
    }

    impl Fake {
        fn new(size: u64) -> Fake {
            Fake { size, data: vec![0; size as usize * 2], prod: 0 }
        }
        fn push(&mut self, payload: &[u8], flags: u32) {
            let mask = self.size - 1;
            let hdr = (payload.len() as u32) | flags;
            let mut bytes = hdr.to_le_bytes().to_vec();
            bytes.extend_from_slice(&[0; 4]);
            bytes.extend_from_slice(payload);
            for (i, b) in bytes.iter().enumerate() {
                let off = ((self.prod + i as u64) & mask) as usize;
                self.data[off] = *b;
                self.data[off + self.size as usize] = *b;
            }
            self.prod += (payload.len() as u64 + HDR_SZ + 7) & !7;
        }
        fn walk(&self, cons: u64) -> (Walk, Vec<Vec<u8>>) {
            self.walk_at_most(cons, usize::MAX)
        }
        fn walk_at_most(&self, cons: u64, max: usize) -> (Walk, Vec<Vec<u8>>) {
            let mask = self.size - 1;
            let mut got = Vec::new();
            let w = walk(
                self.size,
                cons,
                self.prod,
                max,
                |pos| {
                    let o = (pos & mask) as usize;
                    u32::from_le_bytes(self.data[o..o + 4].try_into().unwrap())
                },
                |pos, len| {
                    let o = (pos & mask) as usize + 8;
                    got.push(self.data[o..o + len].to_vec());
                },
            );
            (w, got)
        }
    }

    #[test]
    fn hands_out_samples_in_order_and_skips_discarded_ones() {
        let mut r = Fake::new(64);
        r.push(b"abc", 0);
        r.push(b"discarded", DISCARD_BIT);
        r.push(b"0123456789", 0);
        let (w, got) = r.walk(0);
        assert_eq!(got, vec![b"abc".to_vec(), b"0123456789".to_vec()]);
        assert_eq!(w, Walk { pos: 16 + 24 + 24, samples: 2, corrupt: false });
    }

    #[test]
    fn a_bounded_walk_stops_after_max_samples_and_resumes_there() {
        let mut r = Fake::new(128);
        for i in 0..5u8 {
            r.push(&[i; 4], 0);
        }
        r.push(b"gone", DISCARD_BIT);
        let (w, got) = r.walk_at_most(0, 2);
        assert_eq!(got, vec![vec![0; 4], vec![1; 4]]);
        assert_eq!(w, Walk { pos: 32, samples: 2, corrupt: false });
        let (w2, got) = r.walk_at_most(w.pos, 10);
        assert_eq!(got, vec![vec![2; 4], vec![3; 4], vec![4; 4]]);
        // The discarded sample at the end is released too.
        assert_eq!(w2, Walk { pos: 6 * 16, samples: 3, corrupt: false });
    }

    #[test]
    fn stops_at_a_sample_still_being_written() {
        let mut r = Fake::new(64);
        r.push(b"done", 0);
        r.push(b"busy", BUSY_BIT);
        r.push(b"after", 0);
        let (w, got) = r.walk(0);
        assert_eq!(got, vec![b"done".to_vec()]);
        assert_eq!(w.pos, 16);
    }

    #[test]
    fn a_sample_that_wraps_is_contiguous() {
        let mut r = Fake::new(64);
        r.push(&[1; 40], 0); // 48 bytes: the next one starts at 48 and wraps
        let (w, _) = r.walk(0);
        r.push(&[7; 20], 0);
        let (w2, got) = r.walk(w.pos);
        assert_eq!(got, vec![vec![7; 20]]);
        assert_eq!(w2.pos, 48 + 32);
    }

    #[test]
    fn an_impossible_length_is_reported_not_read() {
        let mut r = Fake::new(64);
        r.push(&[0; 4], 0);
        // Overwrite the header with a length larger than the ring.
        r.data[0..4].copy_from_slice(&1000u32.to_le_bytes());
        let (w, got) = r.walk(0);
        assert!(w.corrupt);
        assert!(got.is_empty());
        assert_eq!(w.pos, 0);
    }
}
