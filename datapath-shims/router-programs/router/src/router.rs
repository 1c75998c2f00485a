//! The router's event loop: moves packets between the two TUN devices through, per direction, a
//! queue discipline, an emulated link and a propagation delay line.
//!
//! With per-flow-class delays ([`crate::classes`]) the queue and link stay shared; a packet's
//! class only picks the delay line it waits in after the link, one line per class, released
//! independently (a short-delay packet never waits behind a long-delay one).
//!
//! One thread, level-triggered epoll over the two TUN descriptors, a timerfd armed at the next
//! instant something is due (a link opportunity, a packet leaving the delay line) and a stop
//! descriptor (signalfd for the binary, eventfd for the library). No busy polling: on a 2-core
//! machine shared with the flows under test, spinning would steal the CPU the flows need. Timing
//! accuracy comes from virtual time instead: links compute each packet's exact start and finish
//! times, and the delay line releases at exact times, so a late wakeup delays only the packets
//! due during it and never accumulates.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ccp_qdisc::{DropReason, Ecn, Nanos, Outputs, Qdisc};
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::SplitMix64;

use crate::classes::{self, ClassDelay, Dir};
use crate::clock::{self, Timer};
use crate::config::{DirectionConfig, RouterConfig};
use crate::delay::{ClassedDelayLine, DelayLine};
use crate::error::{Error, Result};
use crate::feedback::cnm_datagram;
use crate::link::{Link, Sent};
use crate::log::{CsvLog, Outcome, Row};
use crate::pacer::SenderPacer;
use crate::packet::IpPacket;
use crate::summary::{ClassSummary, DirectionInfo, DirectionStats, Summary};
use crate::topology::{Side, Topology};
use crate::tun::Tun;

/// Largest packet a TUN read can return (IPv4 total length is 16 bits).
const MAX_PACKET_BYTES: usize = 65_535;
/// Packets read from one device per loop iteration before serving the others (fairness between
/// directions and timers; level-triggered epoll brings us straight back for the rest).
const READ_BATCH: usize = 64;
/// The timer is never armed closer than this to now: at high packet rates this coalesces wakeups
/// (one per few packets instead of one per packet) at a bounded cost in delivery-time error.
const MIN_WAKE_GAP_NS: Nanos = 20_000;
/// SCHED_FIFO priority of the event loop with `realtime` (low: above every normal task, below
/// the kernel's own real-time threads).
const REALTIME_PRIORITY: libc::c_int = 10;
/// Congestion point id written into CNMs from the data direction's queue.
const DOWN_CPID: u32 = 1;

const TOKEN_SENDER_TUN: u64 = 0;
const TOKEN_RECEIVER_TUN: u64 = 1;
const TOKEN_TIMER: u64 = 2;
const TOKEN_STOP: u64 = 3;

/// A packet between the link and the far TUN device.
#[derive(Debug)]
struct InFlight {
    packet: IpPacket,
    enqueued_at: Nanos,
    dequeued_at: Nanos,
    finished_at: Nanos,
}

/// One direction: qdisc → link → delay line (one per flow class).
struct Direction {
    name: &'static str,
    dir: Dir,
    config: DirectionConfig,
    qdisc: Box<dyn Qdisc<IpPacket> + Send>,
    link: Link<IpPacket>,
    /// The flow classes (shared by both directions; each matches in its own orientation).
    classes: Vec<ClassDelay>,
    /// Line 0: the direction's default delay; line i + 1: class i's.
    line: ClassedDelayLine<InFlight>,
    /// Packets delivered per line.
    class_packets_out: Vec<u64>,
    out: Outputs<IpPacket>,
    sent: Vec<Sent<IpPacket>>,
    next_id: u64,
    stats: DirectionStats,
    /// Random loss before the queue: the threshold on a uniform draw, and the stream.
    loss: Option<(u64, SplitMix64)>,
    /// HULL's pacer in front of the queue (the data direction with `--pacer`).
    pacer: Option<SenderPacer>,
}

impl Direction {
    fn new(name: &'static str, dir: Dir, config: DirectionConfig, classes: &[ClassDelay], start: Nanos) -> Result<Direction> {
        let mut qdisc = config.qdisc.build(config.limit, &config.shape)?;
        let link = Link::new(&config.shape, start);
        link.announce_rate(start, qdisc.as_mut());
        let delays = std::iter::once(config.delay).chain(classes.iter().map(|c| c.delay(dir, config.delay)));
        Ok(Direction {
            name,
            dir,
            line: ClassedDelayLine::new(delays),
            class_packets_out: vec![0; classes.len() + 1],
            classes: classes.to_vec(),
            config,
            qdisc,
            link,
            out: Outputs::new(),
            sent: Vec::new(),
            next_id: 0,
            stats: DirectionStats::default(),
            loss: None,
            pacer: None,
        })
    }

