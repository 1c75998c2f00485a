//! The rules a scenario must satisfy beyond its types: ranges, cross-field consistency, host
//! indices, files, algorithm names and parameters. Each failure is [`Loaded::invalid`] on the key
//! it is about. The sections are checked in the file's order, and the first failure is reported.

use super::load::{ConfigError, Loaded};
use super::{
    Admission, BfcConfig, CcConfig, FlowConfig, IncastConfig, OutputConfig, PacerConfig, PairClass, PfcConfig, QdiscConfig,
    RandomClasses, RandomConfig, Scheduler, SwitchConfig, TopologyConfig, TransportConfig, WorkloadConfig, BFC_MAX_QUEUES,
    MAX_LABEL_LEN,
};

fn positive(l: &Loaded, key: &str, v: f64) -> Result<(), ConfigError> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(l.invalid(key, format!("must be a positive number, got {v}")))
    }
}

fn non_negative(l: &Loaded, key: &str, v: f64) -> Result<(), ConfigError> {
    if v >= 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(l.invalid(key, format!("must be ≥ 0, got {v}")))
    }
}

/// Largest per-sender delay accepted, µs (10 s).
pub const MAX_HOST_DELAY_US: f64 = 10_000_000.0;
/// Most back-to-back transfers per explicit flow: each is a flow with its own state and output row.
pub const MAX_TRANSFERS: u32 = 1_000_000;

/// An algorithm name and its parameters, checked by the registry; errors name
/// `{table}.algorithm` or `{table}.params`.
fn check_algorithm(l: &Loaded, table: &str, algorithm: &str, params: &toml::Table) -> Result<(), ConfigError> {
    if let Err(e) = ccp_algorithms::registry::configure(algorithm, params) {
        let leaf = match &e {
            ccp_contract::ParamError::UnknownAlgorithm { .. } | ccp_contract::ParamError::Unavailable { .. } => "algorithm",
            _ => "params",
        };
        return Err(l.invalid(&format!("{table}.{leaf}"), e.to_string()));
    }
    Ok(())
}

/// Checks everything the types cannot: ranges, cross-field consistency, host indices, files,
/// algorithm names and parameters.
pub fn validate(l: &Loaded) -> Result<(), ConfigError> {
    let s = &l.scenario;
    positive(l, "duration_ms", s.duration_ms)?;
    non_negative(l, "warmup_ms", s.warmup_ms)?;
    if s.warmup_ms >= s.duration_ms {
        return Err(l.invalid("warmup_ms", "must be shorter than duration_ms"));
    }
    let hosts = validate_topology(l, &s.topology)?;
    validate_switch(l, &s.switch, &s.transport)?;
    let external = matches!(&s.topology, TopologyConfig::FatTree { external: Some(_), .. });
    if s.switch.border_qdisc.is_some() && !external {
        return Err(l.invalid("switch.border_qdisc", "needs a border router: a fat-tree with `topology.external`"));
    }
    validate_transport(l, &s.transport)?;
    if let Some(p) = &s.pacer {
        validate_pacer(l, p)?;
    }
    validate_cc(l, &s.cc)?;
    validate_workload(l, &s.workload, hosts, external)?;
    validate_priorities(l, &s.workload, &s.switch)?;
    for (i, r) in s.workload.random_classes().iter().enumerate() {
        if r.rto_min_us.is_some_and(|us| us > s.transport.rto_max_us) {
            return Err(l.invalid(&format!("{}.rto_min_us", s.workload.random_key(i)), "must be ≤ transport.rto_max_us"));
        }
    }
    validate_output(l, &s.output)
}

