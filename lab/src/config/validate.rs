//! The rules an experiment must satisfy beyond its types. Each failure is the key it is about
//! (as `schemes[2].qdisc.interval_ms`) and a message; [`parse`](super::parse) turns the key into
//! a line.

use std::collections::HashSet;

use super::{CrossSpec, Experiment, FlowGroup, LinkSpec, Network, QdiscSpec, ReceiverSpec, SchemeSpec};
use crate::scheme::Cc;

/// Longest congestion control name Linux accepts (TCP_CA_NAME_MAX − 1).
pub const MAX_CC_NAME: usize = 15;

/// Names that become path components: no separators, no dot-files, nothing a shell mangles.
pub fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
}

/// The key at fault and what is wrong with it.
type Invalid = (String, String);

/// Fastest link accepted, Mbit/s (a generated trace holds one line per 1500 bytes).
const MAX_LINK_MBPS: f64 = 10_000.0;
/// ccp-router's bound on `--loss-pct`.
const MAX_LOSS_PCT: f64 = 50.0;
/// Longest half period of a square wave, ms.
const MAX_HALF_PERIOD_MS: u64 = 600_000;
/// A generated on/off trace is held in memory and written out whole: an hour at most.
const MAX_ON_OFF_LENGTH_S: u64 = 3_600;

fn finite_positive(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a positive number, got {v}")))
    }
}

fn finite_non_negative(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a number ≥ 0, got {v}")))
    }
}

/// A congestion control name as the kernel takes it.
pub fn check_cc_name(key: &str, name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > MAX_CC_NAME || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err((key.into(), format!("{name:?} is not a congestion control name (1..{MAX_CC_NAME} letters, digits, '_')")));
    }
    Ok(())
}

/// Longest run accepted, s (a week: beyond any trace here, and far from Duration overflow).
pub const MAX_DURATION_S: f64 = 7.0 * 86_400.0;

fn at_most(key: &str, v: f64, max: f64) -> Result<(), Invalid> {
    if v <= max {
        Ok(())
    } else {
        Err((key.into(), format!("must be at most {max}, got {v}")))
    }
}

pub(super) fn validate(x: &Experiment) -> Result<(), Invalid> {
    crate::parity::validate(x)?;
    finite_positive("duration_s", x.duration_s)?;
    at_most("duration_s", x.duration_s, MAX_DURATION_S)?;
    if let Some(q) = x.quick_duration_s {
        finite_positive("quick_duration_s", q)?;
        at_most("quick_duration_s", q, MAX_DURATION_S)?;
    }
    finite_non_negative("warmup_s", x.warmup_s)?;
    if x.warmup_s >= x.duration_s {
        return Err(("warmup_s".into(), format!("must be shorter than duration_s ({} s)", x.duration_s)));
    }
    if !(1..=1000).contains(&x.repetitions) {
        return Err(("repetitions".into(), format!("must be in 1..=1000, got {}", x.repetitions)));
    }
    if !(10..=10_000).contains(&x.sample_interval_ms) {
        return Err(("sample_interval_ms".into(), format!("must be in 10..=10000 ms, got {}", x.sample_interval_ms)));
    }
    validate_network(&x.network)?;
    if x.links.is_empty() {
        return Err(("links".into(), "at least one [[links]] entry is needed".into()));
    }
    for (i, l) in x.links.iter().enumerate() {
        validate_link(&format!("links[{i}]"), l)?;
        if matches!(l, LinkSpec::Fixed { rtt_ms: Some(_), .. }) && !x.network.class_delays.is_empty() {
            return Err((
                format!("links[{i}].rtt_ms"),
                "not with network.class_delays (whose default class is network.rtt_ms): give one RTT per experiment there".into(),
            ));
        }
    }
    if x.schemes.is_empty() {
        return Err(("schemes".into(), "at least one [[schemes]] entry is needed".into()));
    }
    let mut names = HashSet::new();
    for (i, s) in x.schemes.iter().enumerate() {
        let key = format!("schemes[{i}]");
        if !names.insert(s.name.as_str()) {
            return Err((format!("{key}.name"), format!("{:?} is used by another scheme", s.name)));
        }
        validate_scheme(&key, s)?;
        validate_hull(&key, s, &x.links)?;
    }
    validate_flows("flows", &x.flows)?;
    let mut names = HashSet::new();
    for (i, sc) in x.scenarios.iter().enumerate() {
        let key = format!("scenarios[{i}]");
        if !is_safe_name(&sc.name) {
            return Err((format!("{key}.name"), format!("{:?}: use letters, digits, '-', '_', '.' or '+'", sc.name)));
        }
        if !names.insert(sc.name.as_str()) {
            return Err((format!("{key}.name"), format!("{:?} is used by another scenario", sc.name)));
        }
        if let Some(f) = &sc.flows {
            validate_flows(&format!("{key}.flows"), f)?;
        }
        for (j, c) in sc.cross.iter().enumerate() {
            validate_cross(&format!("{key}.cross[{j}]"), c)?;
        }
    }
    if x.scenarios.is_empty() {
        return Err(("scenarios".into(), "give at least one scenario or leave the key out".into()));
    }
    let a = &x.agent;
    if let Some(n) = &a.cc_name {
        check_cc_name("agent.cc_name", n)?;
    }
    finite_positive("agent.ready_timeout_s", a.ready_timeout_s)?;
    at_most("agent.ready_timeout_s", a.ready_timeout_s, 3600.0)?;
    finite_positive("portus.ready_timeout_s", x.portus.ready_timeout_s)?;
    at_most("portus.ready_timeout_s", x.portus.ready_timeout_s, 3600.0)?;
    Ok(())
}

