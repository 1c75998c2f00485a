//! Many bulk TCP flows at once, as a busy host moves bytes: every sender writes as fast as its
//! socket takes data and every receiver reads as fast as data arrives. One sending and one
//! receiving thread serve all flows through epoll (mio), so the generator's own cost per byte
//! is the same whichever congestion control the flows run on; iperf3 stops at 128 streams.
//!
//! The bytes received are counted as they arrive, so a benchmark can time a window in the middle
//! of the run (after slow start, before the flows close).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use ccp_bench_harness::tcp::connect;
use ccp_ebpf::netns::Netns;
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};

/// Bytes a sender hands its socket per write, and a receiver reads per read.
const CHUNK: usize = 64 * 1024;
/// How often the loops look at the stop flag when no socket is ready.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Running flows; stopped (and every socket closed) by [`BulkFlows::stop`] or on drop.
pub struct BulkFlows {
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    threads: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl BulkFlows {
    /// Opens `n` connections on congestion control `cc` from namespace `sender` to a listener on
    /// `addr` in namespace `receiver` and starts them sending.
    pub fn start(sender: &Netns, receiver: &Netns, addr: Ipv4Addr, n: usize, cc: &str) -> anyhow::Result<BulkFlows> {
        let listener = receiver
            .run(|| TcpListener::bind(SocketAddr::from((addr, 0))))
            .context("entering the receiver's namespace")?
            .with_context(|| format!("listening on {addr}"))?;
        let to = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let mut flows = BulkFlows { stop: Arc::clone(&stop), received: Arc::clone(&received), threads: Vec::new() };
        let (stop_rx, count) = (Arc::clone(&stop), Arc::clone(&received));
        flows.threads.push(std::thread::spawn(move || receive(listener, n, &stop_rx, &count)));
        let cc_name = cc.to_string();
        let senders = sender
            .run(move || -> io::Result<Vec<TcpStream>> { (0..n).map(|_| connect(to, &cc_name)).collect() })
            .context("entering the sender's namespace")?
            .with_context(|| format!("connecting {n} flows on {cc} to {to}"))?;
        let stop_tx = Arc::clone(&stop);
        flows.threads.push(std::thread::spawn(move || send(senders, &stop_tx)));
        Ok(flows)
    }

    /// Bytes received so far, all flows.
    pub fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Stops sending and receiving, closes every socket; the first error either side met.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.join()
    }

    fn join(&mut self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first = Ok(());
        for t in self.threads.drain(..) {
            let r = t.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a bulk-flow thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for BulkFlows {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// Accepts `n` connections, then reads every one until told to stop.
fn receive(listener: TcpListener, n: usize, stop: &AtomicBool, received: &AtomicU64) -> anyhow::Result<()> {
    // Accepting without blocking, so a sender that fails to connect cannot hold this thread.
    listener.set_nonblocking(true)?;
    let mut conns = Vec::with_capacity(n);
    while conns.len() < n {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(true)?;
                conns.push(MioStream::from_std(s));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(e).context("accepting a bulk flow"),
        }
    }
    let mut poll = Poll::new()?;
    for (i, c) in conns.iter_mut().enumerate() {
        poll.registry().register(c, Token(i), Interest::READABLE)?;
    }
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; CHUNK];
    // Edge-triggered: read every connection dry once, then whenever it becomes readable again.
    let mut ready: Vec<usize> = (0..n).collect();
    while !stop.load(Ordering::Relaxed) {
        for i in ready.drain(..) {
            loop {
                match conns[i].read(&mut buf) {
                    Ok(0) => break,
                    Ok(r) => {
                        received.fetch_add(r as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // The other side closing first as the run stops is not a failure.
                    Err(_) if stop.load(Ordering::Relaxed) => return Ok(()),
                    Err(e) => return Err(e).context("reading a bulk flow"),
                }
            }
        }
        match poll.poll(&mut events, Some(STOP_POLL)) {
            Ok(()) => ready.extend(events.iter().map(|e| e.token().0)),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Writes to every connection whenever it has room, until told to stop.
fn send(conns: Vec<TcpStream>, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut conns: Vec<MioStream> = conns
        .into_iter()
        .map(|c| {
            c.set_nonblocking(true)?;
            Ok(MioStream::from_std(c))
        })
        .collect::<io::Result<_>>()?;
    let mut poll = Poll::new()?;
    for (i, c) in conns.iter_mut().enumerate() {
        poll.registry().register(c, Token(i), Interest::WRITABLE)?;
    }
    let mut events = Events::with_capacity(1024);
    let data = vec![0x5au8; CHUNK];
    let mut ready: Vec<usize> = (0..conns.len()).collect();
    while !stop.load(Ordering::Relaxed) {
        for i in ready.drain(..) {
            loop {
                match conns[i].write(&data) {
                    Ok(0) => bail!("a bulk flow's socket took no data"),
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) if stop.load(Ordering::Relaxed) => return Ok(()),
                    Err(e) => return Err(e).context("writing a bulk flow"),
                }
            }
        }
        match poll.poll(&mut events, Some(STOP_POLL)) {
            Ok(()) => ready.extend(events.iter().map(|e| e.token().0)),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