/// `[topology]`; returns its number of hosts.
fn validate_topology(l: &Loaded, topology: &TopologyConfig) -> Result<u32, ConfigError> {
    let hosts = match topology {
        TopologyConfig::Dumbbell {
            senders,
            receivers,
            host_gbps,
            host_delay_us,
            host_delays_us,
            bottleneck_gbps,
            bottleneck_delay_us,
        } => {
            positive(l, "topology.host_gbps", *host_gbps)?;
            positive(l, "topology.bottleneck_gbps", *bottleneck_gbps)?;
            non_negative(l, "topology.host_delay_us", *host_delay_us)?;
            non_negative(l, "topology.bottleneck_delay_us", *bottleneck_delay_us)?;
            if *senders == 0 || *receivers == 0 {
                return Err(l.invalid("topology.senders", "a dumbbell needs at least one sender and one receiver"));
            }
            if let Some(d) = host_delays_us {
                validate_host_delays(l, d, *senders, *receivers)?;
            }
            senders + receivers
        }
        TopologyConfig::Star { hosts, link_gbps, link_delay_us } => {
            positive(l, "topology.link_gbps", *link_gbps)?;
            non_negative(l, "topology.link_delay_us", *link_delay_us)?;
            if *hosts < 2 {
                return Err(l.invalid("topology.hosts", "a star needs at least 2 hosts"));
            }
            *hosts
        }
        TopologyConfig::LeafSpine { tors, hosts_per_tor, spines, host_gbps, core_gbps, link_delay_us } => {
            positive(l, "topology.host_gbps", *host_gbps)?;
            positive(l, "topology.core_gbps", *core_gbps)?;
            non_negative(l, "topology.link_delay_us", *link_delay_us)?;
            if *tors == 0 || *hosts_per_tor == 0 || *spines == 0 {
                return Err(l.invalid("topology.tors", "tors, hosts_per_tor and spines must all be ≥ 1"));
            }
            tors * hosts_per_tor
        }
        TopologyConfig::FatTree {
            pods,
            tors_per_pod,
            aggs_per_pod,
            hosts_per_tor,
            cores,
            link_gbps,
            host_delay_us,
            fabric_delay_us,
            external,
        } => {
            positive(l, "topology.link_gbps", *link_gbps)?;
            non_negative(l, "topology.host_delay_us", *host_delay_us)?;
            non_negative(l, "topology.fabric_delay_us", *fabric_delay_us)?;
            if [*pods, *tors_per_pod, *aggs_per_pod, *hosts_per_tor, *cores].contains(&0) {
                return Err(
                    l.invalid("topology.pods", "pods, tors_per_pod, aggs_per_pod, hosts_per_tor and cores must all be ≥ 1")
                );
            }
            if cores % aggs_per_pod != 0 {
                return Err(l.invalid(
                    "topology.cores",
                    format!("{cores} cores do not split evenly over {aggs_per_pod} aggregation switches per pod"),
                ));
            }
            let dc = pods * tors_per_pod * hosts_per_tor;
            match external {
                None => dc,
                Some(e) => {
                    if e.hosts == 0 {
                        return Err(l.invalid("topology.external.hosts", "must be ≥ 1"));
                    }
                    if e.border_links_per_pod == 0 || e.border_links_per_pod > *aggs_per_pod {
                        return Err(l.invalid(
                            "topology.external.border_links_per_pod",
                            format!("must be 1 to aggs_per_pod ({aggs_per_pod}), got {}", e.border_links_per_pod),
                        ));
                    }
                    if let Some(g) = e.link_gbps {
                        positive(l, "topology.external.link_gbps", g)?;
                    }
                    non_negative(l, "topology.external.delay_us", e.delay_us)?;
                    if e.delay_us > MAX_HOST_DELAY_US {
                        return Err(l.invalid(
                            "topology.external.delay_us",
                            format!("{} µs is above {MAX_HOST_DELAY_US} µs (10 s)", e.delay_us),
                        ));
                    }
                    dc + e.hosts
                }
            }
        }
    };
    if hosts < 2 {
        return Err(l.invalid("topology", "the topology needs at least 2 hosts"));
    }
    Ok(hosts)
}

/// A dumbbell's `host_delays_us`: one per sender or one per host, each in [0, `MAX_HOST_DELAY_US`].
fn validate_host_delays(l: &Loaded, d: &[f64], senders: u32, receivers: u32) -> Result<(), ConfigError> {
    let hosts = senders as usize + receivers as usize;
    if d.len() != senders as usize && d.len() != hosts {
        return Err(l.invalid(
            "topology.host_delays_us",
            format!("needs one delay per sender ({senders}) or per host, senders then receivers ({hosts}), got {}", d.len()),
        ));
    }
    for (i, &us) in d.iter().enumerate() {
        let host = if i < senders as usize { format!("sender {i}") } else { format!("receiver {}", i - senders as usize) };
        if !(us >= 0.0 && us.is_finite()) {
            return Err(l.invalid("topology.host_delays_us", format!("{host}: must be ≥ 0 µs, got {us}")));
        }
        if us > MAX_HOST_DELAY_US {
            return Err(l.invalid("topology.host_delays_us", format!("{host}: {us} µs is above {MAX_HOST_DELAY_US} µs (10 s)")));
        }
    }
    Ok(())
}

