//! SIGINT and SIGTERM end a host's loop cleanly instead of killing it, so libccp still sends the
//! agent a close for every connection and the host undoes what it set up.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// From now on SIGINT and SIGTERM only set the flag [`requested`] reads.
pub fn on_sigint_and_sigterm() {
    let handler = request_stop as extern "C" fn(libc::c_int);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(signal, handler as libc::sighandler_t);
        }
    }
}

/// Whether SIGINT or SIGTERM arrived.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
