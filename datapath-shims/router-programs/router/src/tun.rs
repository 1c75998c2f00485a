//! TUN devices: layer-3 virtual interfaces whose packets the router reads and writes through a
//! file descriptor. Created non-persistent, so the kernel removes a device as soon as its last
//! descriptor closes, even if the router is killed.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};

/// `TUNSETIFF` from <linux/if_tun.h> (`_IOW('T', 202, int)`).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// Layer 3 device (no Ethernet header).
const IFF_TUN: libc::c_short = 0x0001;
/// No 4-byte packet-information prefix: reads and writes are bare IP packets.
const IFF_NO_PI: libc::c_short = 0x1000;

/// `struct ifreq` as TUNSETIFF uses it: a name and the flags.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An open TUN device.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates TUN device `name` in the calling *thread's* network namespace, non-blocking.
    pub fn create(name: &str) -> Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(Error::param("tun name", format!("{name:?} must be 1..{} bytes", libc::IFNAMSIZ - 1)));
        }
        // SAFETY: the path is a valid C string; the fd is owned immediately.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(Error::last_os("opening /dev/net/tun"));
        }
        // SAFETY: raw is a fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: IFF_TUN | IFF_NO_PI, _pad: [0; 22] };
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: TUNSETIFF reads an ifreq-sized struct from the pointer.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(Error::last_os(format!("TUNSETIFF {name}")));
        }
        Ok(Tun { fd, name: name.to_string() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads one packet; `Ok(None)` when none is waiting.
    pub fn read(&self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Ok(None)
        } else {
            Err(e)
        }
    }

    /// Writes one packet into the device's namespace.
    pub fn write(&self, packet: &[u8]) -> std::io::Result<()> {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// A second descriptor for the same device (the router's event loop gets its own).
    pub fn try_clone(&self) -> Result<Tun> {
        let fd = self.fd.try_clone().map_err(|e| Error::io(format!("dup of {}", self.name), e))?;
        Ok(Tun { fd, name: self.name.clone() })
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
