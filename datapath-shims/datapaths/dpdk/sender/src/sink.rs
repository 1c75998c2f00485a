//! `ccp-dpdk sink`: an unmodified kernel TCP receiver that checks what `send` sent.
//!
//! It accepts connections, reads each to the end and prints one JSON line per connection: the
//! bytes received, their stream hash, and whether that hash is the one of the sender's byte
//! pattern of that length (`ccp_user_tcp::source`), i.e. whether every byte arrived intact and in
//! order (with `--no-verify`, only the bytes are counted and `intact` is false). It is a plain socket program on purpose: the point is a peer the user-space sender did
//! not write.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ccp_user_tcp::source::{pattern_hash, StreamHash};

use crate::cli::SinkArgs;

/// Connections read at once; more wait in the listen backlog.
const MAX_CONCURRENT: u64 = 4096;
/// Connections the kernel may hold completed but not yet accepted.
const LISTEN_BACKLOG: i32 = 4096;

pub fn run(args: &SinkArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen).map_err(|e| anyhow::anyhow!("listening on {} failed: {e}", args.listen))?;
    // The standard library listens with a backlog of 128: a sender opening a thousand
    // connections at once overflows it, the kernel falls back to SYN cookies, and a cookie
    // only validates the first segment after the handshake, so the rest get RSTs. Listening
    // again raises the backlog (the kernel caps it at net.core.somaxconn).
    // SAFETY: listen(2) on the listener's own descriptor.
    if unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
        eprintln!("ccp-dpdk sink: raising the listen backlog failed: {}", io::Error::last_os_error());
    }
    if let Some(bytes) = args.rcvbuf {
        // Accepted connections inherit the listener's buffer, and its window scale is chosen from
        // it when a SYN arrives.
        let v = bytes as libc::c_int;
        // SAFETY: setsockopt(2) on the listener's own descriptor with an int option value.
        let rc = unsafe {
            libc::setsockopt(
                listener.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            anyhow::bail!("setting the receive buffer to {bytes} B failed: {}", io::Error::last_os_error());
        }
    }
    eprintln!("ccp-dpdk sink: listening on {}", listener.local_addr()?);
    let active = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicU64::new(0));
    let mut accepted = 0u64;
    let mut workers = Vec::new();
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("ccp-dpdk sink: accept failed: {e}");
                continue;
            }
        };
        while active.load(Ordering::Acquire) >= MAX_CONCURRENT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        active.fetch_add(1, Ordering::AcqRel);
        let (active, ended) = (Arc::clone(&active), Arc::clone(&ended));
        let verify = !args.no_verify;
        workers.push(std::thread::spawn(move || {
            let line = receive(stream, verify);
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
            active.fetch_sub(1, Ordering::AcqRel);
            ended.fetch_add(1, Ordering::AcqRel);
        }));
        accepted += 1;
        if args.count.is_some_and(|n| accepted >= n) {
            break;
        }
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}

/// Reads one connection to its end; the JSON line that describes it.
fn receive(mut stream: TcpStream, verify: bool) -> String {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let t0 = Instant::now();
    let mut hash = StreamHash::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut bytes = 0u64;
    let error = loop {
        match stream.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                if verify {
                    hash.update(&buf[..n]);
                }
                bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Some(e.to_string()),
        }
    };
    let secs_us = t0.elapsed().as_micros() as u64;
    let got = hash.finish();
    let intact = error.is_none() && verify && got == pattern_hash(bytes);
    let kbps = (bytes * 8 * 1000).checked_div(secs_us).unwrap_or(0);
    match error {
        None => format!(
            "{{\"peer\":\"{peer}\",\"bytes\":{bytes},\"hash\":\"{got:016x}\",\"intact\":{intact},\"duration_us\":{secs_us},\"kbps\":{kbps}}}"
        ),
        Some(e) => format!(
            "{{\"peer\":\"{peer}\",\"bytes\":{bytes},\"hash\":\"{got:016x}\",\"intact\":false,\"duration_us\":{secs_us},\"kbps\":{kbps},\"error\":{:?}}}",
            e
        ),
    }
}
