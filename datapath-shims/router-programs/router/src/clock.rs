//! Time: CLOCK_MONOTONIC in nanoseconds, and a timerfd armed at absolute monotonic times so the
//! event loop wakes exactly when the next packet is due (no sleeps that overshoot, no spinning).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ccp_qdisc::{Nanos, NANOS_PER_SEC};

use crate::error::{Error, Result};

/// Now on CLOCK_MONOTONIC, nanoseconds.
pub fn now() -> Nanos {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as Nanos * NANOS_PER_SEC + ts.tv_nsec as Nanos
}

/// A non-blocking timerfd on CLOCK_MONOTONIC.
#[derive(Debug)]
pub struct Timer {
    fd: OwnedFd,
    armed_at: Option<Nanos>,
}

impl Timer {
    pub fn new() -> Result<Timer> {
        // SAFETY: plain syscall; the fd is owned immediately.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last_os("timerfd_create"));
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Timer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed_at: None })
    }

    /// Arms the timer to fire at absolute time `at` (or disarms it with `None`). Re-arming at the
    /// same time is a no-op, saving a syscall per loop iteration.
    pub fn arm(&mut self, at: Option<Nanos>) -> Result<()> {
        if at == self.armed_at {
            return Ok(());
        }
        // A zero it_value disarms; an absolute time of 0 would too, so fire at ≥ 1 ns.
        let t = at.map_or(0, |t| t.max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (t / NANOS_PER_SEC) as libc::time_t,
                tv_nsec: (t % NANOS_PER_SEC) as libc::c_long,
            },
        };
        // SAFETY: valid fd and itimerspec.
        let r = unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(Error::last_os("timerfd_settime"));
        }
        self.armed_at = at;
        Ok(())
    }

    /// Consumes a pending expiry so the fd stops being readable.
    pub fn acknowledge(&mut self) {
        let mut buf = [0u8; 8];
        // SAFETY: valid fd and buffer; EAGAIN (no expiry) is fine.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 8 {
            self.armed_at = None;
        }
    }
}

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_timer_fires() {
        let a = now();
        let mut t = Timer::new().unwrap();
        t.arm(Some(a + 1_000_000)).unwrap();
        let mut pfd = libc::pollfd { fd: t.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
        assert_eq!(n, 1);
        assert!(now() >= a + 1_000_000);
        t.acknowledge();
        t.arm(None).unwrap();
    }
}
