//! The agent's one clock. Time is an input to everything below the runtime: the runtime reads
//! the clock ([`Clock::now`]) as it starts a piece of work (a batch of one source, a CNM batch,
//! a tick, a control request) and hands that moment down; the flow table, the datapath adapters,
//! the CNM listener and the control and metrics servers read no clock of their own. So one
//! batch sees one time, and a test or a fuzzer can drive any of them through time it chooses.
//!
//! A moment is given on each clock the agent compares with: an `Instant` for its own intervals
//! (rate-limited logs, timeouts, peer retries), CLOCK_MONOTONIC in nanoseconds for the stamps
//! others write on that clock (the kernel's `bpf_ktime_get_ns`, a congestion point on this
//! host), and microseconds since the agent started for the controllers.

use std::ops::Add;
use std::time::{Duration, Instant};

/// One moment, on every clock the agent compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// For the agent's own intervals.
    pub instant: Instant,
    /// CLOCK_MONOTONIC, ns: for comparing with the kernel's and a same-host congestion point's
    /// timestamps.
    pub mono_ns: u64,
    /// Since the agent started, µs: the time the flow table's controllers see.
    pub agent_us: u64,
}

impl Add<Duration> for Now {
    type Output = Now;

    fn add(self, d: Duration) -> Now {
        Now {
            instant: self.instant + d,
            mono_ns: self.mono_ns.saturating_add(d.as_nanos() as u64),
            agent_us: self.agent_us.saturating_add(d.as_micros() as u64),
        }
    }
}

/// The clock, started with the agent.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    started: Instant,
    started_mono_ns: u64,
}

impl Clock {
    pub fn start() -> Clock {
        Clock { started: Instant::now(), started_mono_ns: ccp_ebpf::mono_ns() }
    }

    /// Reads the clock: only the runtime (and tools that drive a piece of the agent alone) call
    /// this.
    pub fn now(&self) -> Now {
        let instant = Instant::now();
        Now { instant, mono_ns: ccp_ebpf::mono_ns(), agent_us: instant.duration_since(self.started).as_micros() as u64 }
    }

    /// The moment `agent_us` after the start, without reading the clock (replayed time).
    pub fn at(&self, agent_us: u64) -> Now {
        Now { instant: self.started, mono_ns: self.started_mono_ns, agent_us: 0 } + Duration::from_micros(agent_us)
    }

    /// When the agent started.
    pub fn started(&self) -> Instant {
        self.started
    }
}

#[cfg(test)]
impl Now {
    /// `agent_us` after the start of one clock the tests share.
    pub fn at_us(agent_us: u64) -> Now {
        static CLOCK: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();
        CLOCK.get_or_init(Clock::start).at(agent_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_moves_on_every_clock_alike() {
        let c = Clock::start();
        let (a, b) = (c.at(1_000), c.at(3_500));
        assert_eq!(b.instant - a.instant, Duration::from_micros(2_500));
        assert_eq!(b.mono_ns - a.mono_ns, 2_500_000);
        assert_eq!((a.agent_us, b.agent_us), (1_000, 3_500));
        let read = c.now();
        assert!(read.instant >= c.started() && read.mono_ns >= c.at(0).mono_ns);
    }
}