fn validate_network(n: &Network) -> Result<(), Invalid> {
    finite_non_negative("network.rtt_ms", n.rtt_ms)?;
    at_most("network.rtt_ms", n.rtt_ms, 10_000.0)?;
    match (n.buffer_pkts, n.buffer_bdp) {
        (Some(p), None) if p > 0 => {}
        (Some(_), None) => return Err(("network.buffer_pkts".into(), "must be > 0".into())),
        (None, Some(b)) => {
            finite_positive("network.buffer_bdp", b)?;
            at_most("network.buffer_bdp", b, 1000.0)?;
        }
        (Some(_), Some(_)) => return Err(("network.buffer_bdp".into(), "give buffer_pkts or buffer_bdp, not both".into())),
        (None, None) => return Err(("network".into(), "give the buffer: buffer_pkts or buffer_bdp".into())),
    }
    if let Some(r) = n.ack_rate_mbps {
        finite_positive("network.ack_rate_mbps", r)?;
    }
    ccp_router::classes::parse_all(&n.class_delays).map_err(|e| ("network.class_delays".to_string(), e.to_string()))?;
    Ok(())
}

fn validate_link(key: &str, l: &LinkSpec) -> Result<(), Invalid> {
    let name = match l {
        LinkSpec::Trace { name, .. } => name.as_ref(),
        LinkSpec::TraceDir { include, .. } => {
            if include.iter().any(|p| p.is_empty() || p.contains('/')) {
                return Err((format!("{key}.include"), "patterns match file names: non-empty, no '/'".into()));
            }
            None
        }
        LinkSpec::Fixed { rate_mbps, rtt_ms, buffer_bdp, loss_pct, loss_seed, name } => {
            finite_positive(&format!("{key}.rate_mbps"), *rate_mbps)?;
            at_most(&format!("{key}.rate_mbps"), *rate_mbps, MAX_LINK_MBPS)?;
            if let Some(r) = rtt_ms {
                finite_non_negative(&format!("{key}.rtt_ms"), *r)?;
                at_most(&format!("{key}.rtt_ms"), *r, 10_000.0)?;
            }
            if let Some(b) = buffer_bdp {
                finite_positive(&format!("{key}.buffer_bdp"), *b)?;
                at_most(&format!("{key}.buffer_bdp"), *b, 1000.0)?;
            }
            match loss_pct {
                Some(p) => {
                    finite_non_negative(&format!("{key}.loss_pct"), *p)?;
                    at_most(&format!("{key}.loss_pct"), *p, MAX_LOSS_PCT)?;
                }
                None if loss_seed.is_some() => {
                    return Err((format!("{key}.loss_seed"), "a seed without loss_pct does nothing: give loss_pct".into()))
                }
                None => {}
            }
            name.as_ref()
        }
        LinkSpec::SquareWave { low_mbps, high_mbps, half_period_ms, name } => {
            for (field, v) in [("low_mbps", low_mbps), ("high_mbps", high_mbps)] {
                finite_positive(&format!("{key}.{field}"), *v)?;
                at_most(&format!("{key}.{field}"), *v, MAX_LINK_MBPS)?;
            }
            if !(1..=MAX_HALF_PERIOD_MS).contains(half_period_ms) {
                return Err((format!("{key}.half_period_ms"), format!("must be in 1..={MAX_HALF_PERIOD_MS} ms")));
            }
            name.as_ref()
        }
        LinkSpec::OnOff { rate_mbps, on_ms, off_ms, length_s, name, .. } => {
            finite_positive(&format!("{key}.rate_mbps"), *rate_mbps)?;
            at_most(&format!("{key}.rate_mbps"), *rate_mbps, MAX_LINK_MBPS)?;
            for (field, v) in [("on_ms", on_ms), ("off_ms", off_ms)] {
                if !(1..=MAX_HALF_PERIOD_MS).contains(v) {
                    return Err((format!("{key}.{field}"), format!("must be in 1..={MAX_HALF_PERIOD_MS} ms")));
                }
            }
            if !(1..=MAX_ON_OFF_LENGTH_S).contains(length_s) {
                return Err((format!("{key}.length_s"), format!("must be in 1..={MAX_ON_OFF_LENGTH_S} s")));
            }
            name.as_ref()
        }
        LinkSpec::BurstGap { rate_mbps, burst_pkts, max_burst_pkts, idle_pct, idle_ms, length_s, name, .. } => {
            at_most(&format!("{key}.rate_mbps"), *rate_mbps, MAX_LINK_MBPS)?;
            let shape = crate::link::BurstGap {
                rate_mbps: *rate_mbps,
                burst_pkts: *burst_pkts,
                max_burst_pkts: max_burst_pkts.unwrap_or_else(|| crate::link::BurstGap::default_max(*burst_pkts)),
                idle_pct: *idle_pct,
                idle_ms: *idle_ms,
            };
            shape.check().map_err(|m| (key.to_string(), m))?;
            if !(1..=MAX_ON_OFF_LENGTH_S).contains(length_s) {
                return Err((format!("{key}.length_s"), format!("must be in 1..={MAX_ON_OFF_LENGTH_S} s")));
            }
            name.as_ref()
        }
    };
    match name {
        Some(n) if !is_safe_name(n) => {
            Err((format!("{key}.name"), format!("{n:?}: use letters, digits, '-', '_', '.' or '+' (it names directories)")))
        }
        _ => Ok(()),
    }
}

