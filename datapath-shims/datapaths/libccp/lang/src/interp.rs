//! A reference model of libccp 1.2's program machine (`machine.c`, `ccp_invoke` in `ccp.c`), so
//! folds can be unit-tested without the C library.
//!
//! It mirrors libccp step by step, quirks included:
//! - each invocation preloads `Cwnd`/`Rate` from the datapath's current values, applies a
//!   pending program start (volatile then non-volatile DEFs, timer restart), then staged
//!   UPDATE_FIELDS (a staged `Cwnd`/`Rate` is handed to the datapath at once if non-zero);
//! - the state machine clears `__eventFlag`, `__shouldContinue` and `__shouldReport`, sets
//!   `Micros`, and runs the clauses in order; it stops after the first true clause unless
//!   `__shouldContinue` is set (and, as in libccp, it is never cleared between clauses);
//! - ADD overflow, MUL overflow (libccp's own check, which misses some overflows), SUB
//!   underflow and DIV by zero abort the invocation: no cwnd/rate is applied, no report is
//!   sent, but registers written so far keep their values;
//! - afterwards `Cwnd > 0` and `Rate != 0` are handed to the datapath (as u32, like the C
//!   callbacks), and if `__shouldReport` is set, report registers `[0, n)` are sent and
//!   volatile registers reset to their DEFs (n = the number of report DEFs);
//! - a DEF of 0x3FFFFFFF reads as +infinity (0xFFFFFFFF); `+infinity` immediates are
//!   0xFFFFFFFF, not u64::MAX; `Flow.rtt_sample_us` of 0 reads as 0xFFFFFFFF;
//! - time: `Ack.now` is µs since the datapath started (`now_us` here), and `Micros` is µs since
//!   the program started or `Micros` was written. libccp computes the origin as
//!   `now() − value` with `now()` in nanoseconds, so writing a non-zero value v makes `Micros`
//!   read `elapsed + v/1000` afterwards; the model keeps nanoseconds internally to match.
//!
//! Where libccp would read or write outside its register arrays, loop forever, or read
//! instructions it was never sent, [`Flow::new`] refuses the program instead of guessing.
//! Not modelled: the CREATE handshake and the fallback timer (a flow here has already been
//! announced, and the agent is always reachable).

use ccp_wire::{implicit, limits, Event, Install, Instr, Op, Primitive, Reg, RegKind, UpdateField};

/// One invocation's measurements, as in libccp's `struct ccp_primitives` (same field types).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Primitives {
    pub bytes_acked: u32,
    pub packets_acked: u32,
    pub bytes_misordered: u32,
    pub packets_misordered: u32,
    pub ecn_bytes: u32,
    pub ecn_packets: u32,
    pub lost_pkts_sample: u32,
    pub was_timeout: bool,
    pub rtt_sample_us: u64,
    pub rate_outgoing: u64,
    pub rate_incoming: u64,
    pub bytes_in_flight: u32,
    pub packets_in_flight: u32,
    /// The datapath's current congestion window, preloaded into `Cwnd`.
    pub snd_cwnd: u32,
    /// The datapath's current pacing rate, preloaded into `Rate`.
    pub snd_rate: u64,
    pub bytes_pending: u32,
}

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvokeOutcome {
    /// The report sent (report registers `[0, n)`), if any.
    pub report: Option<Vec<u64>>,
    /// The last value handed to the datapath's `set_cwnd` (a u32 in libccp's callback).
    pub cwnd: Option<u64>,
    /// The last value handed to `set_rate_abs` (a u32 in libccp's callback).
    pub rate: Option<u64>,
    /// The runtime error that aborted the invocation, if any.
    pub error: Option<RuntimeError>,
}

/// The arithmetic errors that make libccp abort an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("instruction {instr}: {left} + {right} overflows")]
    AddOverflow { instr: usize, left: u64, right: u64 },
    #[error("instruction {instr}: {left} * {right} overflows")]
    MulOverflow { instr: usize, left: u64, right: u64 },
    #[error("instruction {instr}: {left} - {right} underflows")]
    SubUnderflow { instr: usize, left: u64, right: u64 },
    #[error("instruction {instr}: {left} / 0")]
    DivByZero { instr: usize, left: u64 },
}

