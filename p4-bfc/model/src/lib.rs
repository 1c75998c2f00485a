//! `ccp-bfc-model`: the executable behavioural model of the BFC switch pipeline written in
//! `p4-bfc/bfc_tna.p4` and `p4-bfc/bfc_v1model.p4` (specs/bfc.md §5, §6, §9, §10, §12.1; thesis
//! Chapter 3, §3.3.3 and §3.4).
//!
//! It is a pure state machine: no I/O and no clock. The caller passes the time (ns) into every
//! call, and gets back the control frames (pause, resume, bitmap) to send. The registers, tables,
//! header fields and constants carry the same names and sizes as the P4 declarations, and
//! [`manifest`] lists them so a test (`tests/p4_consistency.rs`) can check the three files against
//! each other. Nothing compiles the P4 on this machine, so this model is what gets tested.
//!
//! One instance models one switch pipeline with up to [`NUM_PORTS`] ports, which are *local*
//! indices (`port_index` maps device ports to them). Pipeline split into halves:
//! - [`Bfc::ingress`] is the enqueue side: dynamic queue assignment (§5), the pause threshold
//!   (§6.4) and the pause counters (§6.2). It returns the per-packet metadata ([`BfcMeta`]) that
//!   the P4 bridges (v1model) or mirrors and recirculates (TNA, §9) to the dequeue side.
//! - [`Bfc::egress`] is the dequeue side: flow-table and counter decrements, resume on 1→0, and
//!   the upstreamQ rewrite (§6.2, ambiguity 11 in §16).
//! - [`Bfc::on_control`] and [`Bfc::bitmap_frames`] are the upstream and downstream ends of the
//!   control channel (§6.3): pause/resume are a level per queue, so frames apply idempotently.
//!
//! Choices where the spec leaves room (each is the §16 recommendation unless noted):
//! - pause condition on every packet, comparing the queue's bytes *before* this packet with Th
//!   (§6.2 "evaluated when the packet arrives"); N_active counts non-empty unpaused data queues
//!   after this packet, at least 1 (§16.3);
//! - an empty queue for reassignment must also be unpaused (§16.6); the scan starts at a random
//!   queue (artifact, §5) and the fallback is uniform (§16.7), both from a seeded SplitMix64;
//! - timestamps are 32-bit ns with the low bit forced to 1, so 0 means "entry never used" without
//!   a valid bit (registers start at 0 on both targets); 32-bit ns wrap every 4.29 s, and the
//!   idle test uses wrapping subtraction, which is exact for gaps below that;
//! - upstreamQ is a 16-bit field, but the pause counters keep [`UPSTREAM_Q_SLOTS`] slots per
//!   ingress, indexed by upstreamQ mod slots: a switch upstream has 32 queues, and NIC queue ids
//!   above the slot count alias (pause/resume frames carry the slot, so aliasing can only leave
//!   a queue unpaused, never stuck paused);
//! - sampling (App. E) and multi-class partitioning (§8) are not modelled.
//!
//! One configuration goes beyond the P4: the thesis's stress tests run BFC with 128 queues per
//! port (specs/bfc.md §4 "Q", targets 8, 9 and 11: "BFC 128"), which Tofino2 offers on a 400 G
//! port. [`Bfc::new`] with more than [`QUEUES_PER_PORT`] data queues widens every per-queue
//! register and table to that many queues per port (up to [`MAX_QUEUES_PER_PORT`]), with the
//! flow table at 100 × the queues, as the thesis sizes it. The queue bitmaps (`nonempty_q`,
//! `paused_q`) are therefore 128-bit words in the model, where the P4 declares 32-bit registers;
//! at the P4's layout their upper 96 bits are always zero and every index, size and random draw
//! is the P4's.

pub mod manifest;