/// A scheme's phantom queue and pacer against the links: the phantom queue drains at a fraction
/// of a fixed rate, and the pacer's bucket must pass each fixed link's rate (a trace's mean rate
/// is checked when its run starts).
fn validate_hull(key: &str, s: &SchemeSpec, links: &[LinkSpec]) -> Result<(), Invalid> {
    if matches!(s.qdisc, QdiscSpec::Phantom { .. }) && links.iter().any(|l| !matches!(l, LinkSpec::Fixed { .. })) {
        return Err((
            format!("{key}.qdisc.gamma"),
            "the phantom queue drains at gamma × a fixed rate: fixed-rate links only".into(),
        ));
    }
    let Some(p) = &s.pacer else { return Ok(()) };
    let settings = p.settings();
    settings.check(ccp_qdisc::MTU_BYTES).map_err(|e| (format!("{key}.pacer.{}", e.param), e.message))?;
    for (i, l) in links.iter().enumerate() {
        if let LinkSpec::Fixed { rate_mbps, .. } = l {
            settings
                .params(rate_mbps * 1e6, ccp_qdisc::NANOS_PER_SEC, ccp_qdisc::MTU_BYTES)
                .map_err(|e| (format!("{key}.pacer.{}", e.param), format!("on links[{i}]: {}", e.message)))?;
        }
    }
    Ok(())
}