    fn arrive(&mut self, data: Vec<u8>, now: Nanos) {
        self.stats.counts.packets_in += 1;
        self.stats.counts.bytes_in += data.len() as u64;
        if let Some((threshold, rng)) = &mut self.loss {
            if rng.next_u64() < *threshold {
                self.stats.counts.dropped_random += 1;
                return;
            }
        }
        let p = IpPacket::new(data, self.next_id, now);
        self.next_id += 1;
        let p = match &mut self.pacer {
            Some(pacer) => {
                pacer.advance(now);
                let passed = pacer.arrive(now, p);
                self.enqueue_released(now);
                passed
            }
            None => Some(p),
        };
        if let Some(p) = p {
            self.qdisc.enqueue(now, p, &mut self.out);
        }
    }

    /// Moves what the pacer has released into the queue.
    fn enqueue_released(&mut self, now: Nanos) {
        let Some(pacer) = &mut self.pacer else { return };
        for mut p in pacer.released.drain(..) {
            // The packet reaches the queue now: its time in the pacer is the sending host's.
            p.arrival = now;
            self.qdisc.enqueue(now, p, &mut self.out);
        }
    }

    /// Runs the pacer's ticks due by `now`, its releases joining the queue.
    fn advance_pacer(&mut self, now: Nanos) {
        if let Some(pacer) = &mut self.pacer {
            pacer.advance(now);
            self.enqueue_released(now);
        }
    }

    /// Runs the link up to `now`, moving what it sent into the delay line.
    fn serve(&mut self, now: Nanos) {
        self.stats.opportunities += self.link.serve(now, self.qdisc.as_mut(), &mut self.out, &mut self.sent);
        for s in self.sent.drain(..) {
            let item = InFlight {
                enqueued_at: s.departure.enqueued_at,
                packet: s.departure.packet,
                dequeued_at: s.dequeued_at,
                finished_at: s.finished_at,
            };
            let class = classes::classify(&self.classes, self.dir, &item.packet.data).map_or(0, |c| c + 1);
            self.line.push(s.finished_at, class, item);
        }
    }

    fn next_wake(&self) -> Option<Nanos> {
        let pacer = self.pacer.as_ref().and_then(SenderPacer::next_event);
        [self.link.next_wake(self.qdisc.as_ref()), self.line.next_release(), pacer].into_iter().flatten().min()
    }
}

/// A router bound to a topology's TUN devices.
pub struct Router {
    dirs: [Direction; 2],
    /// Index 0: the sender's device (down reads it, up writes it); 1: the receiver's.
    tuns: [Tun; 2],
    cnm_line: DelayLine<Vec<u8>>,
    router_addr: std::net::Ipv4Addr,
    feedback_port: u16,
    timer: Timer,
    epoll: OwnedFd,
    log: Option<CsvLog>,
    start: Nanos,
    duration: Option<Nanos>,
    realtime: bool,
    read_buf: Vec<u8>,
    pool: Vec<Vec<u8>>,
    cnm_unsendable: u64,
}

fn epoll_add(epoll: RawFd, fd: RawFd, token: u64) -> Result<()> {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
    // SAFETY: valid epoll and target descriptors, valid event struct.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
        return Err(Error::last_os("epoll_ctl"));
    }
    Ok(())
}