// Constants: every one is a `const` in both .p4 files, with the same value and width.
pub const NUM_PORTS: u32 = 32;
pub const QUEUES_PER_PORT: u32 = 32;
pub const CONTROL_QID: u32 = 31;
pub const DATA_QUEUES_PER_PORT: u32 = 31;
pub const QUEUE_COUNT: u32 = NUM_PORTS * QUEUES_PER_PORT;
pub const FLOW_TABLE_PER_PORT: u32 = 100 * QUEUES_PER_PORT;
pub const FLOW_TABLE_SIZE: u32 = NUM_PORTS * FLOW_TABLE_PER_PORT;
pub const UPSTREAM_Q_SLOTS: u32 = 128;
pub const PAUSE_COUNTER_SIZE: u32 = NUM_PORTS * UPSTREAM_Q_SLOTS;
pub const BITMAP_WORD_BITS: u32 = 32;
pub const BITMAP_WORDS_PER_PORT: u32 = UPSTREAM_Q_SLOTS / BITMAP_WORD_BITS;
pub const PAUSE_BITMAP_SIZE: u32 = NUM_PORTS * BITMAP_WORDS_PER_PORT;
pub const TH_TABLE_SIZE: u32 = NUM_PORTS * QUEUES_PER_PORT;
pub const ALLOW_BP_TABLE_SIZE: u32 = NUM_PORTS * NUM_PORTS;
pub const HRTT_NS: u32 = 2000;
pub const STICKY_NS: u32 = 2 * HRTT_NS;
pub const BITMAP_PERIOD_NS: u32 = 1000;
pub const BFC_ETHERTYPE: u16 = 0x88B5;
pub const BFC_CTRL_ETHERTYPE: u16 = 0x88B6;
pub const CTRL_PAUSE: u8 = 1;
pub const CTRL_RESUME: u8 = 2;
pub const CTRL_BITMAP: u8 = 3;
/// TNA only: a bitmap frame being re-applied one queue per recirculation pass, because Tofino's
/// advanced flow control (AFC) pauses or resumes one queue per packet. The model applies a frame
/// in one step, so it never produces this op.
pub const CTRL_BITMAP_RECIRC: u8 = 4;

/// Most queues per port the model holds: the thesis's "BFC 128" (not a P4 constant; the pause
/// counters' [`UPSTREAM_Q_SLOTS`] already give an upstream switch with this many queues one
/// counter per queue).
pub const MAX_QUEUES_PER_PORT: u32 = 128;
/// Flow-table entries per queue (specs/bfc.md §4: 100 × the number of queues).
const FLOW_ENTRIES_PER_QUEUE: u32 = FLOW_TABLE_PER_PORT / QUEUES_PER_PORT;

/// Header `bfc_h`, carried by every data packet between the Ethernet header and IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BfcHeader {
    /// The queue the packet left at the previous hop (switch queue or NIC queue).
    pub upstream_q: u16,
    /// EtherType of what follows (IPv4), since `bfc_h` takes the Ethernet type's place.
    pub ether_type: u16,
}

/// Header `bfc_ctrl_h`: a pause, resume or bitmap frame to the upstream neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtrlHeader {
    /// [`CTRL_PAUSE`], [`CTRL_RESUME`] or [`CTRL_BITMAP`].
    pub op: u8,
    /// Bitmap frames: which word of the sender's `pause_bitmap` row this is.
    pub word_index: u8,
    /// Pause/resume frames: the upstream queue (slot) concerned.
    pub upstream_q: u16,
    /// Bitmap frames: bit i = queue `word_index * 32 + i` must be paused.
    pub bitmap: u32,
}

/// A control frame to send out of local port `port` (to the upstream device on that port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    pub port: u8,
    pub hdr: CtrlHeader,
}

/// What ingress needs to know about an arriving data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressPacket {
    pub ingress_port: u8,
    pub egress_port: u8,
    /// Hash of the 5-tuple (the P4 computes CRC32 over it).
    pub flow_hash: u32,
    pub bfc: BfcHeader,
    pub len_bytes: u32,
}

/// One flow-table entry: the elements of registers `flow_q`, `flow_size` and `flow_ts` at one index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowEntry {
    /// `flow_ts`: last enqueue/dequeue time, ns, low bit forced to 1 (0 = never used).
    pub ts: u32,
    /// `flow_size`: packets in the switch from flows mapping to the entry.
    pub size: u16,
    /// `flow_q`: the entry's queue assignment.
    pub q: u8,
}

/// Per-packet metadata carried from enqueue to dequeue (`bfc_meta_t` in the P4; §12.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BfcMeta {
    pub flow_idx: u32,
    pub qid: u8,
    pub upstream_q_in: u16,
    pub counter_incr: bool,
    pub ingress_port: u8,
    pub egress_port: u8,
    pub len_bytes: u32,
}