/// `[switch]` with its queue discipline, PFC and BFC (the marking thresholds are checked against
/// the buffer a port can use, in the transport's packets).
fn validate_switch(l: &Loaded, sw: &SwitchConfig, transport: &TransportConfig) -> Result<(), ConfigError> {
    if sw.buffer_bytes == 0 {
        return Err(l.invalid("switch.buffer_bytes", "must be > 0"));
    }
    if sw.int_overhead_bytes > 1000 {
        return Err(l.invalid("switch.int_overhead_bytes", "must be ≤ 1000"));
    }
    positive(l, "switch.dt_alpha", sw.dt_alpha)?;
    if !(0.0..100.0).contains(&sw.loss_pct) {
        return Err(l.invalid("switch.loss_pct", format!("must be in [0, 100) %, got {}", sw.loss_pct)));
    }
    if sw.admission == Admission::Static && sw.port_buffer_bytes.is_none() {
        return Err(l.invalid("switch.admission", "static admission needs switch.port_buffer_bytes"));
    }
    if sw.queues_per_port == 0 {
        return Err(l.invalid("switch.queues_per_port", "must be ≥ 1"));
    }
    let bfc = sw.bfc.as_ref().filter(|b| b.enabled);
    if sw.scheduler == Scheduler::StrictPriority {
        if sw.queues_per_port < 2 {
            return Err(
                l.invalid("switch.scheduler", "strict priority needs switch.queues_per_port ≥ 2 (one queue per priority)")
            );
        }
        if bfc.is_some() {
            return Err(l.invalid(
                "switch.scheduler",
                "BFC assigns queues to flows itself: use the round_robin scheduler with [switch.bfc]",
            ));
        }
    }
    let mss_wire = u64::from(transport.mss_bytes + transport.header_bytes);
    let mut limit = match sw.admission {
        Admission::Static => sw.port_buffer_bytes.unwrap_or(sw.buffer_bytes).min(sw.buffer_bytes),
        Admission::Dynamic => sw.buffer_bytes,
    };
    if let Some(q) = sw.queue_buffer_bytes {
        if q < mss_wire || q > sw.buffer_bytes {
            return Err(l.invalid(
                "switch.queue_buffer_bytes",
                format!("must hold a full packet ({mss_wire} B) and fit in switch.buffer_bytes ({}), got {q}", sw.buffer_bytes),
            ));
        }
        limit = limit.min(q);
    }
    validate_qdisc(l, "switch.qdisc", &sw.qdisc, limit, mss_wire)?;
    if let Some(q) = &sw.border_qdisc {
        validate_qdisc(l, "switch.border_qdisc", q, limit, mss_wire)?;
    }
    validate_pfc(l, &sw.pfc)?;
    if let Some(b) = bfc {
        validate_bfc(l, b, sw.queues_per_port)?;
    }
    Ok(())
}

/// `[switch.qdisc]` (or `table`): its parameters, and thresholds below `limit` (the bytes a port can use;
/// `mss_wire`: a full packet's bytes).
fn validate_qdisc(l: &Loaded, table: &str, qdisc: &QdiscConfig, limit: u64, mss_wire: u64) -> Result<(), ConfigError> {
    match qdisc {
        QdiscConfig::Dctcp { k_pkts, k_bytes, .. } => {
            let k = match (k_pkts, k_bytes) {
                (Some(p), None) => p * mss_wire,
                (None, Some(b)) => *b,
                _ => return Err(l.invalid(table, "dctcp marking needs exactly one of k_pkts or k_bytes")),
            };
            if k >= limit {
                let key = if k_pkts.is_some() { "k_pkts" } else { "k_bytes" };
                return Err(l.invalid(
                    &format!("{table}.{key}"),
                    format!("K = {k} B is not below the buffer a port can use ({limit} B)"),
                ));
            }
        }
        QdiscConfig::Phantom { drain_fraction, mark_threshold_bytes } => {
            if !(*drain_fraction > 0.0 && *drain_fraction <= 1.0) {
                return Err(l.invalid(&format!("{table}.drain_fraction"), "must be in (0, 1]"));
            }
            non_negative(l, &format!("{table}.mark_threshold_bytes"), *mark_threshold_bytes)?;
        }
        QdiscConfig::Qcn { w, sampling_probability, sampling_bytes, quantization, .. } => {
            non_negative(l, &format!("{table}.w"), *w)?;
            if *sampling_bytes == Some(0) {
                return Err(l.invalid(&format!("{table}.sampling_bytes"), "must be at least 1 byte"));
            }
            if !(*sampling_probability > 0.0 && *sampling_probability <= 1.0) {
                return Err(l.invalid(&format!("{table}.sampling_probability"), "must be in (0, 1]"));
            }
            if quantization != "packets" && quantization != "standard" {
                return Err(l.invalid(&format!("{table}.quantization"), "must be \"packets\" or \"standard\""));
            }
        }
        QdiscConfig::Red { k_min_bytes, k_max_bytes, p_max, .. } => {
            let params =
                ccp_qdisc::red::RedParams { k_min_bytes: *k_min_bytes, k_max_bytes: *k_max_bytes, p_max: *p_max, seed: 0 };
            if let Err(e) = params.validate() {
                return Err(l.invalid(&format!("{table}.{}", e.param), e.message));
            }
            if *k_min_bytes >= limit {
                return Err(l.invalid(
                    &format!("{table}.k_min_bytes"),
                    format!("K_min = {k_min_bytes} B is not below the buffer a port can use ({limit} B)"),
                ));
            }
        }
        QdiscConfig::Codel { target_us, interval_us, .. } => {
            positive(l, &format!("{table}.target_us"), *target_us)?;
            if interval_us <= target_us {
                return Err(l.invalid(&format!("{table}.interval_us"), "must exceed target_us"));
            }
        }
        QdiscConfig::Droptail {} | QdiscConfig::Fq {} => {}
    }
    Ok(())
}

