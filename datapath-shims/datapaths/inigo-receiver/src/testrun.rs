//! The receiver's programs under BPF_PROG_TEST_RUN: one loaded object (not attached, not pinned)
//! fed crafted Ethernet frames, with its maps open for inspection.
//!
//! [`TestBench::new`] loads the object with its test hooks compiled in: the arrival clock and the
//! receiving socket (RTT estimate, window, MSS, window scale) come from [`TestHooks`] instead of
//! `bpf_ktime_get_ns` and the socket lookup, so the spec's vectors can be played exactly.
//! [`TestBench::with_socket_lookup`] loads it as `enable` does (no hooks): the RTT comes from a
//! real socket of the calling thread's namespace, found from the frame's 4-tuple.

use libbpf_rs::{MapCore, MapFlags, Object, ProgramInput};

use crate::counters::Counters;
use crate::instance::{counters_from, open_object};
use crate::layout::{Conn, Key, Pod, RawSettings, TestHooks, LAYOUT, MAGIC};
use crate::settings::Settings;
use crate::{bpf_err, Error};

/// What a program returned and the frame it left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub retval: u32,
    pub frame: Vec<u8>,
}

/// `TCX_NEXT` (-1) as the test run reports it: the programs never drop or redirect.
pub const TCX_NEXT: u32 = u32::MAX;

pub struct TestBench {
    object: Object,
    generation: u64,
}

impl TestBench {
    /// The object with test hooks, `settings`, and frames with an Ethernet header.
    pub fn new(settings: &Settings) -> Result<TestBench, Error> {
        TestBench::load(settings, true)
    }

    /// The object as `enable` loads it: RTTs from real sockets (of the caller's namespace).
    pub fn with_socket_lookup(settings: &Settings) -> Result<TestBench, Error> {
        TestBench::load(settings, false)
    }

    fn load(settings: &Settings, hooks: bool) -> Result<TestBench, Error> {
        settings.validate()?;
        let object = open_object(1024, hooks, None)?.load().map_err(bpf_err("loading the receiver's programs for a test run"))?;
        let mut bench = TestBench { object, generation: 0 };
        bench.set_settings(settings)?;
        Ok(bench)
    }

    fn map(&self, suffix: &str) -> Result<libbpf_rs::Map<'_>, Error> {
        self.object
            .maps()
            .find(|m| m.name().to_string_lossy().ends_with(suffix))
            .ok_or_else(|| Error::Bpf(format!("no map {suffix}")))
    }

    /// Replaces the settings (a new generation: connection state restarts, as on `enable`).
    pub fn set_settings(&mut self, settings: &Settings) -> Result<(), Error> {
        settings.validate()?;
        self.generation += 1;
        let mut raw = RawSettings { magic: MAGIC, layout: LAYOUT, l2_len: 14, generation: self.generation, ..Default::default() };
        settings.to_raw(&mut raw);
        self.map("settings")?.update(&0u32.to_ne_bytes(), raw.as_bytes(), MapFlags::ANY).map_err(bpf_err("settings"))
    }

    /// Sets the injected clock and socket (hooks only).
    pub fn set_hooks(&self, hooks: &TestHooks) -> Result<(), Error> {
        self.map(".bss")?.update(&0u32.to_ne_bytes(), hooks.as_bytes(), MapFlags::ANY).map_err(bpf_err("test hooks"))
    }

    fn run(&self, prog: &str, frame: &[u8]) -> Result<RunResult, Error> {
        let p = self.object.progs_mut().find(|p| p.name() == prog).ok_or_else(|| Error::Bpf(format!("no program {prog}")))?;
        let mut out = vec![0u8; frame.len() + 256];
        let input = ProgramInput { data_in: Some(frame), data_out: Some(&mut out), ..Default::default() };
        let o = p.test_run(input).map_err(bpf_err(format!("test run of {prog}")))?;
        let len = o.data.map(|d| d.len()).unwrap_or(0);
        let retval = o.return_value;
        out.truncate(len);
        Ok(RunResult { retval, frame: out })
    }

    /// Runs the ingress program on an arriving frame.
    pub fn ingress(&self, frame: &[u8]) -> Result<RunResult, Error> {
        self.run("inigo_ingress", frame)
    }

    /// Runs the egress program on a departing frame.
    pub fn egress(&self, frame: &[u8]) -> Result<RunResult, Error> {
        self.run("inigo_egress", frame)
    }

    pub fn conn(&self, key: &Key) -> Result<Option<Conn>, Error> {
        let v = self.map("conns")?.lookup(key.as_bytes(), MapFlags::ANY).map_err(bpf_err("conns"))?;
        Ok(v.and_then(|v| Conn::from_bytes(&v)))
    }

    /// Overwrites a connection's state (to start a vector from a given α or window).
    pub fn put_conn(&self, key: &Key, conn: &Conn) -> Result<(), Error> {
        self.map("conns")?.update(key.as_bytes(), conn.as_bytes(), MapFlags::ANY).map_err(bpf_err("conns"))
    }

    /// The settings generation connection state must carry to count as current.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn counters(&self) -> Result<Counters, Error> {
        counters_from(&self.map("counters")?)
    }
}