/// One switch pipeline's BFC state. Register fields are public so tests and adapters can inspect
/// them; they must only be changed through the methods, which keep them consistent.
#[derive(Debug, Clone)]
pub struct Bfc {
    /// Registers `flow_q`, `flow_size` and `flow_ts`, one element each per flow-table entry. The
    /// P4 declares three register arrays, always read and written at the same index; kept side by
    /// side here, an entry is one cache line's read instead of three.
    pub flow_table: Vec<FlowEntry>,
    /// Register `pause_counter`, indexed by (ingress port, upstreamQ slot).
    pub pause_counter: Vec<u16>,
    /// Register `pause_bitmap`: bit set iff the matching pause counter is non-zero; what the
    /// periodic bitmap frames carry.
    pub pause_bitmap: Vec<u32>,
    /// Register `queue_depth`: bytes per (port, queue).
    pub queue_depth: Vec<u32>,
    /// Register `nonempty_q`: per port, bit q set while queue q holds data. Kept as "non-empty"
    /// rather than "empty" so the all-zero reset state is correct.
    pub nonempty_q: Vec<u128>,
    /// Register `paused_q`: per port, bit q set while the downstream has queue q paused.
    pub paused_q: Vec<u128>,
    /// Table `th_table`: (egress port, N_active − 1) → Th bytes; `None` = no entry (no pauses).
    pub th_table: Vec<Option<u32>>,
    /// Table `allow_bp_table`: (ingress, egress) → backpressure allowed. Missing entries allow,
    /// so only the edges removed to break cycles (§10) need installing.
    pub allow_bp_table: Vec<bool>,
    /// Table `port_index`: device port → local index.
    pub port_index: Vec<(u32, u8)>,
    data_queues: u32,
    /// The register layout's queues per port: the P4's [`QUEUES_PER_PORT`], or more for BFC 128.
    queues_per_port: u32,
    /// Flow-table entries per egress port: 100 × `queues_per_port`.
    flow_table_per_port: u32,
    sticky_ns: u32,
    rng: u64,
    /// Frames sent, for tests and statistics.
    pub pauses_sent: u64,
    pub resumes_sent: u64,
}

/// Th = HRTT·μ/N_active, scaled by `multiplier_permille`/1000 (§6.4; 1000 = thesis, 1500 =
/// artifact). This is the control-plane computation that fills `th_table`, so no division happens
/// per packet.
pub fn th_bytes(hrtt_ns: u64, rate_bps: u64, n_active: u32, multiplier_permille: u32) -> u32 {
    let n = u128::from(n_active.max(1));
    let v = u128::from(hrtt_ns) * u128::from(rate_bps) * u128::from(multiplier_permille) / (8 * 1_000_000_000 * 1000 * n);
    v.min(u128::from(u32::MAX)) as u32
}

