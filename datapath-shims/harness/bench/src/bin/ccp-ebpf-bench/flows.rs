//! Many concurrent flows over a namespace's loopback, each sending a little every few ms: enough
//! ACKs per flow for a report every interval, without saturating the machine.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccp_bench_harness::tcp::connect;
use ccp_ebpf::netns::Netns;

/// Runs `n` flows on `cc` inside `ns` for `duration`, each writing `chunk` bytes every `every`.
/// Returns the bytes written.
pub fn run(ns: &Netns, n: usize, cc: &str, duration: Duration, every: Duration, chunk: usize) -> anyhow::Result<u64> {
    ns.run(|| -> anyhow::Result<u64> {
        let listener = TcpListener::bind("127.0.0.1:0").context("listen")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop_rx = Arc::clone(&stop);
        let sink = std::thread::spawn(move || -> anyhow::Result<()> {
            let mut conns = Vec::with_capacity(n);
            for _ in 0..n {
                let (s, _) = listener.accept()?;
                s.set_nonblocking(true)?;
                conns.push(s);
            }
            let mut fds: Vec<libc::pollfd> =
                conns.iter().map(|c| libc::pollfd { fd: c.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
            let mut buf = vec![0u8; 1 << 16];
            while !stop_rx.load(Ordering::Relaxed) {
                // SAFETY: poll over a valid array of pollfds.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
                if ready <= 0 {
                    continue;
                }
                for (i, p) in fds.iter_mut().enumerate() {
                    if p.revents != 0 {
                        p.revents = 0;
                        while conns[i].read(&mut buf).is_ok_and(|r| r > 0) {}
                    }
                }
            }
            Ok(())
        });
        let mut clients = Vec::with_capacity(n);
        for _ in 0..n {
            let c = connect(addr, cc).with_context(|| format!("connecting on {cc}"))?;
            c.set_nonblocking(true)?;
            clients.push(c);
        }
        let data = vec![1u8; chunk];
        let mut written = 0u64;
        let t0 = Instant::now();
        let mut next = t0;
        while t0.elapsed() < duration {
            for c in clients.iter_mut() {
                if let Ok(w) = c.write(&data) {
                    written += w as u64;
                }
            }
            next += every;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        drop(clients);
        stop.store(true, Ordering::Relaxed);
        sink.join().map_err(|_| anyhow::anyhow!("the receiving thread panicked"))??;
        Ok(written)
    })?
}