/// `[switch.pfc]`.
fn validate_pfc(l: &Loaded, pfc: &PfcConfig) -> Result<(), ConfigError> {
    if let Some(f) = pfc.free_fraction {
        if !(f > 0.0 && f <= 1.0) {
            return Err(l.invalid("switch.pfc.free_fraction", "must be in (0, 1]"));
        }
    }
    if pfc.enabled && pfc.free_fraction.is_none() && pfc.xon_bytes > pfc.xoff_bytes {
        return Err(l.invalid("switch.pfc.xon_bytes", "must not exceed xoff_bytes"));
    }
    Ok(())
}

/// An enabled `[switch.bfc]`, which needs several queues per port.
fn validate_bfc(l: &Loaded, b: &BfcConfig, queues_per_port: u16) -> Result<(), ConfigError> {
    if !(b.th_multiplier > 0.0 && b.th_multiplier <= 100.0) {
        return Err(l.invalid("switch.bfc.th_multiplier", "must be in (0, 100] (1.0 = thesis, 1.5 = artifact)"));
    }
    if (b.th_multiplier * 1000.0).round() < 1.0 {
        return Err(l.invalid("switch.bfc.th_multiplier", "must be at least 0.001"));
    }
    if b.hrtt_ns == Some(0) {
        return Err(l.invalid("switch.bfc.hrtt_ns", "must be > 0 ns (omit it for twice the longest link delay)"));
    }
    if !(2..=BFC_MAX_QUEUES).contains(&queues_per_port) {
        return Err(l.invalid(
            "switch.queues_per_port",
            format!("BFC ([switch.bfc]) needs 2..={BFC_MAX_QUEUES} queues per port (the thesis uses 32, and 128 in its stress tests), got {queues_per_port}"),
        ));
    }
    Ok(())
}

/// `[pacer]`.
fn validate_pacer(l: &Loaded, p: &PacerConfig) -> Result<(), ConfigError> {
    // The FIFO must hold the largest packet (INT header included).
    let t = &l.scenario.transport;
    let int = if l.scenario.switch.int { l.scenario.switch.int_overhead_bytes } else { 0 };
    p.settings().check(t.mss_bytes + t.header_bytes + int).map_err(|e| l.invalid(&format!("pacer.{}", e.param), e.message))
}

