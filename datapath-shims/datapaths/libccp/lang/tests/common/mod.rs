//! Shared by the integration tests: a seeded generator of well-typed programs and of primitive
//! sequences. Programs are built from a seed (not proptest strategies) because typing and
//! scoping make combinator-based generation unwieldy; proptest supplies and reports the seeds.

use ccp_lang::interp::Primitives;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::SplitMix64;

/// splitmix64: tiny, seedable, good enough for test-case generation.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    Num,
    Bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Report,
    Control,
    Local,
    /// `Cwnd` / `Rate`
    Implicit,
    /// Read-only: primitives and `Micros`.
    ReadOnly,
}

#[derive(Clone, Debug)]
struct Var {
    name: String,
    ty: Ty,
    class: Class,
}

/// A generated program.
pub struct Generated {
    pub source: String,
}

/// Feature set of the generated programs.
#[derive(Clone, Copy)]
pub struct Features {
    /// Only what portus 0.9 compiles to a program our interpreter accepts: no sugar, no
    /// comments before `(def`, no bare boolean conditions, no `==` on booleans, no
    /// `if`/`ewma` into locals or implicit registers (portus panics), at most 8 operators per
    /// statement (portus numbers one tmp per operator).
    pub portus: bool,
}

pub fn program(rng: &mut Rng, features: Features) -> Generated {
    let mut g = Gen { rng, features, vars: builtins() };
    g.program()
}

fn builtins() -> Vec<Var> {
    let mut vars = Vec::new();
    for p in ccp_wire::Primitive::ALL {
        let ty = if p.is_bool() { Ty::Bool } else { Ty::Num };
        vars.push(Var { name: p.name().to_string(), ty, class: Class::ReadOnly });
    }
    vars.push(Var { name: "Micros".into(), ty: Ty::Num, class: Class::ReadOnly });
    vars.push(Var { name: "Cwnd".into(), ty: Ty::Num, class: Class::Implicit });
    vars.push(Var { name: "Rate".into(), ty: Ty::Num, class: Class::Implicit });
    vars
}

struct Gen<'a> {
    rng: &'a mut Rng,
    features: Features,
    vars: Vec<Var>,
}