/// The low 32 bits of a ns clock, as stored in `flow_ts`.
fn stamp(now_ns: u64) -> u32 {
    (now_ns as u32) | 1
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Bfc {
    /// A pipeline with `data_queues` assignable queues per port and the given sticky time. Up to
    /// [`QUEUES_PER_PORT`] it has the P4's registers and tables (the hardware reserves
    /// [`CONTROL_QID`], so it uses [`DATA_QUEUES_PER_PORT`]); beyond, up to
    /// [`MAX_QUEUES_PER_PORT`], every per-queue register and table holds `data_queues` queues per
    /// port. `th_table` starts empty: install rows with [`Bfc::install_th_row`].
    pub fn new(data_queues: u32, sticky_ns: u32, seed: u64) -> Bfc {
        assert!((1..=MAX_QUEUES_PER_PORT).contains(&data_queues), "data_queues must be 1..={MAX_QUEUES_PER_PORT}");
        let queues_per_port = data_queues.max(QUEUES_PER_PORT);
        let flow_table_per_port = FLOW_ENTRIES_PER_QUEUE * queues_per_port;
        let flow_table = (NUM_PORTS * flow_table_per_port) as usize;
        let per_queue = (NUM_PORTS * queues_per_port) as usize;
        Bfc {
            flow_table: vec![FlowEntry::default(); flow_table],
            pause_counter: vec![0; PAUSE_COUNTER_SIZE as usize],
            pause_bitmap: vec![0; PAUSE_BITMAP_SIZE as usize],
            queue_depth: vec![0; per_queue],
            nonempty_q: vec![0; NUM_PORTS as usize],
            paused_q: vec![0; NUM_PORTS as usize],
            th_table: vec![None; per_queue],
            allow_bp_table: vec![true; ALLOW_BP_TABLE_SIZE as usize],
            port_index: Vec::new(),
            data_queues,
            queues_per_port,
            flow_table_per_port,
            sticky_ns,
            rng: seed,
            pauses_sent: 0,
            resumes_sent: 0,
        }
    }

    /// The hardware defaults: [`DATA_QUEUES_PER_PORT`] queues and [`STICKY_NS`].
    pub fn with_defaults(seed: u64) -> Bfc {
        Bfc::new(DATA_QUEUES_PER_PORT, STICKY_NS, seed)
    }

    pub fn data_queues(&self) -> u32 {
        self.data_queues
    }

    /// Queues per port in the register layout: [`QUEUES_PER_PORT`], or more for BFC 128.
    pub fn queues_per_port(&self) -> u32 {
        self.queues_per_port
    }

    fn data_mask(&self) -> u128 {
        u128::MAX >> (128 - self.data_queues)
    }

    /// Adds a `port_index` entry; returns the local index, or `None` when the table is full.
    pub fn add_port(&mut self, device_port: u32) -> Option<u8> {
        if let Some(&(_, l)) = self.port_index.iter().find(|(d, _)| *d == device_port) {
            return Some(l);
        }
        if self.port_index.len() >= NUM_PORTS as usize {
            return None;
        }
        let l = self.port_index.len() as u8;
        self.port_index.push((device_port, l));
        Some(l)
    }

    /// `port_index` lookup.
    pub fn local_port(&self, device_port: u32) -> Option<u8> {
        self.port_index.iter().find(|(d, _)| *d == device_port).map(|&(_, l)| l)
    }

    /// Fills the `th_table` row of `egress` for N_active = 1..=queues per port. `hrtt_ns` is the
    /// maximum 1-hop RTT over the ingresses that feed this egress (§6.4).
    pub fn install_th_row(&mut self, egress: u8, hrtt_ns: u64, rate_bps: u64, multiplier_permille: u32) {
        for n in 1..=self.queues_per_port {
            let i = self.th_index(egress, n);
            self.th_table[i] = Some(th_bytes(hrtt_ns, rate_bps, n, multiplier_permille));
        }
    }

    fn th_index(&self, egress: u8, n_active: u32) -> usize {
        (u32::from(egress) * self.queues_per_port + (n_active.clamp(1, self.queues_per_port) - 1)) as usize
    }

    /// `th_table` lookup; N_active 0 counts as 1.
    pub fn th_lookup(&self, egress: u8, n_active: u32) -> Option<u32> {
        self.th_table[self.th_index(egress, n_active)]
    }

    /// Installs an `allow_bp_table` entry (§10: `false` on the edges removed from the
    /// backpressure graph).
    pub fn set_backpressure_allowed(&mut self, ingress: u8, egress: u8, allowed: bool) {
        self.allow_bp_table[(u32::from(ingress) * NUM_PORTS + u32::from(egress)) as usize] = allowed;
    }

    pub fn backpressure_allowed(&self, ingress: u8, egress: u8) -> bool {
        self.allow_bp_table[(u32::from(ingress) * NUM_PORTS + u32::from(egress)) as usize]
    }

    /// The flow-table index of (egress port, hash): each egress owns a contiguous slice, since
    /// flows through different egresses never share a queue (§5).
    /// The in-slice offset is a multiply-shift of the hash's low 16 bits (Lemire's range
    /// reduction) rather than a modulo, because Tofino has no modulo by 3200; the P4 does the
    /// same, so both map a hash to the same entry.
    pub fn flow_index(&self, egress: u8, flow_hash: u32) -> u32 {
        u32::from(egress) * self.flow_table_per_port + (((flow_hash & 0xFFFF) * self.flow_table_per_port) >> 16)
    }

    fn pause_index(ingress: u8, upstream_q: u16) -> usize {
        (u32::from(ingress) * UPSTREAM_Q_SLOTS + u32::from(upstream_q) % UPSTREAM_Q_SLOTS) as usize
    }

    /// N_active of `egress`: data queues holding data and not paused, at least 1.
    pub fn n_active(&self, egress: u8) -> u32 {
        let e = usize::from(egress);
        (self.nonempty_q[e] & !self.paused_q[e] & self.data_mask()).count_ones().max(1)
    }

    /// A queue for a flow that may be reassigned: the first empty, unpaused data queue scanning
    /// from a random start, else a uniformly random data queue (§5, §16.6–7). The P4 does the scan
    /// as a rotate plus the `first_free_queue` priority-encoder table.
    fn pick_queue(&mut self, egress: u8) -> u8 {
        let e = usize::from(egress);
        let cand = !self.nonempty_q[e] & !self.paused_q[e] & self.data_mask();
        let r = splitmix64(&mut self.rng);
        let start = (r % u64::from(self.data_queues)) as u32;
        if cand != 0 {
            // Candidates are below `data_queues`, so the rotation's width does not change which
            // one is first from `start`: the P4's 32-bit rotate picks the same queue.
            let rotated = cand.rotate_right(start);
            ((rotated.trailing_zeros() + start) % u128::BITS) as u8
        } else {
            ((r >> 32) % u64::from(self.data_queues)) as u8
        }
    }

    /// The enqueue side (§5 then §6.2). Call once per admitted packet; the returned metadata must
    /// come back to [`Bfc::egress`] exactly once.
    pub fn ingress(&mut self, now_ns: u64, pkt: &IngressPacket, controls: &mut Vec<Control>) -> BfcMeta {
        let idx = self.flow_index(pkt.egress_port, pkt.flow_hash) as usize;
        let now = stamp(now_ns);
        let entry = self.flow_table[idx];
        // Sticky rule: only an entry with nothing in the switch and idle for more than the sticky
        // time may move; a backlogged flow keeps its FIFO, which is what keeps packets in order.
        let qid = if entry.size == 0 && (entry.ts == 0 || now.wrapping_sub(entry.ts) > self.sticky_ns) {
            self.pick_queue(pkt.egress_port)
        } else {
            entry.q
        };
        self.flow_table[idx] = FlowEntry { ts: now, size: entry.size.saturating_add(1), q: qid };

        let e = usize::from(pkt.egress_port);
        let qi = e * self.queues_per_port as usize + usize::from(qid);
        let depth_before = self.queue_depth[qi];
        self.queue_depth[qi] = depth_before.saturating_add(pkt.len_bytes);
        self.nonempty_q[e] |= 1 << qid;

        let mut meta = BfcMeta {
            flow_idx: idx as u32,
            qid,
            upstream_q_in: pkt.bfc.upstream_q,
            counter_incr: false,
            ingress_port: pkt.ingress_port,
            egress_port: pkt.egress_port,
            len_bytes: pkt.len_bytes,
        };
        if !self.backpressure_allowed(pkt.ingress_port, pkt.egress_port) {
            return meta;
        }
        let th = self.th_lookup(pkt.egress_port, self.n_active(pkt.egress_port));
        if th.is_some_and(|th| depth_before > th) {
            meta.counter_incr = true;
            let pi = Self::pause_index(pkt.ingress_port, pkt.bfc.upstream_q);
            self.pause_counter[pi] = self.pause_counter[pi].saturating_add(1);
            if self.pause_counter[pi] == 1 {
                self.set_bitmap_bit(pi, true);
                self.pauses_sent += 1;
                controls.push(Self::pause_frame(pkt.ingress_port, pi, CTRL_PAUSE));
            }
        }
        meta
    }

    /// The dequeue side: undoes what [`Bfc::ingress`] counted, resumes on 1→0, and returns the
    /// header the packet leaves with (upstreamQ rewritten to this hop's queue).
    pub fn egress(&mut self, now_ns: u64, meta: &BfcMeta, hdr: BfcHeader, controls: &mut Vec<Control>) -> BfcHeader {
        let idx = meta.flow_idx as usize;
        let entry = &mut self.flow_table[idx];
        entry.size = entry.size.saturating_sub(1);
        entry.ts = stamp(now_ns);

        let e = usize::from(meta.egress_port);
        let qi = e * self.queues_per_port as usize + usize::from(meta.qid);
        self.queue_depth[qi] = self.queue_depth[qi].saturating_sub(meta.len_bytes);
        if self.queue_depth[qi] == 0 {
            self.nonempty_q[e] &= !(1 << meta.qid);
        }

        // The key is the upstreamQ saved at enqueue, not the header (rewritten below), so the
        // decrement always hits the counter the increment hit.
        if meta.counter_incr {
            let pi = Self::pause_index(meta.ingress_port, meta.upstream_q_in);
            self.pause_counter[pi] = self.pause_counter[pi].saturating_sub(1);
            if self.pause_counter[pi] == 0 {
                self.set_bitmap_bit(pi, false);
                self.resumes_sent += 1;
                controls.push(Self::pause_frame(meta.ingress_port, pi, CTRL_RESUME));
            }
        }
        BfcHeader { upstream_q: u16::from(meta.qid), ..hdr }
    }

    fn pause_frame(port: u8, pause_index: usize, op: u8) -> Control {
        let slot = (pause_index as u32 % UPSTREAM_Q_SLOTS) as u16;
        Control { port, hdr: CtrlHeader { op, word_index: 0, upstream_q: slot, bitmap: 0 } }
    }

    fn set_bitmap_bit(&mut self, pause_index: usize, on: bool) {
        let (w, b) = (pause_index / BITMAP_WORD_BITS as usize, pause_index % BITMAP_WORD_BITS as usize);
        if on {
            self.pause_bitmap[w] |= 1 << b;
        } else {
            self.pause_bitmap[w] &= !(1 << b);
        }
    }

    /// The periodic refresh for the upstream device on `port` (§6.3): every word of its
    /// `pause_bitmap` row. Sent every [`BITMAP_PERIOD_NS`]; the caller owns the timer.
    pub fn bitmap_frames(&self, port: u8) -> Vec<Control> {
        (0..BITMAP_WORDS_PER_PORT)
            .map(|w| {
                let bitmap = self.pause_bitmap[(u32::from(port) * BITMAP_WORDS_PER_PORT + w) as usize];
                Control { port, hdr: CtrlHeader { op: CTRL_BITMAP, word_index: w as u8, upstream_q: 0, bitmap } }
            })
            .collect()
    }

    /// A control frame from the downstream device on local `port`: sets the paused level of the
    /// queues it names. Applying the same frame again changes nothing (§6.3). Bitmap words past
    /// this switch's queues name queues it does not have (they exist for NICs) and are ignored.
    pub fn on_control(&mut self, port: u8, hdr: &CtrlHeader) {
        let p = usize::from(port);
        match hdr.op {
            CTRL_PAUSE | CTRL_RESUME if u32::from(hdr.upstream_q) < self.queues_per_port => {
                let bit = 1u128 << hdr.upstream_q;
                if hdr.op == CTRL_PAUSE {
                    self.paused_q[p] |= bit;
                } else {
                    self.paused_q[p] &= !bit;
                }
            }
            CTRL_BITMAP if u32::from(hdr.word_index) * BITMAP_WORD_BITS < self.queues_per_port => {
                let shift = u32::from(hdr.word_index) * BITMAP_WORD_BITS;
                let word = u128::from(u32::MAX) << shift;
                self.paused_q[p] = (self.paused_q[p] & !word) | (u128::from(hdr.bitmap) << shift);
            }
            _ => {}
        }
    }

    /// Sets which queues of `port` the downstream has paused, all at once: a simulator that
    /// applies pause frames to its own queues hands the model their state this way, as Tofino2's
    /// AFC state is to the P4. Bits at or above the queues per port are ignored.
    pub fn set_paused_queues(&mut self, port: u8, paused: u128) {
        self.paused_q[usize::from(port)] = paused & (u128::MAX >> (128 - self.queues_per_port));
    }

    /// Whether the downstream has queue `q` of `port` paused.
    pub fn is_paused(&self, port: u8, q: u8) -> bool {
        self.paused_q[usize::from(port)] & (1 << q) != 0
    }

    /// The pause counter of (ingress, upstreamQ).
    pub fn pause_count(&self, ingress: u8, upstream_q: u16) -> u16 {
        self.pause_counter[Self::pause_index(ingress, upstream_q)]
    }

    /// Bytes queued in (port, queue).
    pub fn depth(&self, port: u8, q: u8) -> u32 {
        self.queue_depth[(u32::from(port) * self.queues_per_port + u32::from(q)) as usize]
    }
}