/// `[transport]`.
fn validate_transport(l: &Loaded, t: &TransportConfig) -> Result<(), ConfigError> {
    if t.mss_bytes == 0 {
        return Err(l.invalid("transport.mss_bytes", "must be > 0"));
    }
    if t.ack_bytes == 0 {
        return Err(l.invalid("transport.ack_bytes", "must be > 0"));
    }
    if t.init_cwnd_pkts == 0 {
        return Err(l.invalid("transport.init_cwnd_pkts", "must be ≥ 1"));
    }
    positive(l, "transport.rto_min_us", t.rto_min_us)?;
    positive(l, "transport.rto_initial_us", t.rto_initial_us)?;
    if t.rto_max_us < t.rto_min_us {
        return Err(l.invalid("transport.rto_max_us", "must be ≥ rto_min_us"));
    }
    if t.dupthresh == 0 {
        return Err(l.invalid("transport.dupthresh", "must be ≥ 1"));
    }
    if t.delayed_ack_segments == 0 {
        return Err(l.invalid("transport.delayed_ack_segments", "must be ≥ 1"));
    }
    non_negative(l, "transport.rx_coalesce_us", t.rx_coalesce_us)?;
    positive(l, "transport.delayed_ack_timeout_us", t.delayed_ack_timeout_us)
}

/// `[cc]`.
fn validate_cc(l: &Loaded, cc: &CcConfig) -> Result<(), ConfigError> {
    check_algorithm(l, "cc", &cc.algorithm, &cc.params)?;
    positive(l, "cc.report_interval_us", cc.report_interval_us)?;
    positive(l, "cc.initial_rtt_us", cc.initial_rtt_us)?;
    if cc.initial_rtt_us > MAX_HOST_DELAY_US {
        return Err(l.invalid("cc.initial_rtt_us", format!("{} µs is above {MAX_HOST_DELAY_US} µs (10 s)", cc.initial_rtt_us)));
    }
    non_negative(l, "cc.agent_delay_us", cc.agent_delay_us)
}

/// `[workload]`: its flows, random and incast traffic among `hosts` hosts (`external`: the
/// topology has a WAN edge that random classes may name).
fn validate_workload(l: &Loaded, w: &WorkloadConfig, hosts: u32, external: bool) -> Result<(), ConfigError> {
    for (i, f) in w.flows.iter().enumerate() {
        validate_flow(l, i, f, hosts)?;
    }
    if matches!(&w.random, Some(RandomClasses::Many(v)) if v.is_empty()) {
        return Err(l.invalid("workload.random", "an empty list: declare at least one class, or leave it out"));
    }
    for (i, r) in w.random_classes().iter().enumerate() {
        validate_random(l, &w.random_key(i), r, hosts, external)?;
    }
    if let Some(inc) = &w.incast {
        validate_incast(l, inc, hosts)?;
    }
    Ok(())
}

/// Flow priorities: each a queue of a strict-priority port. Without strict priority a priority
/// would be silently ignored, so it is refused.
fn validate_priorities(l: &Loaded, w: &WorkloadConfig, sw: &SwitchConfig) -> Result<(), ConfigError> {
    let flows = w.flows.iter().enumerate().map(|(i, f)| (format!("workload.flows[{i}].priority"), f.priority));
    let random = w.random_classes().iter().enumerate().map(|(i, r)| (format!("{}.priority", w.random_key(i)), r.priority));
    for (key, p) in flows.chain(random).filter(|(_, p)| *p > 0) {
        if sw.scheduler != Scheduler::StrictPriority {
            return Err(l.invalid(&key, "a priority needs switch.scheduler = \"strict_priority\" (round-robin ports ignore it)"));
        }
        if u16::from(p) >= sw.queues_per_port {
            return Err(l.invalid(
                &key,
                format!(
                    "{p} has no queue: switch.queues_per_port = {} gives priorities 0 to {}",
                    sw.queues_per_port,
                    sw.queues_per_port - 1
                ),
            ));
        }
    }
    Ok(())
}

/// `workload.flows[i]`.
fn validate_flow(l: &Loaded, i: usize, f: &FlowConfig, hosts: u32) -> Result<(), ConfigError> {
    if f.src >= hosts || f.dst >= hosts || f.src == f.dst {
        return Err(l.invalid(
            &format!("workload.flows[{i}].dst"),
            format!("src and dst must be distinct hosts below {hosts} (got {} → {})", f.src, f.dst),
        ));
    }
    if f.bytes == Some(0) {
        return Err(l.invalid(&format!("workload.flows[{i}].bytes"), "must be > 0 (omit it for an unbounded flow)"));
    }
    non_negative(l, &format!("workload.flows[{i}].start_us"), f.start_us)?;
    if f.transfers == 0 || f.transfers > MAX_TRANSFERS {
        return Err(
            l.invalid(&format!("workload.flows[{i}].transfers"), format!("must be 1 to {MAX_TRANSFERS}, got {}", f.transfers))
        );
    }
    if f.transfers > 1 && f.bytes.is_none() {
        return Err(l.invalid(
            &format!("workload.flows[{i}].transfers"),
            "back-to-back transfers need `bytes` (an unbounded flow never ends, so the next never starts)",
        ));
    }
    if let Some(label) = &f.label {
        check_label(l, &format!("workload.flows[{i}].label"), label)?;
    }
    if let Some(c) = &f.cc {
        check_algorithm(l, &format!("workload.flows[{i}].cc"), &c.algorithm, &c.params)?;
    }
    Ok(())
}