impl Router {
    /// Prepares a router on `topology`'s devices. Time starts now (trace position 0).
    pub fn new(topology: &Topology, config: RouterConfig) -> Result<Router> {
        let start = clock::now();
        let log = match &config.log_csv {
            Some(p) => Some(CsvLog::create(p, start)?),
            None => None,
        };
        classes::validate(&config.classes)?;
        let mut dirs = [
            Direction::new("down", Dir::Down, config.down, &config.classes, start)?,
            Direction::new("up", Dir::Up, config.up, &config.classes, start)?,
        ];
        dirs[0].loss = config.loss.map(|l| (l.threshold(), SplitMix64::seed_from_u64(l.seed)));
        dirs[0].pacer = config.pacer.as_ref().map(SenderPacer::new).transpose()?;
        let tuns = [topology.tun(Side::Sender)?, topology.tun(Side::Receiver)?];
        // SAFETY: plain syscall; the fd is owned immediately.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(Error::last_os("epoll_create1"));
        }
        // SAFETY: ep is a fresh descriptor.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        let timer = Timer::new()?;
        epoll_add(ep, tuns[0].as_raw_fd(), TOKEN_SENDER_TUN)?;
        epoll_add(ep, tuns[1].as_raw_fd(), TOKEN_RECEIVER_TUN)?;
        epoll_add(ep, timer.as_raw_fd(), TOKEN_TIMER)?;
        Ok(Router {
            dirs,
            tuns,
            cnm_line: DelayLine::new(config.feedback.delay),
            router_addr: topology.config().router_addr,
            feedback_port: config.feedback.port,
            timer,
            epoll,
            log,
            start,
            duration: config.duration,
            realtime: config.realtime,
            read_buf: vec![0; MAX_PACKET_BYTES],
            pool: Vec::new(),
            cnm_unsendable: 0,
        })
    }

    /// When the router's clock started (trace position 0), monotonic ns.
    pub fn start_time(&self) -> Nanos {
        self.start
    }

    /// Forwards packets until `stop` becomes readable (or the configured duration passes), then
    /// returns the summary.
    pub fn run(&mut self, stop: RawFd) -> Result<Summary> {
        epoll_add(self.epoll.as_raw_fd(), stop, TOKEN_STOP)?;
        if self.realtime {
            let param = libc::sched_param { sched_priority: REALTIME_PRIORITY };
            // SAFETY: valid param; 0 = the calling thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                eprintln!("ccp-router: --realtime: {} (continuing without)", std::io::Error::last_os_error());
            }
        }
        let deadline = self.duration.map(|d| self.start + d);
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        self.timer.arm(deadline)?;
        loop {
            // SAFETY: valid epoll fd and event buffer.
            let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, -1) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io("epoll_wait", e));
            }
            let mut readable = [false; 2];
            let mut stop_now = false;
            for ev in &events[..n as usize] {
                match ev.u64 {
                    TOKEN_SENDER_TUN => readable[0] = true,
                    TOKEN_RECEIVER_TUN => readable[1] = true,
                    TOKEN_TIMER => self.timer.acknowledge(),
                    _ => stop_now = true,
                }
            }
            let now = clock::now();
            if stop_now || deadline.is_some_and(|d| now >= d) {
                break;
            }
            for d in &mut self.dirs {
                d.advance_pacer(now);
                d.serve(now);
            }
            for (i, r) in readable.into_iter().enumerate() {
                if r {
                    self.read_from(i)?;
                }
            }
            let now = clock::now();
            for d in &mut self.dirs {
                d.serve(now);
            }
            self.settle_outputs()?;
            self.release(now)?;
            let next =
                self.dirs.iter().filter_map(Direction::next_wake).chain(self.cnm_line.next_release()).chain(deadline).min();
            self.timer.arm(next.map(|t| t.max(now + MIN_WAKE_GAP_NS)))?;
        }
        self.finish()
    }

    /// Reads up to a batch of packets from device `i` into the direction that starts there.
    fn read_from(&mut self, i: usize) -> Result<()> {
        for _ in 0..READ_BATCH {
            let n = match self.tuns[i].read(&mut self.read_buf) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => return Err(Error::io(format!("reading {}", self.tuns[i].name()), e)),
            };
            let mut data = self.pool.pop().unwrap_or_default();
            data.clear();
            data.extend_from_slice(&self.read_buf[..n]);
            self.dirs[i].arrive(data, clock::now());
        }
        Ok(())
    }

    /// Accounts drops and turns QCN notifications into datagrams for the sender.
    fn settle_outputs(&mut self) -> Result<()> {
        for di in 0..2 {
            let d = &mut self.dirs[di];
            for drop in d.out.drops.drain(..) {
                let outcome = match drop.reason {
                    DropReason::BufferFull => {
                        d.stats.counts.dropped_buffer += 1;
                        Outcome::DroppedBuffer
                    }
                    DropReason::Aqm => {
                        d.stats.counts.dropped_aqm += 1;
                        Outcome::DroppedAqm
                    }
                };
                let p = drop.packet;
                if let Some(log) = &mut self.log {
                    log.write(&Row {
                        dir: d.name,
                        id: p.id,
                        len: p.data.len(),
                        arrival: p.arrival,
                        dequeue: None,
                        finish: None,
                        release: None,
                        written: None,
                        ecn_in: p.ecn_in,
                        ecn_out: crate::packet::ecn_of(&p.data),
                        outcome,
                    })?;
                }
                self.pool.push(p.data);
            }
            for n in d.out.notifications.drain(..) {
                d.stats.counts.qcn_notifications += 1;
                // The CNM goes to the sampled packet's source, which for the down direction is
                // on the sender's side.
                let Some(dst) = n.key.ipv4_source() else {
                    self.cnm_unsendable += 1;
                    continue;
                };
                let cnm = n.to_cnm(DOWN_CPID + di as u32, n.key.as_slice());
                let dgram = cnm_datagram(self.router_addr, dst, self.feedback_port, &cnm);
                self.cnm_line.push(n.sampled_at, dgram);
            }
        }
        Ok(())
    }

    /// Writes every packet whose release time has come to the far device.
    fn release(&mut self, now: Nanos) -> Result<()> {
        for di in 0..2 {
            let far = &self.tuns[1 - di];
            let [down, up] = &mut self.dirs;
            let (d, other) = if di == 0 { (down, up) } else { (up, down) };
            while let Some((release, class, f)) = d.line.pop_due(now) {
                let written = clock::now();
                let ecn_out = crate::packet::ecn_of(&f.packet.data);
                let outcome = match far.write(&f.packet.data) {
                    Ok(()) => {
                        // An ACK reaching the sender is where its pacer sees ECN-Echo.
                        if let Some(pacer) = other.pacer.as_mut() {
                            pacer.on_ack(written, &f.packet.data);
                        }
                        d.stats.counts.packets_out += 1;
                        d.class_packets_out[class] += 1;
                        d.stats.counts.bytes_out += f.packet.data.len() as u64;
                        d.stats.queue_delay_us.record(f.dequeued_at.saturating_sub(f.enqueued_at) / 1000);
                        d.stats.delay_error_us.record(written.saturating_sub(release) / 1000);
                        if ecn_out == Ecn::Ce && f.packet.ecn_in != Ecn::Ce {
                            d.stats.counts.marked_ce += 1;
                        }
                        Outcome::Delivered
                    }
                    Err(_) => {
                        d.stats.counts.dropped_write += 1;
                        Outcome::DroppedWrite
                    }
                };
                if let Some(log) = &mut self.log {
                    log.write(&Row {
                        dir: d.name,
                        id: f.packet.id,
                        len: f.packet.data.len(),
                        arrival: f.packet.arrival,
                        dequeue: Some(f.dequeued_at),
                        finish: Some(f.finished_at),
                        release: Some(release),
                        written: Some(written),
                        ecn_in: f.packet.ecn_in,
                        ecn_out,
                        outcome,
                    })?;
                }
                self.pool.push(f.packet.data);
            }
        }
        while let Some((_, dgram)) = self.cnm_line.pop_due(now) {
            if self.tuns[0].write(&dgram).is_err() {
                self.cnm_unsendable += 1;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Summary> {
        if let Some(log) = &mut self.log {
            log.flush()?;
        }
        if self.cnm_unsendable > 0 {
            eprintln!("ccp-router: {} QCN notifications could not be sent (non-IPv4 source or write error)", self.cnm_unsendable);
        }
        let elapsed = clock::now().saturating_sub(self.start);
        let summarise = |d: &Direction| {
            let info = DirectionInfo {
                link: d.config.describe_link(),
                qdisc: d.qdisc.name().to_string(),
                delay: d.config.delay,
                capacity_bytes: d.config.shape.capacity_bytes(elapsed),
            };
            d.stats.summarise(info, elapsed)
        };
        let [down, up] = &self.dirs;
        let ms = |ns: Nanos| ns as f64 / 1e6;
        let classes = down
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| ClassSummary {
                class: c.to_string(),
                delay_down_ms: ms(c.delay(Dir::Down, down.config.delay)),
                delay_up_ms: ms(c.delay(Dir::Up, up.config.delay)),
                packets_down: down.class_packets_out[i + 1],
                packets_up: up.class_packets_out[i + 1],
            })
            .collect();
        Ok(Summary {
            duration_s: elapsed as f64 / 1e9,
            down: summarise(down),
            up: summarise(up),
            classes,
            pacer: down.pacer.as_ref().map(SenderPacer::summary),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RandomLoss;

    /// Arrivals at a direction with `loss`; which of them were dropped at random.
    fn dropped(loss: RandomLoss, n: u64) -> Vec<u64> {
        let mut d = Direction::new("down", Dir::Down, DirectionConfig::unlimited(0), &[], 0).expect("direction");
        d.loss = Some((loss.threshold(), SplitMix64::seed_from_u64(loss.seed)));
        let mut out = Vec::new();
        for i in 0..n {
            let before = d.stats.counts.dropped_random;
            d.arrive(vec![0x45; 60], i);
            if d.stats.counts.dropped_random > before {
                out.push(i);
            }
        }
        assert_eq!(d.stats.counts.packets_in, n, "every arrival is counted, dropped or not");
        out
    }

    #[test]
    fn random_loss_drops_the_asked_fraction_and_a_seed_repeats_it() {
        let one_pct = dropped(RandomLoss { probability: 0.01, seed: 7 }, 200_000);
        let frac = one_pct.len() as f64 / 200_000.0;
        // Binomial(200k, 1 %): σ ≈ 0.022 %; ±0.1 % is over 4σ.
        assert!((frac - 0.01).abs() < 0.001, "dropped {frac}");
        assert_eq!(one_pct, dropped(RandomLoss { probability: 0.01, seed: 7 }, 200_000), "same seed, same drops");
        assert_ne!(one_pct, dropped(RandomLoss { probability: 0.01, seed: 8 }, 200_000), "another seed, other drops");
        assert!(dropped(RandomLoss { probability: 0.0, seed: 7 }, 10_000).is_empty());
    }
}