fn validate_scheme(key: &str, s: &SchemeSpec) -> Result<(), Invalid> {
    if !is_safe_name(&s.name) {
        return Err((format!("{key}.name"), format!("{:?}: use letters, digits, '-', '_', '.' or '+'", s.name)));
    }
    let cc = Cc::parse(&s.cc).map_err(|m| (format!("{key}.cc"), m))?;
    let is_agent = matches!(cc, Cc::Agent(_));
    for (g, cc) in &s.flow_cc {
        if g.parse::<usize>().is_err() {
            return Err((format!("{key}.flow_cc"), format!("{g:?}: key by the flow group's index in `flows` (\"0\", \"1\", …)")));
        }
        match cc.strip_prefix(crate::scheme::STRUCT_OPS) {
            Some(anchor) => crate::anchor::parse(anchor).map(|_| ()).map_err(|m| (format!("{key}.flow_cc.{g}"), m))?,
            None => check_cc_name(&format!("{key}.flow_cc.{g}"), cc)?,
        }
    }
    if let Some(bad) = s.agent_args.iter().find_map(|a| unknown_placeholder(a)) {
        return Err((
            format!("{key}.agent_args"),
            format!("unknown placeholder {bad:?} (known: {})", crate::scheme::PLACEHOLDERS.join(", ")),
        ));
    }
    if let Cc::Portus(binary) = &cc {
        crate::portus::validate_scheme(key, binary, s)?;
    } else if !s.portus_args.is_empty() {
        return Err((format!("{key}.portus_args"), "only portus schemes (cc = \"portus:…\") take this".into()));
    }
    if let Cc::Quic(q) = &cc {
        crate::traffic::quic::validate_scheme(key, q, s)?;
    } else if !is_agent {
        let classify = s.classify.is_some() && !matches!(cc, Cc::Portus(_));
        for (field, set) in [("params", !s.params.is_empty()), ("classify", classify), ("agent_args", !s.agent_args.is_empty())] {
            if set {
                return Err((format!("{key}.{field}"), "only agent schemes (cc = \"agent:…\") take this".into()));
            }
        }
    }
    for (k, v) in &s.params {
        if !matches!(v, toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_)) {
            return Err((format!("{key}.params.{k}"), "must be a string, number or boolean".into()));
        }
    }
    crate::scheme::router_qdisc(&s.qdisc).map_err(|(field, m)| (format!("{key}.qdisc.{field}"), m))?;
    for (field, map) in [("sender_sysctls", &s.sender_sysctls), ("receiver_sysctls", &s.receiver_sysctls)] {
        for (k, v) in map {
            crate::scheme::sysctl_value(k, v).map_err(|m| (format!("{key}.{field}"), m))?;
        }
    }
    for (k, v) in &s.module_params {
        crate::module_params::param_value(k, v).map_err(|m| (format!("{key}.module_params"), m))?;
    }
    if let Some(r) = &s.receiver_cc {
        check_cc_name(&format!("{key}.receiver_cc"), r)?;
        if s.receiver_ce_echo {
            return Err((format!("{key}.receiver_ce_echo"), "give receiver_cc or receiver_ce_echo, not both".into()));
        }
    }
    if let Some(r) = &s.receiver {
        validate_receiver(&format!("{key}.receiver"), r, s)?;
    }
    if let Some(c) = &s.classify {
        if c.elastic_if_equals.is_some() == c.elastic_if_above.is_some() {
            return Err((format!("{key}.classify"), "give exactly one of elastic_if_equals or elastic_if_above".into()));
        }
        if c.state.is_empty() {
            return Err((format!("{key}.classify.state"), "name the agent state variable".into()));
        }
    }
    Ok(())
}