/// A program the model refuses, because libccp would reject it or misbehave undefinedly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    #[error("{0} instructions: libccp loops forever once an index reaches 256")]
    TooManyInstructions(usize),
    #[error("{0} events: libccp has room for 256")]
    TooManyEvents(usize),
    #[error("event {0} covers instructions the program does not have")]
    EventOutOfRange(usize),
    #[error("{0} report DEFs: libccp would report memory past its 110 report registers")]
    TooManyReportDefs(usize),
    #[error("instruction {0} writes an immediate or a primitive (libccp rejects the program)")]
    ResultNotWritable(usize),
    #[error("instruction {instr} uses {reg:?}, outside libccp's register file")]
    RegisterOutOfRange { instr: usize, reg: Reg },
}

/// An UPDATE_FIELDS entry libccp would refuse, or would apply outside its control registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UpdateRejected {
    #[error("register class {0:?} cannot be updated (libccp: LIBCCP_UPDATE_INVALID_REG_TYPE)")]
    InvalidRegType(RegKind),
    #[error("control register {0} does not exist (libccp would write past its array)")]
    ControlOutOfRange(u32),
}

const NUM_REPORT: usize = limits::MAX_REPORT_REGS;
const NUM_CONTROL: usize = limits::MAX_CONTROL_REGS;
const NUM_IMPLICIT: usize = limits::MAX_IMPLICIT_REGS;
const NUM_TMP: usize = limits::MAX_TMP_REGS;
const NUM_LOCAL: usize = limits::MAX_LOCAL_REGS;
/// libccp's "+infinity" DEF marker and the value it stores instead.
const DEF_INFINITY_SENTINEL: u64 = 0x3FFF_FFFF;
const U32_INFINITY: u64 = u32::MAX as u64;

/// libccp's `struct register_file`.
#[derive(Debug, Clone)]
struct Registers {
    report: [u64; NUM_REPORT],
    control: [u64; NUM_CONTROL],
    implicit: [u64; NUM_IMPLICIT],
    tmp: [u64; NUM_TMP],
    local: [u64; NUM_LOCAL],
}

/// libccp's `struct staged_update`.
#[derive(Debug, Clone)]
struct Staged {
    control: [Option<u64>; NUM_CONTROL],
    cwnd: Option<u64>,
    rate: Option<u64>,
}

impl Default for Staged {
    fn default() -> Self {
        Staged { control: [None; NUM_CONTROL], cwnd: None, rate: None }
    }
}

/// One flow running one installed program, as libccp's per-connection state.
#[derive(Debug, Clone)]
pub struct Flow {
    events: Vec<Event>,
    instrs: Vec<Instr>,
    regs: Registers,
    pending: Staged,
    /// The program was just (re)selected: libccp resets registers and time at the next invoke.
    start_pending: bool,
    /// `DatapathProgram.num_to_return`, computed by `reset_state`.
    num_to_return: usize,
    /// `implicit_time_zero`, in nanoseconds like libccp's `now()`.
    time_zero_ns: u64,
}

impl Flow {
    /// A new flow with `program` selected, as after INSTALL and CHANGE_PROG: registers start at
    /// zero and the program's DEFs and timer are applied at the first invocation. Stage
    /// CHANGE_PROG's initial values with [`Flow::update_fields`] before invoking.
    pub fn new(program: &Install) -> Result<Flow, InstallError> {
        validate(program)?;
        Ok(Flow {
            events: program.events.clone(),
            instrs: program.instrs.clone(),
            regs: Registers {
                report: [0; NUM_REPORT],
                control: [0; NUM_CONTROL],
                implicit: [0; NUM_IMPLICIT],
                tmp: [0; NUM_TMP],
                local: [0; NUM_LOCAL],
            },
            pending: Staged::default(),
            start_pending: true,
            num_to_return: 0,
            time_zero_ns: 0,
        })
    }

    /// Stages an UPDATE_FIELDS message, applied at the next invocation (libccp `stage_update`:
    /// entries before a refused one stay staged; implicit registers other than `Cwnd`/`Rate`
    /// are accepted and ignored).
    pub fn update_fields(&mut self, fields: &[UpdateField]) -> Result<(), UpdateRejected> {
        for field in fields {
            match field.kind {
                RegKind::NonVolatileControl | RegKind::VolatileControl => {
                    let slot = usize::try_from(field.index)
                        .ok()
                        .and_then(|i| self.pending.control.get_mut(i))
                        .ok_or(UpdateRejected::ControlOutOfRange(field.index))?;
                    *slot = Some(field.value);
                }
                RegKind::Implicit => match field.index {
                    implicit::CWND => self.pending.cwnd = Some(field.value),
                    implicit::RATE => self.pending.rate = Some(field.value),
                    _ => {}
                },
                kind => return Err(UpdateRejected::InvalidRegType(kind)),
            }
        }
        Ok(())
    }