/// A flow label, written into flows.csv unquoted.
fn check_label(l: &Loaded, key: &str, label: &str) -> Result<(), ConfigError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.:/+".contains(c);
    if label.is_empty() || label.chars().count() > MAX_LABEL_LEN || !label.chars().all(ok) {
        return Err(l.invalid(
            key,
            format!("{label:?}: 1 to {MAX_LABEL_LEN} letters, digits or - _ . : / + (it is written into flows.csv unquoted)"),
        ));
    }
    Ok(())
}

/// A random class (`key`: `workload.random` or `workload.random[i]`), whose size CDF must load.
fn validate_random(l: &Loaded, key: &str, r: &RandomConfig, hosts: u32, external: bool) -> Result<(), ConfigError> {
    if !(r.load > 0.0 && r.load < 1.5) {
        return Err(l.invalid(&format!("{key}.load"), format!("must be in (0, 1.5), got {}", r.load)));
    }
    positive(l, &format!("{key}.sigma"), r.sigma)?;
    let path = l.base_dir().join(&r.cdf);
    if !path.exists() {
        return Err(l.invalid(&format!("{key}.cdf"), format!("{} does not exist", path.display())));
    }
    if let Err(e) = crate::workload::SizeCdf::load(&path) {
        return Err(l.invalid(&format!("{key}.cdf"), e));
    }
    if let Some(c) = &r.cc {
        check_algorithm(l, &format!("{key}.cc"), &c.algorithm, &c.params)?;
    }
    if matches!(r.pairs, Some(PairClass::Wan | PairClass::External)) && !external {
        return Err(l.invalid(&format!("{key}.pairs"), "wan and external pairs need a fat-tree with `topology.external`"));
    }
    if let Some(receiver) = r.receiver {
        if r.pairs.is_some_and(|p| p != PairClass::Internal) {
            return Err(l.invalid(&format!("{key}.receiver"), "a fixed receiver is for internal pairs only"));
        }
        if receiver >= hosts {
            return Err(l.invalid(&format!("{key}.receiver"), format!("must be a host below {hosts}, got {receiver}")));
        }
    }
    if let Some(label) = &r.label {
        check_label(l, &format!("{key}.label"), label)?;
    }
    if let Some(us) = r.rto_min_us {
        positive(l, &format!("{key}.rto_min_us"), us)?;
        if us > MAX_HOST_DELAY_US {
            return Err(l.invalid(&format!("{key}.rto_min_us"), format!("{us} µs is above {MAX_HOST_DELAY_US} µs (10 s)")));
        }
    }
    Ok(())
}

/// `[workload.incast]` among `hosts` hosts.
fn validate_incast(l: &Loaded, inc: &IncastConfig, hosts: u32) -> Result<(), ConfigError> {
    if inc.degree == 0 || inc.degree >= hosts {
        return Err(l.invalid("workload.incast.degree", format!("must be in 1..{hosts} (the other hosts)")));
    }
    if inc.total_bytes < u64::from(inc.degree) {
        return Err(l.invalid("workload.incast.total_bytes", "must give every sender at least one byte"));
    }
    positive(l, "workload.incast.interval_us", inc.interval_us)?;
    if inc.receiver.is_some_and(|r| r >= hosts) {
        return Err(l.invalid("workload.incast.receiver", format!("must be a host below {hosts}")));
    }
    if let Some(c) = &inc.cc {
        check_algorithm(l, "workload.incast.cc", &c.algorithm, &c.params)?;
    }
    Ok(())
}