/// The first `{…}` in an agent argument that is not one of the run's placeholders.
fn unknown_placeholder(arg: &str) -> Option<String> {
    let mut rest = arg;
    while let Some(i) = rest.find('{') {
        let tail = &rest[i..];
        let Some(j) = tail.find('}') else { return Some(tail.to_string()) };
        let name = &tail[..=j];
        if !crate::scheme::PLACEHOLDERS.contains(&name) {
            return Some(name.to_string());
        }
        rest = &tail[j + 1..];
    }
    None
}

fn validate_receiver(key: &str, r: &ReceiverSpec, s: &SchemeSpec) -> Result<(), Invalid> {
    let ReceiverSpec::Inigo { mode, threshold_pct, rfd_source, fairness, clear_ce, args } = r;
    let choice = |field: &str, v: &Option<String>, allowed: &[&str]| match v {
        Some(x) if !allowed.contains(&x.as_str()) => Err((format!("{key}.{field}"), format!("{x:?}: use one of {allowed:?}"))),
        _ => Ok(()),
    };
    choice("mode", mode, &["mark", "window"])?;
    choice("rfd_source", rfd_source, &["arrival", "tsecr"])?;
    if let Some(t) = threshold_pct {
        if !(1..=1000).contains(t) {
            return Err((format!("{key}.threshold_pct"), format!("must be in 1..=1000 %, got {t}")));
        }
    }
    if let Some(f) = fairness {
        if !(1..=1000).contains(f) {
            return Err((format!("{key}.fairness"), format!("must be in 1..=1000, got {f}")));
        }
    }
    let marking = mode.as_deref() == Some("mark");
    if *clear_ce && !marking {
        return Err((format!("{key}.clear_ce"), "only the marking mode (mode = \"mark\") sets or clears CE".into()));
    }
    // Marking reaches the sender only on an ECN-negotiated connection (spec T-R7), which needs
    // the sender to ask for ECN.
    let ecn = s.sender_sysctls.get("net.ipv4.tcp_ecn").and_then(toml::Value::as_integer);
    if marking && ecn != Some(1) {
        return Err((
            format!("{key}.mode"),
            "the marking receiver needs ECN-negotiated connections: set sender_sysctls = { \"net.ipv4.tcp_ecn\" = 1 }".into(),
        ));
    }
    if args.iter().any(|a| a.is_empty() || a.contains('\n')) {
        return Err((format!("{key}.args"), "arguments must be non-empty single-line strings".into()));
    }
    Ok(())
}

fn validate_span(key: &str, start_s: f64, stop_s: Option<f64>) -> Result<(), Invalid> {
    finite_non_negative(&format!("{key}.start_s"), start_s)?;
    if let Some(stop) = stop_s {
        if !(stop.is_finite() && stop > start_s) {
            return Err((format!("{key}.stop_s"), format!("must be after start_s ({start_s} s), got {stop}")));
        }
    }
    Ok(())
}

fn validate_flows(key: &str, groups: &[FlowGroup]) -> Result<(), Invalid> {
    if groups.is_empty() {
        return Err((key.into(), "the scheme needs at least one flow".into()));
    }
    for (i, g) in groups.iter().enumerate() {
        let k = format!("{key}[{i}]");
        if !(1..=64).contains(&g.count) {
            return Err((format!("{k}.count"), format!("must be in 1..=64, got {}", g.count)));
        }
        validate_span(&k, g.start_s, g.stop_s)?;
        finite_non_negative(&format!("{k}.stagger_s"), g.stagger_s)?;
        if g.bytes == Some(0) {
            return Err((format!("{k}.bytes"), "must be > 0 (leave it out for backlogged flows)".into()));
        }
    }
    Ok(())
}