impl Gen<'_> {
    fn program(&mut self) -> Generated {
        let mut src = String::new();
        if !self.features.portus && self.rng.chance(30) {
            src.push_str("# generated program\n");
        }
        src.push_str("(def (Report");
        for i in 0..1 + self.rng.below(4) {
            let ty = if self.rng.chance(25) { Ty::Bool } else { Ty::Num };
            let volatile = if self.rng.chance(60) { "volatile " } else { "" };
            let default = self.default(ty);
            src.push_str(&format!(" ({volatile}r{i} {default})"));
            self.vars.push(Var { name: format!("Report.r{i}"), ty, class: Class::Report });
        }
        src.push(')');
        for i in 0..self.rng.below(3) {
            let ty = if self.rng.chance(30) { Ty::Bool } else { Ty::Num };
            let volatile = if self.rng.chance(30) { "volatile " } else { "" };
            let default = self.default(ty);
            src.push_str(&format!(" ({volatile}c{i} {default})"));
            self.vars.push(Var { name: format!("c{i}"), ty, class: Class::Control });
        }
        src.push_str(")\n");
        let num_locals = self.rng.below(3);
        for w in 0..1 + self.rng.below(4) {
            let cond = self.condition();
            src.push_str(&format!("(when {cond}\n"));
            if w == 0 {
                for l in 0..num_locals {
                    let ty = if l == 1 { Ty::Bool } else { Ty::Num };
                    let value = self.expr(ty, 2);
                    src.push_str(&format!("  (:= l{l} {value})\n"));
                    self.vars.push(Var { name: format!("l{l}"), ty, class: Class::Local });
                }
            }
            for _ in 0..1 + self.rng.below(4) {
                let stmt = self.statement();
                src.push_str(&format!("  {stmt}\n"));
            }
            src.push_str(")\n");
        }
        Generated { source: src }
    }

    fn default(&mut self, ty: Ty) -> String {
        match ty {
            Ty::Bool => self.rng.pick(&["true", "false"]).to_string(),
            Ty::Num if self.rng.chance(20) => "+infinity".into(),
            Ty::Num => self.literal(),
        }
    }

    fn literal(&mut self) -> String {
        match self.rng.below(20) {
            0 => (self.rng.below(1 << 31)).to_string(),
            1 => "+infinity".into(),
            _ => self.rng.below(20).to_string(),
        }
    }

    fn var(&mut self, ty: Ty, writable: bool) -> Option<String> {
        let candidates: Vec<&Var> =
            self.vars.iter().filter(|v| v.ty == ty && !(writable && v.class == Class::ReadOnly)).collect();
        if candidates.is_empty() {
            return None;
        }
        Some(self.rng.pick(&candidates).name.clone())
    }

    /// A `when` condition. portus needs a compound expression or a literal here.
    fn condition(&mut self) -> String {
        if self.rng.chance(25) {
            return "true".into();
        }
        if self.features.portus {
            match self.rng.below(3) {
                0 => self.comparison(1),
                _ => {
                    let op = *self.rng.pick(&["&&", "||"]);
                    let (l, r) = (self.bool_operand(), self.bool_operand());
                    format!("({op} {l} {r})")
                }
            }
        } else {
            self.expr(Ty::Bool, 3)
        }
    }

    /// An operand of `&&`/`||` in portus mode: a comparison (≤ 3 operators) or a boolean leaf.
    fn bool_operand(&mut self) -> String {
        if self.rng.chance(50) {
            self.comparison(1)
        } else {
            self.leaf(Ty::Bool)
        }
    }

    fn comparison(&mut self, depth: u32) -> String {
        let ops: &[&str] = if self.features.portus { &[">", "<", "=="] } else { &[">", "<", "==", ">=", "<=", "!="] };
        let op = *self.rng.pick(ops);
        let (l, r) = (self.expr(Ty::Num, depth), self.expr(Ty::Num, depth));
        format!("({op} {l} {r})")
    }

    fn leaf(&mut self, ty: Ty) -> String {
        if self.rng.chance(60) {
            if let Some(v) = self.var(ty, false) {
                return v;
            }
        }
        match ty {
            Ty::Num => self.literal(),
            Ty::Bool => self.rng.pick(&["true", "false"]).to_string(),
        }
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> String {
        if depth == 0 || self.rng.chance(35) {
            return self.leaf(ty);
        }
        match ty {
            Ty::Num => {
                // Weighted towards operators that cannot abort, so most invocations get as far
                // as a report.
                let op = *self.rng.pick(&["+", "-", "*", "/", "max", "min", "wrapped_max", "add", "sub", "max", "min", "+"]);
                let l = self.expr(Ty::Num, depth - 1);
                let mut r = self.expr(Ty::Num, depth - 1);
                if op == "/" && r == "0" {
                    r = "3".into();
                }
                format!("({op} {l} {r})")
            }
            Ty::Bool if self.features.portus => {
                // Depth-limited so a statement stays within 8 operators.
                if self.rng.chance(50) {
                    self.comparison(depth.min(2) - 1)
                } else {
                    let op = *self.rng.pick(&["&&", "||"]);
                    let (l, r) = (self.leaf(Ty::Bool), self.leaf(Ty::Bool));
                    format!("({op} {l} {r})")
                }
            }
            Ty::Bool => match self.rng.below(4) {
                0 => self.comparison(depth - 1),
                1 => {
                    let inner = self.expr(Ty::Bool, depth - 1);
                    let op = *self.rng.pick(&["not", "!"]);
                    format!("({op} {inner})")
                }
                2 => {
                    let op = *self.rng.pick(&["==", "!="]);
                    let (l, r) = (self.expr(Ty::Bool, depth - 1), self.expr(Ty::Bool, depth - 1));
                    format!("({op} {l} {r})")
                }
                _ => {
                    let op = *self.rng.pick(&["&&", "||", "and", "or"]);
                    let (l, r) = (self.expr(Ty::Bool, depth - 1), self.expr(Ty::Bool, depth - 1));
                    format!("({op} {l} {r})")
                }
            },
        }
    }

    fn statement(&mut self) -> String {
        match self.rng.below(10) {
            0 => return "(report)".into(),
            1 => return "(fallthrough)".into(),
            2 => return "(:= Micros 0)".into(),
            _ => {}
        }
        let ty = if self.rng.chance(25) { Ty::Bool } else { Ty::Num };
        let Some(target) = self.var(ty, true) else { return "(report)".into() };
        let class = self.vars.iter().find(|v| v.name == target).map(|v| v.class);
        let special_ok = !self.features.portus || matches!(class, Some(Class::Report | Class::Control));
        let op = if self.features.portus { ":=" } else { *self.rng.pick(&[":=", "bind"]) };
        match self.rng.below(5) {
            0 if special_ok && ty == Ty::Num => {
                let w = self.rng.below(11);
                let sample = self.expr(Ty::Num, 2);
                format!("({op} {target} (ewma {w} {sample}))")
            }
            1 if special_ok => {
                let word = *self.rng.pick(&["if", "!if"]);
                let cond = if self.features.portus {
                    if self.rng.chance(50) {
                        self.comparison(1)
                    } else {
                        self.leaf(Ty::Bool)
                    }
                } else {
                    self.expr(Ty::Bool, 2)
                };
                let value = self.expr(ty, if self.features.portus && ty == Ty::Bool { 1 } else { 2 });
                format!("({op} {target} ({word} {cond} {value}))")
            }
            _ => {
                let value = self.expr(ty, 3);
                format!("({op} {target} {value})")
            }
        }
    }
}

/// Primitives mixing small values, zeros and huge ones, so comparisons go both ways and
/// overflow, underflow and division by zero all happen.
pub fn primitives(rng: &mut Rng) -> Primitives {
    let small = |rng: &mut Rng| -> u32 {
        match rng.below(8) {
            0 => 0,
            1 => rng.next() as u32,
            2 => u32::MAX - rng.below(3) as u32,
            _ => rng.below(3000) as u32,
        }
    };
    let wide = |rng: &mut Rng| -> u64 {
        match rng.below(8) {
            0 => 0,
            1 => rng.next(),
            2 => u64::MAX - rng.below(3),
            _ => rng.below(100_000),
        }
    };
    Primitives {
        bytes_acked: small(rng),
        packets_acked: small(rng),
        bytes_misordered: small(rng),
        packets_misordered: small(rng),
        ecn_bytes: small(rng),
        ecn_packets: small(rng),
        lost_pkts_sample: if rng.chance(80) { 0 } else { small(rng) },
        was_timeout: rng.chance(10),
        rtt_sample_us: wide(rng),
        rate_outgoing: wide(rng),
        rate_incoming: wide(rng),
        bytes_in_flight: small(rng),
        packets_in_flight: small(rng),
        snd_cwnd: small(rng),
        snd_rate: wide(rng),
        bytes_pending: small(rng),
    }
}