/// `[output]`.
fn validate_output(l: &Loaded, o: &OutputConfig) -> Result<(), ConfigError> {
    positive(l, "output.sample_interval_us", o.sample_interval_us)?;
    if o.buckets_bytes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(l.invalid("output.buckets_bytes", "bucket edges must be strictly increasing"));
    }
    if !matches!(o.plot_format.as_str(), "png" | "svg" | "both") {
        return Err(l.invalid("output.plot_format", "must be \"png\", \"svg\" or \"both\""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::load::load_str;
    use crate::config::test_support::{line_of, load_text, DUMBBELL, GOOD};
    use crate::config::QdiscConfig;

    #[test]
    fn semantic_errors_are_located() {
        let bad = GOOD.replace("dst = 3\n\n[[", "dst = 0\n\n[[");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}: `workload.flows[0].dst`", line_of(&bad, "dst =", 0))), "{e}");
        let bad = GOOD.replace("src = 1\ndst = 3", "src = 1\ndst = 9");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}: `workload.flows[1].dst`", line_of(&bad, "dst =", 1))), "{e}");
        let bad = GOOD.replace("k_pkts = 20", "k_pkts = 20000");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}: `switch.qdisc.k_pkts`", line_of(&bad, "k_pkts", 0))), "{e}");
        let bad = format!("{GOOD}\n[cc]\nalgorithm = \"dctcp\"\nparams = {{ g = 7 }}\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.contains("`cc.params`") && e.contains('g'), "{e}");
        let bad = format!("{GOOD}\n[cc]\nalgorithm = \"bogus\"\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.contains(&format!(":{}: `cc.algorithm`", line_of(&bad, "algorithm", 0))), "{e}");
    }

    #[test]
    fn switch_bfc_loads_and_its_errors_name_the_key() {
        let l = load_text(GOOD).unwrap();
        assert!(l.scenario.switch.bfc.is_none(), "BFC is off unless [switch.bfc] is present");
        let on = format!("{GOOD}\n[switch]\nqueues_per_port = 32\n\n[switch.bfc]\nth_multiplier = 1.5\nhrtt_ns = 2000\n");
        let b = load_text(&on).unwrap().scenario.switch.bfc.unwrap();
        assert!(b.enabled && b.th_multiplier == 1.5 && b.hrtt_ns == Some(2000));
        assert_eq!(b.sticky_ns, ccp_bfc_model::STICKY_NS);
        let p = crate::bfc::BfcParams::from_config(&b, 7);
        assert_eq!((p.th_multiplier_permille, p.hrtt_ns, p.seed), (1500, Some(2000), 7));

        // BFC needs several queues per port: the error names queues_per_port, on its line.
        let few = on.replace("queues_per_port = 32", "queues_per_port = 1");
        let e = load_text(&few).unwrap_err().to_string();
        assert!(e.contains(&format!(":{}: `switch.queues_per_port`", line_of(&few, "queues_per_port", 0))), "{e}");
        assert!(e.contains("2..=128"), "{e}");
        assert!(load_text(&on.replace("queues_per_port = 32", "queues_per_port = 128")).is_ok(), "BFC 128 loads");
        let many = on.replace("queues_per_port = 32", "queues_per_port = 129");
        assert!(load_text(&many).unwrap_err().to_string().contains("`switch.queues_per_port`"));
        let bad = on.replace("th_multiplier = 1.5", "th_multiplier = 0");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.contains(&format!(":{}: `switch.bfc.th_multiplier`", line_of(&bad, "th_multiplier", 0))), "{e}");
        let bad = on.replace("hrtt_ns = 2000", "hrtt_ns = 0");
        assert!(load_text(&bad).unwrap_err().to_string().contains("`switch.bfc.hrtt_ns`"));
        let bad = on.replace("hrtt_ns = 2000", "hrtt = 2000");
        assert!(load_text(&bad).unwrap_err().to_string().contains("hrtt"), "unknown keys are refused");
        // `enabled = false` keeps the table without checks, so `--set` can switch BFC off.
        let off = load_str(Path::new("t.toml"), &few, &["switch.bfc.enabled=false".into()]).unwrap();
        assert!(!off.scenario.switch.bfc.unwrap().enabled);
        // An override that makes the scenario invalid is named as the override.
        let e = load_str(Path::new("t.toml"), &on, &["switch.queues_per_port=1".into()]).unwrap_err().to_string();
        assert!(e.contains("switch.queues_per_port"), "{e}");
    }

    #[test]
    fn per_flow_errors_are_located() {
        let e = |text: &str| load_text(text).unwrap_err().to_string();
        // The algorithm and its parameters, validated by the registry on the flow's `cc` line.
        let bad = DUMBBELL.replace("algorithm = \"dctcp\"", "algorithm = \"bogus\"");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.flows[1].cc.algorithm`", line_of(&bad, "cc = ", 0))), "{m}");
        assert!(m.contains("bogus"), "{m}");
        let bad = DUMBBELL.replace("g = 0.0625", "g = 7");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.flows[1].cc.params`", line_of(&bad, "cc = ", 0))), "{m}");
        let bad = DUMBBELL.replace("params = {", "colour = 1, params = {");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}:", line_of(&bad, "colour", 0))) && m.contains("colour"), "{m}");
        // Random and incast flows can have their own algorithm too.
        let bad = format!(
            "{DUMBBELL}\n[workload.incast]\ndegree = 1\ntotal_bytes = 1000\ninterval_us = 100\ncc = {{ algorithm = \"nope\" }}\n"
        );
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.incast.cc.algorithm`", line_of(&bad, "cc = ", 1))), "{m}");
        let ok = bad.replace("\"nope\"", "\"dctcp\"");
        assert_eq!(load_text(&ok).unwrap().scenario.workload.incast.unwrap().cc.unwrap().algorithm, "dctcp");
        // Labels go into flows.csv unquoted.
        let bad = DUMBBELL.replace("label = \"wan\"", "label = \"w,an\"");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.flows[1].label`", line_of(&bad, "label", 1))), "{m}");
        assert!(e(&DUMBBELL.replace("label = \"dc\"", "label = \"\"")).contains("`workload.flows[0].label`"));
        // One delay per sender or per host (2 senders, 1 receiver), each sane.
        let bad = DUMBBELL.replace("[1.0, 500.0]", "[1.0]");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `topology.host_delays_us`", line_of(&bad, "host_delays_us", 0))), "{m}");
        assert!(m.contains("one delay per sender (2) or per host, senders then receivers (3), got 1"), "{m}");
        assert!(e(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, 2.0, 3.0, 4.0]")).contains("(3), got 4"));
        assert!(load_text(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, 2.0, 500.0]")).is_ok());
        assert!(e(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, -5.0]")).contains("sender 1: must be ≥ 0 µs"));
        assert!(e(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, 2.0, -5.0]")).contains("receiver 0: must be ≥ 0 µs"));
        assert!(e(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, 2e7]")).contains("above 10000000 µs"));
        // Only the dumbbell has per-sender delays.
        let m = e(&GOOD.replace("link_delay_us = 1", "link_delay_us = 1\nhost_delays_us = [1.0]"));
        assert!(m.contains("host_delays_us"), "{m}");
    }

    #[test]
    fn red_defaults_to_the_dcqcn_paper_and_validates_each_parameter() {
        let red = GOOD.replace("kind = \"dctcp\"\nk_pkts = 20", "kind = \"red\"");
        let l = load_text(&red).unwrap();
        assert!(matches!(
            l.scenario.switch.qdisc,
            QdiscConfig::Red { k_min_bytes: 5_000, k_max_bytes: 200_000, p_max, at_departure: false } if p_max == 0.01
        ));
        let set = |o: &str| load_str(Path::new("t.toml"), &red, &[o.into()]).map_err(|e| e.to_string());
        let e = set("switch.qdisc={kind=\"red\",k_min_bytes=400000,k_max_bytes=100000,p_max=0.2}").unwrap_err();
        assert!(e.contains("switch.qdisc") && e.contains("K_max must exceed K_min"), "{e}");
        let e = set("switch.qdisc.k_min_bytes=0").unwrap_err();
        assert!(e.starts_with("--set switch.qdisc.k_min_bytes") && e.contains("K_min must be > 0"), "{e}");
        let e = set("switch.qdisc.p_max=1.5").unwrap_err();
        assert!(e.starts_with("--set switch.qdisc.p_max") && e.contains("(0, 1]"), "{e}");
        let e = load_text(&red.replace("kind = \"red\"", "kind = \"red\"\np_max = 0.0")).unwrap_err().to_string();
        assert!(e.contains("`switch.qdisc.p_max`") && e.contains("P_max must be in (0, 1], got 0"), "{e}");
        let e = set("switch.qdisc={kind=\"red\",k_min_bytes=50000000,k_max_bytes=60000000}").unwrap_err();
        assert!(e.contains("switch.qdisc") && e.contains("not below the buffer a port can use"), "{e}");
        let ok = set("switch.qdisc={kind=\"red\",k_min_bytes=100000,k_max_bytes=400000,p_max=0.2}").unwrap();
        assert!(matches!(ok.scenario.switch.qdisc, QdiscConfig::Red { k_min_bytes: 100_000, k_max_bytes: 400_000, .. }));
    }
}