    /// One `ccp_invoke` at datapath time `now_us` (µs since the datapath started).
    pub fn invoke(&mut self, prims: &Primitives, now_us: u64) -> InvokeOutcome {
        let now_ns = now_us.saturating_mul(1000);
        let mut out = InvokeOutcome::default();
        self.regs.implicit[implicit::CWND as usize] = u64::from(prims.snd_cwnd);
        self.regs.implicit[implicit::RATE as usize] = prims.snd_rate;

        if self.start_pending {
            self.start_pending = false;
            self.reset_state(now_ns);
            self.init_register_state(now_ns);
            self.time_zero_ns = now_ns;
            self.regs.implicit[implicit::MICROS as usize] = 0;
        }
        let pending = std::mem::take(&mut self.pending);
        for (reg, staged) in self.regs.control.iter_mut().zip(pending.control) {
            if let Some(v) = staged {
                *reg = v;
            }
        }
        if let Some(cwnd) = pending.cwnd {
            self.regs.implicit[implicit::CWND as usize] = cwnd;
            if cwnd != 0 {
                out.cwnd = Some(as_u32_arg(cwnd));
            }
        }
        if let Some(rate) = pending.rate {
            self.regs.implicit[implicit::RATE as usize] = rate;
            if rate != 0 {
                out.rate = Some(as_u32_arg(rate));
            }
        }

        if let Err(e) = self.state_machine(prims, now_ns) {
            out.error = Some(e);
            return out;
        }
        let cwnd = self.regs.implicit[implicit::CWND as usize];
        if cwnd > 0 {
            out.cwnd = Some(as_u32_arg(cwnd));
        }
        let rate = self.regs.implicit[implicit::RATE as usize];
        if rate != 0 {
            out.rate = Some(as_u32_arg(rate));
        }
        if self.regs.implicit[implicit::SHOULD_REPORT as usize] != 0 {
            // `validate` keeps num_to_return within the report registers.
            let sent = self.regs.report.get(..self.num_to_return).unwrap_or(&self.regs.report);
            out.report = Some(sent.to_vec());
            self.reset_state(now_ns);
        }
        out
    }

    fn state_machine(&mut self, prims: &Primitives, now_ns: u64) -> Result<(), RuntimeError> {
        for i in [implicit::EXPR_FLAG, implicit::SHOULD_FALLTHROUGH, implicit::SHOULD_REPORT] {
            self.regs.implicit[i as usize] = 0;
        }
        self.regs.implicit[implicit::MICROS as usize] = now_ns.wrapping_sub(self.time_zero_ns) / 1000;
        for e in 0..self.events.len() {
            let event = self.events[e];
            self.run(event.flag_idx, event.num_flag_instrs, prims, now_ns)?;
            if self.regs.implicit[implicit::EXPR_FLAG as usize] != 0 {
                self.run(event.body_idx, event.num_body_instrs, prims, now_ns)?;
            }
            if self.regs.implicit[implicit::EXPR_FLAG as usize] != 0
                && self.regs.implicit[implicit::SHOULD_FALLTHROUGH as usize] == 0
            {
                break;
            }
        }
        Ok(())
    }

    /// Runs `count` instructions from `start` (validated to lie within the program).
    fn run(&mut self, start: u32, count: u32, prims: &Primitives, now_ns: u64) -> Result<(), RuntimeError> {
        for i in start as usize..(start as usize + count as usize) {
            self.step(i, prims, now_ns)?;
        }
        Ok(())
    }

    /// libccp `process_instruction`.
    fn step(&mut self, i: usize, prims: &Primitives, now_ns: u64) -> Result<(), RuntimeError> {
        let Some(&instr) = self.instrs.get(i) else { return Ok(()) };
        let a = self.read(instr.left, prims, now_ns);
        let b = self.read(instr.right, prims, now_ns);
        let result = match instr.op {
            Op::Add => {
                let r = a.wrapping_add(b);
                if r < a {
                    return Err(RuntimeError::AddOverflow { instr: i, left: a, right: b });
                }
                r
            }
            Op::Sub => {
                let r = a.wrapping_sub(b);
                if r > a {
                    return Err(RuntimeError::SubUnderflow { instr: i, left: a, right: b });
                }
                r
            }
            Op::Mul => {
                let r = a.wrapping_mul(b);
                // libccp's check, which misses overflows whose wrapped product is still >= a.
                if r < a && b > 0 {
                    return Err(RuntimeError::MulOverflow { instr: i, left: a, right: b });
                }
                r
            }
            Op::Div => {
                if b == 0 {
                    return Err(RuntimeError::DivByZero { instr: i, left: a });
                }
                a / b
            }
            Op::Equiv => u64::from(a == b),
            Op::Gt => u64::from(a > b),
            Op::Lt => u64::from(a < b),
            Op::Max => a.max(b),
            Op::Min => a.min(b),
            Op::MaxWrap => max_wrap(a, b),
            Op::Ewma => {
                let current = self.read(instr.res, prims, now_ns);
                ewma(a, current, b)
            }
            Op::Bind => b,
            Op::If if a != 0 => b,
            Op::NotIf if a == 0 => b,
            // IF/NOTIF whose condition does not hold, and DEF (no case in process_instruction).
            Op::If | Op::NotIf | Op::Def => return Ok(()),
        };
        self.write(instr.res, result, now_ns);
        Ok(())
    }