fn validate_rate(key: &str, rate_mbps: Option<f64>, share: Option<f64>) -> Result<(), Invalid> {
    match (rate_mbps, share) {
        (Some(r), None) => finite_positive(&format!("{key}.rate_mbps"), r),
        (None, Some(s)) if s.is_finite() && s > 0.0 && s <= 4.0 => Ok(()),
        (None, Some(s)) => {
            Err((format!("{key}.share"), format!("must be in (0, 4] (a fraction of the link's mean rate), got {s}")))
        }
        _ => Err((key.into(), "give exactly one of rate_mbps or share".into())),
    }
}

fn validate_packet(key: &str, bytes: u32) -> Result<(), Invalid> {
    if (64..=1500).contains(&bytes) {
        Ok(())
    } else {
        Err((format!("{key}.packet_bytes"), format!("must be in 64..=1500 (IP bytes; the path MTU is 1500), got {bytes}")))
    }
}

fn validate_cross(key: &str, c: &CrossSpec) -> Result<(), Invalid> {
    match c {
        CrossSpec::Cbr { on_ms, off_ms, .. } if on_ms.is_some() != off_ms.is_some() => Err((
            format!("{key}.{}", if on_ms.is_none() { "on_ms" } else { "off_ms" }),
            "on/off CBR needs both on_ms and off_ms".into(),
        )),
        CrossSpec::Cbr { on_ms: Some(on), off_ms: Some(off), .. }
            if !(1..=600_000).contains(on) || !(1..=600_000).contains(off) =>
        {
            Err((format!("{key}.on_ms"), format!("on_ms and off_ms must be in 1..=600000 ms, got {on} and {off}")))
        }
        CrossSpec::Cbr { rate_mbps, share, packet_bytes, start_s, stop_s, .. }
        | CrossSpec::PoissonUdp { rate_mbps, share, packet_bytes, start_s, stop_s, .. } => {
            validate_rate(key, *rate_mbps, *share)?;
            validate_packet(key, *packet_bytes)?;
            validate_span(key, *start_s, *stop_s)
        }
        CrossSpec::PoissonTcp { rate_mbps, share, mean_size_bytes, size_dist, cc, max_concurrent, start_s, stop_s, .. } => {
            validate_rate(key, *rate_mbps, *share)?;
            if *mean_size_bytes == 0 {
                return Err((format!("{key}.mean_size_bytes"), "must be > 0".into()));
            }
            if !matches!(size_dist.as_str(), "exponential" | "fixed") {
                return Err((format!("{key}.size_dist"), format!("{size_dist:?}: use \"exponential\" or \"fixed\"")));
            }
            check_cc_name(&format!("{key}.cc"), cc)?;
            if *max_concurrent == 0 {
                return Err((format!("{key}.max_concurrent"), "must be > 0".into()));
            }
            validate_span(key, *start_s, *stop_s)
        }
        CrossSpec::Tcp { cc, count, start_s, stop_s, extra_rtt_ms } => {
            check_cc_name(&format!("{key}.cc"), cc)?;
            if !(1..=64).contains(count) {
                return Err((format!("{key}.count"), format!("must be in 1..=64, got {count}")));
            }
            if extra_rtt_ms.is_some() {
                return Err((
                    format!("{key}.extra_rtt_ms"),
                    "not supported per cross flow: give the flow's receiver port (5201 + its index, the scheme's flows \
                     first) a per-flow delay in network.class_delays (ccp-router --class-delay syntax)"
                        .into(),
                ));
            }
            validate_span(key, *start_s, *stop_s)
        }
    }
}