    /// libccp `read_reg` (indices were validated by [`Flow::new`]).
    fn read(&self, reg: Reg, prims: &Primitives, now_ns: u64) -> u64 {
        let i = reg.index as usize;
        let from = |regs: &[u64]| regs.get(i).copied().unwrap_or(0);
        match reg.kind {
            RegKind::Immediate => u64::from(reg.index),
            RegKind::NonVolatileReport | RegKind::VolatileReport => from(&self.regs.report),
            RegKind::NonVolatileControl | RegKind::VolatileControl => from(&self.regs.control),
            RegKind::Tmp => from(&self.regs.tmp),
            RegKind::Local => from(&self.regs.local),
            RegKind::Implicit => from(&self.regs.implicit),
            RegKind::Primitive => match Primitive::ALL.get(i) {
                Some(p) => primitive(*p, prims, now_ns),
                None => 0,
            },
        }
    }

    /// libccp `write_reg`: writes outside the arrays, to primitives, and to immediates are
    /// dropped; writing `Micros` moves the timer origin.
    fn write(&mut self, reg: Reg, value: u64, now_ns: u64) {
        let i = reg.index as usize;
        let slot = match reg.kind {
            RegKind::NonVolatileReport | RegKind::VolatileReport => self.regs.report.get_mut(i),
            RegKind::NonVolatileControl | RegKind::VolatileControl => self.regs.control.get_mut(i),
            RegKind::Tmp => self.regs.tmp.get_mut(i),
            RegKind::Local => self.regs.local.get_mut(i),
            RegKind::Implicit => {
                if reg.index == implicit::MICROS {
                    self.time_zero_ns = now_ns.wrapping_sub(value);
                }
                self.regs.implicit.get_mut(i)
            }
            RegKind::Immediate | RegKind::Primitive => None,
        };
        if let Some(slot) = slot {
            *slot = value;
        }
    }

    /// libccp `reset_state`: volatile report and control registers back to their DEFs, and
    /// `num_to_return` recounted (it is only stored once a non-DEF instruction is reached).
    fn reset_state(&mut self, now_ns: u64) {
        let mut count = 0;
        for i in 0..self.instrs.len() {
            let instr = self.instrs[i];
            if instr.op != Op::Def {
                self.num_to_return = count;
                return;
            }
            match instr.left.kind {
                RegKind::NonVolatileReport => count += 1,
                RegKind::VolatileReport => {
                    count += 1;
                    self.write(instr.left, def_value(instr.right), now_ns);
                }
                RegKind::VolatileControl => self.write(instr.left, def_value(instr.right), now_ns),
                _ => {}
            }
        }
    }

    /// libccp `init_register_state`: non-volatile control and report registers to their DEFs.
    fn init_register_state(&mut self, now_ns: u64) {
        for i in 0..self.instrs.len() {
            let instr = self.instrs[i];
            if instr.op != Op::Def {
                return;
            }
            if matches!(instr.left.kind, RegKind::NonVolatileControl | RegKind::NonVolatileReport) {
                self.write(instr.left, def_value(instr.right), now_ns);
            }
        }
    }
}

/// The value a DEF sets: libccp reads `right.value`, which only immediates fill in (other
/// register classes leave it as the zeroed memory of the program table).
fn def_value(right: Reg) -> u64 {
    let v = if right.kind == RegKind::Immediate { u64::from(right.index) } else { 0 };
    if v == DEF_INFINITY_SENTINEL {
        U32_INFINITY
    } else {
        v
    }
}

/// libccp's `set_cwnd`/`set_rate_abs` take a u32; C truncates the u64 register.
fn as_u32_arg(v: u64) -> u64 {
    v & U32_INFINITY
}

fn primitive(p: Primitive, prims: &Primitives, now_ns: u64) -> u64 {
    match p {
        Primitive::AckBytesAcked => u64::from(prims.bytes_acked),
        Primitive::AckBytesMisordered => u64::from(prims.bytes_misordered),
        Primitive::AckEcnBytes => u64::from(prims.ecn_bytes),
        Primitive::AckEcnPackets => u64::from(prims.ecn_packets),
        Primitive::AckLostPktsSample => u64::from(prims.lost_pkts_sample),
        Primitive::AckNow => now_ns / 1000,
        Primitive::AckPacketsAcked => u64::from(prims.packets_acked),
        Primitive::AckPacketsMisordered => u64::from(prims.packets_misordered),
        Primitive::FlowBytesInFlight => u64::from(prims.bytes_in_flight),
        Primitive::FlowBytesPending => u64::from(prims.bytes_pending),
        Primitive::FlowPacketsInFlight => u64::from(prims.packets_in_flight),
        Primitive::FlowRateIncoming => prims.rate_incoming,
        Primitive::FlowRateOutgoing => prims.rate_outgoing,
        Primitive::FlowRttSampleUs if prims.rtt_sample_us == 0 => U32_INFINITY,
        Primitive::FlowRttSampleUs => prims.rtt_sample_us,
        Primitive::FlowWasTimeout => u64::from(prims.was_timeout),
    }
}

/// libccp `myewma64(weight, old, new)`, with C's wrapping arithmetic.
fn ewma(weight: u64, old: u64, new: u64) -> u64 {
    if old == 0 {
        return new;
    }
    let kept = weight.wrapping_mul(old);
    let added = 10u64.wrapping_sub(weight).wrapping_mul(new);
    kept.wrapping_add(added) / 10
}

/// libccp `mymax64_wrap`: the later of two u32 sequence numbers, treating 0 as "unset".
fn max_wrap(a: u64, b: u64) -> u64 {
    let (a32, b32) = (a as u32, b as u32);
    // Distance walking upwards from `from` to `to`, through u32::MAX when `to` is behind.
    let dist = |from: u32, to: u32| if to > from { to - from } else { (u32::MAX - from).wrapping_add(to) };
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    if dist(b32, a32) < dist(a32, b32) {
        u64::from(a32)
    } else {
        u64::from(b32)
    }
}

/// Refuses what libccp would reject, or run with undefined behaviour.
fn validate(program: &Install) -> Result<(), InstallError> {
    let n = program.instrs.len();
    if n > limits::MAX_INSTRUCTIONS {
        return Err(InstallError::TooManyInstructions(n));
    }
    if program.events.len() > limits::MAX_EVENTS {
        return Err(InstallError::TooManyEvents(program.events.len()));
    }
    for (e, event) in program.events.iter().enumerate() {
        let fits = |start: u32, count: u32| (start as usize).checked_add(count as usize).is_some_and(|end| end <= n);
        if !fits(event.flag_idx, event.num_flag_instrs) || !fits(event.body_idx, event.num_body_instrs) {
            return Err(InstallError::EventOutOfRange(e));
        }
    }
    let report_defs = program
        .instrs
        .iter()
        .take_while(|i| i.op == Op::Def)
        .filter(|i| matches!(i.left.kind, RegKind::VolatileReport | RegKind::NonVolatileReport))
        .count();
    if report_defs > NUM_REPORT {
        return Err(InstallError::TooManyReportDefs(report_defs));
    }
    for (i, instr) in program.instrs.iter().enumerate() {
        if matches!(instr.res.kind, RegKind::Immediate | RegKind::Primitive) {
            return Err(InstallError::ResultNotWritable(i));
        }
        for reg in [instr.res, instr.left, instr.right] {
            let bound = match reg.kind {
                RegKind::Immediate => continue,
                RegKind::NonVolatileReport | RegKind::VolatileReport => NUM_REPORT,
                RegKind::NonVolatileControl | RegKind::VolatileControl => NUM_CONTROL,
                RegKind::Implicit => NUM_IMPLICIT,
                RegKind::Tmp => NUM_TMP,
                RegKind::Local => NUM_LOCAL,
                RegKind::Primitive => Primitive::ALL.len(),
            };
            if reg.index as usize >= bound {
                return Err(InstallError::RegisterOutOfRange { instr: i, reg });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str) -> (crate::Program, Flow) {
        let program = crate::compile(src).unwrap_or_else(|e| panic!("{e}"));
        let flow = Flow::new(&program.install(7)).unwrap();
        (program, flow)
    }

    fn acked(bytes: u32) -> Primitives {
        Primitives { bytes_acked: bytes, snd_cwnd: 14_480, ..Primitives::default() }
    }

    #[test]
    fn fold_sums_bytes_and_reports_every_interval() {
        let (program, mut f) = flow(
            "(def (Report (volatile acked 0) (volatile now 0)) (interval_us 10000))
             (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (:= Report.now Ack.now) (fallthrough))
             (when (> Micros interval_us) (report) (:= Micros 0))",
        );
        let acked_idx = program.report_index("acked").unwrap();
        let mut reports = Vec::new();
        // One ACK of 1000 bytes every 1 ms, starting at t = 5 ms, for 50 ms.
        for k in 0..50u64 {
            let out = f.invoke(&acked(1000), 5_000 + k * 1_000);
            assert_eq!(out.error, None);
            assert_eq!(out.cwnd, Some(14_480), "Cwnd preloaded and handed back every invocation");
            if let Some(r) = out.report {
                reports.push((5_000 + k * 1_000, r));
            }
        }
        // Micros starts at the first invocation (t = 5 ms) and must exceed 10 ms: the first
        // report is at t = 16 ms with 12 ACKs; then every 11 ACKs.
        let times: Vec<u64> = reports.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, vec![16_000, 27_000, 38_000, 49_000]);
        let sums: Vec<u64> = reports.iter().map(|(_, r)| r[acked_idx]).collect();
        assert_eq!(sums, vec![12_000, 11_000, 11_000, 11_000]);
        assert_eq!(reports[0].1[program.report_index("now").unwrap()], 16_000);
    }

    #[test]
    fn overflow_aborts_the_whole_invocation() {
        let (_, mut f) = flow(
            "(def (Report (volatile x 0) (n 0)))
             (when true (:= Report.n (+ Report.n 1)) (:= Report.x (- Ack.bytes_acked 10)) (:= Cwnd 3000) (report))",
        );
        let out = f.invoke(&acked(5), 0);
        assert_eq!(
            out,
            InvokeOutcome {
                report: None,
                cwnd: None,
                rate: None,
                error: Some(RuntimeError::SubUnderflow { instr: 4, left: 5, right: 10 }),
            }
        );
        // Registers written before the error keep their values: n counted the aborted run too.
        let out = f.invoke(&acked(15), 1);
        assert_eq!(out.report, Some(vec![5, 2]));
        assert_eq!(out.cwnd, Some(3000));
    }

    #[test]
    fn add_mul_div_errors() {
        let (_, mut f) = flow("(def (Report (x 0))) (when true (:= Report.x (+ Rate Rate)) (report))");
        let out = f.invoke(&Primitives { snd_rate: u64::MAX, ..Primitives::default() }, 0);
        assert_eq!(out.error, Some(RuntimeError::AddOverflow { instr: 2, left: u64::MAX, right: u64::MAX }));

        let (_, mut f) = flow("(def (Report (x 0))) (when true (:= Report.x (/ 5 Ack.bytes_acked)) (report))");
        assert_eq!(f.invoke(&acked(0), 0).error, Some(RuntimeError::DivByZero { instr: 2, left: 5 }));
        assert_eq!(f.invoke(&acked(2), 1).report, Some(vec![2]));

        // libccp's MUL check (`result < left && right > 0`) misses (2^33 - 2)^2, which wraps to
        // 2^64 - 2^35 + 4, and only catches the next square.
        let (_, mut f) = flow(
            "(def (Report (x 0)))
             (when true (:= Report.x (+ +infinity +infinity)) (:= Report.x (* Report.x Report.x)) (:= Report.x (* Report.x Report.x)) (report))",
        );
        let wrapped = (1u64 << 33) - 2;
        let wrapped = wrapped.wrapping_mul(wrapped);
        assert_eq!(wrapped, 0u64.wrapping_sub(1 << 35) + 4);
        let out = f.invoke(&Primitives::default(), 0);
        assert_eq!(out.error, Some(RuntimeError::MulOverflow { instr: 4, left: wrapped, right: wrapped }));
    }

    #[test]
    fn volatile_registers_reset_after_a_report() {
        let (_, mut f) = flow(
            "(def (Report (volatile v 5) (keep 5)) (volatile vc 7) (c 7))
             (when true (:= Report.v (+ Report.v 1)) (:= Report.keep (+ Report.keep 1)) (:= vc (+ vc 1)) (:= c (+ c 1)) (fallthrough))
             (when (== c 9) (report))
             (when true (:= Report.v (+ Report.v vc)) (:= Report.keep (+ Report.keep c)))",
        );
        let out = f.invoke(&Primitives::default(), 0);
        assert_eq!(out.report, None);
        assert_eq!(f.regs.report[..2], [6 + 8, 6 + 8]);
        let out = f.invoke(&Primitives::default(), 1);
        // Second run: v = keep = 15, vc = c = 9, so clause 2 reports; clause 1's fallthrough is
        // still set, so clause 3 runs too (v = keep = 15 + 9) before the report is sent.
        assert_eq!(out.report, Some(vec![24, 24]));
        assert_eq!(f.regs.report[..2], [5, 24], "volatile report reset to its DEF, the other kept");
        assert_eq!(f.regs.control[..2], [7, 9], "volatile control reset to its DEF, the other kept");
    }

    #[test]
    fn first_true_clause_wins_unless_fallthrough() {
        let (_, mut f) = flow(
            "(def (Report (volatile a 0) (volatile b 0) (volatile c 0)))
             (when true (:= Report.a 1))
             (when true (:= Report.b 1) (report))",
        );
        let out = f.invoke(&Primitives::default(), 0);
        assert_eq!((out.report, f.regs.report[..3].to_vec()), (None, vec![1, 0, 0]));
        // libccp never clears __shouldContinue between clauses: after one fallthrough, later
        // true clauses fall through too.
        let (_, mut f) = flow(
            "(def (Report (volatile a 0) (volatile b 0)))
             (when true (fallthrough))
             (when true (:= Report.a 1))
             (when true (:= Report.b 1) (report))",
        );
        assert_eq!(f.invoke(&Primitives::default(), 0).report, Some(vec![1, 1]));
    }

    #[test]
    fn infinity_rtt_and_defs() {
        let (_, mut f) = flow(
            "(def (Report (volatile rtt_min +infinity) (volatile raw 0)))
             (when true (:= Report.rtt_min (min Report.rtt_min Flow.rtt_sample_us)) (:= Report.raw Flow.rtt_sample_us) (report))",
        );
        let out = f.invoke(&Primitives::default(), 0);
        assert_eq!(out.report, Some(vec![0xFFFF_FFFF, 0xFFFF_FFFF]));
        let out = f.invoke(&Primitives { rtt_sample_us: 250, ..Primitives::default() }, 1);
        assert_eq!(out.report, Some(vec![250, 250]));

        // A foreign program whose DEF says 0x3FFFFFFF gets +infinity, as in libccp.
        let mut install = crate::compile("(def (Report (volatile a 7))) (when true (report))").unwrap().install(1);
        install.instrs[0].right = Reg::imm(0x3FFF_FFFF);
        let mut f = Flow::new(&install).unwrap();
        assert_eq!(f.invoke(&Primitives::default(), 0).report, Some(vec![0xFFFF_FFFF]));
    }

    #[test]
    fn micros_counts_from_start_and_restart() {
        let (_, mut f) = flow(
            "(def (Report (volatile m 0)))
             (when true (:= Report.m Micros) (fallthrough))
             (when (> Micros 999) (report) (:= Micros 0))",
        );
        assert_eq!(f.invoke(&Primitives::default(), 2_000_000).report, None);
        assert_eq!(f.regs.report[0], 0);
        assert_eq!(f.invoke(&Primitives::default(), 2_000_500).report, None);
        assert_eq!(f.regs.report[0], 500);
        assert_eq!(f.invoke(&Primitives::default(), 2_001_000).report, Some(vec![1000]));
        assert_eq!(f.invoke(&Primitives::default(), 2_001_200).report, None);
        assert_eq!(f.regs.report[0], 200);
    }

    #[test]
    fn micros_write_mixes_units_like_libccp() {
        let program = crate::compile(
            "(def (Report (m 0)) (c 0))
             (when (== c 0) (:= Micros 0) (:= c 1))
             (when true (:= Report.m Micros))",
        )
        .unwrap();
        let mut install = program.install(1);
        assert_eq!(install.instrs[3].res, Reg::new(RegKind::Implicit, implicit::MICROS));
        // (:= Micros 5000), which the compiler refuses for this reason.
        install.instrs[3].right = Reg::imm(5000);
        let mut f = Flow::new(&install).unwrap();
        f.invoke(&Primitives::default(), 100);
        f.invoke(&Primitives::default(), 300);
        // 200 µs elapsed plus 5000 ns, not plus 5000 µs.
        assert_eq!(f.regs.report[0], 205);
    }

    #[test]
    fn pending_updates_apply_at_the_next_invoke() {
        let (program, mut f) = flow(
            "(def (Report (volatile seen 0)) (thresh 10) (volatile flag false))
             (when true (:= Report.seen thresh) (report))",
        );
        assert_eq!(f.invoke(&Primitives::default(), 0).report, Some(vec![10]));
        let updates = [
            program.control_update("thresh", 42).unwrap(),
            program.control_update("Cwnd", 5000).unwrap(),
            program.control_update("Rate", 125_000).unwrap(),
        ];
        f.update_fields(&updates).unwrap();
        assert_eq!(f.regs.control[0], 10, "staged, not applied");
        let out = f.invoke(&Primitives { snd_cwnd: 1000, ..Primitives::default() }, 1);
        assert_eq!(out.report, Some(vec![42]));
        assert_eq!((out.cwnd, out.rate), (Some(5000), Some(125_000)));
        // Staged updates are consumed: the next invocation sees the datapath's values again.
        let out = f.invoke(&Primitives { snd_cwnd: 1000, ..Primitives::default() }, 2);
        assert_eq!((out.cwnd, out.rate), (Some(1000), None));

        assert_eq!(
            f.update_fields(&[UpdateField { kind: RegKind::Local, index: 0, value: 1 }]),
            Err(UpdateRejected::InvalidRegType(RegKind::Local))
        );
        assert_eq!(
            f.update_fields(&[UpdateField { kind: RegKind::NonVolatileControl, index: 110, value: 1 }]),
            Err(UpdateRejected::ControlOutOfRange(110))
        );
    }

    #[test]
    fn updates_before_the_first_invoke_override_defs() {
        // CHANGE_PROG with initial values: the DEFs apply first, then the staged values.
        let (program, mut f) = flow("(def (Report (volatile x 0)) (foo 0)) (when true (:= Report.x foo) (report))");
        f.update_fields(&[program.control_update("foo", 52).unwrap()]).unwrap();
        assert_eq!(f.invoke(&Primitives::default(), 0).report, Some(vec![52]));
    }

    #[test]
    fn cwnd_and_rate_are_u32_callbacks() {
        let (_, mut f) = flow("(def (Report (x 0))) (when true (:= Cwnd (* 65536 65536)) (:= Rate (+ Rate 1)))");
        let out = f.invoke(&Primitives::default(), 0);
        // Cwnd = 2^32 > 0, so set_cwnd is called, with the truncated value 0.
        assert_eq!((out.cwnd, out.rate), (Some(0), Some(1)));
    }

    #[test]
    fn ewma_and_wrapped_max() {
        assert_eq!(ewma(2, 0, 100), 100);
        assert_eq!(ewma(2, 100, 200), (200 + 8 * 200) / 10);
        assert_eq!(ewma(8, 100, 200), (800 + 2 * 200) / 10);
        assert_eq!(max_wrap(0, 7), 7);
        assert_eq!(max_wrap(7, 0), 7);
        assert_eq!(max_wrap(5, 9), 9);
        assert_eq!(max_wrap(9, 5), 9);
        assert_eq!(max_wrap(u64::from(u32::MAX) - 2, 3), 3, "3 is after the wrap");
        assert_eq!(max_wrap(3, u64::from(u32::MAX) - 2), 3);
        assert_eq!(max_wrap(1 << 40 | 5, 3), 5, "results are u32");
    }

    #[test]
    fn refuses_programs_libccp_would_misrun() {
        let good = crate::compile("(def (Report (x 0))) (when true (report))").unwrap().install(1);
        let mut p = good.clone();
        p.instrs = vec![p.instrs[1]; 256];
        assert_eq!(Flow::new(&p).unwrap_err(), InstallError::TooManyInstructions(256));
        let mut p = good.clone();
        p.events[0].num_body_instrs = 5;
        assert_eq!(Flow::new(&p).unwrap_err(), InstallError::EventOutOfRange(0));
        let mut p = good.clone();
        p.instrs[1].res = Reg::new(RegKind::Primitive, 0);
        assert_eq!(Flow::new(&p).unwrap_err(), InstallError::ResultNotWritable(1));
        let mut p = good.clone();
        p.instrs = vec![p.instrs[0]; 111];
        p.instrs.push(good.instrs[1]);
        p.events[0] = Event { flag_idx: 111, num_flag_instrs: 1, body_idx: 112, num_body_instrs: 0 };
        assert_eq!(Flow::new(&p).unwrap_err(), InstallError::TooManyReportDefs(111));
        let mut p = good;
        p.instrs[1].left = Reg::new(RegKind::Tmp, 8);
        assert!(matches!(Flow::new(&p).unwrap_err(), InstallError::RegisterOutOfRange { instr: 1, .. }));
    }
}
