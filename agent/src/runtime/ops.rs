//! Operating a running agent: control-socket requests (status, swap, default, reload,
//! attach/detach), and the metrics endpoint's text.
//!
//! `reload` re-reads the configuration file, and with or without one resolves every Python
//! algorithm (`py:`) of the policy again: a changed file is a new version of its class, which
//! new flows get from then on (existing ones only with `apply_existing`).

use mio::Token;
use serde_json::json;
use tracing::info;

use super::Runtime;
use crate::cnm::Reason;
use crate::config::{parse_net, AgentConfig};
use crate::control::protocol::{MatchSpec, Request, Response, Target, MAX_STATUS_ROWS};
use crate::control::server::ControlServer;
use crate::datapath::Selection;
use crate::flows::FlowKey;
use crate::metrics::{by_label, render, Family};
use crate::rules::{Matcher, Policy, Rule};
use ccp_contract::Choice;

/// The version of each Python algorithm `policy` names: the address of the descriptor its
/// file resolves to now (a changed file resolves to a new one).
pub(super) fn python_versions(policy: &Policy) -> std::collections::BTreeMap<&'static str, usize> {
    let choices = [&policy.default, &policy.fallback].into_iter().chain(policy.rules.iter().map(|r| &r.choice));
    choices
        .filter(|c| ccp_algorithms::registry::file_backed(c.algorithm()))
        .filter_map(|c| {
            let info = ccp_algorithms::registry::resolve(c.algorithm()).ok()?;
            Some((c.algorithm(), info as *const ccp_contract::AlgorithmInfo as usize))
        })
        .collect()
}

/// `policy` with every Python algorithm's choice made again from its file as it is now.
fn reresolve_python(policy: &Policy) -> Result<Policy, String> {
    let again = |c: &Choice| -> Result<Choice, String> {
        if !ccp_algorithms::registry::file_backed(c.algorithm()) {
            return Ok(c.clone());
        }
        ccp_algorithms::registry::choose(c.algorithm(), c.params.clone(), c.origin.clone())
            .map_err(|e| format!("{} ({}): {e}", c.algorithm(), c.origin))
    };
    let rules = policy
        .rules
        .iter()
        .map(|r| Ok(Rule { name: r.name.clone(), matcher: r.matcher.clone(), choice: again(&r.choice)? }))
        .collect::<Result<_, String>>()?;
    Ok(Policy { default: again(&policy.default)?, rules, fallback: again(&policy.fallback)? })
}

/// A `match` from the control socket as a rule matcher, plus the optional current-algorithm filter.
fn matcher_of(spec: &MatchSpec) -> Result<(Matcher, Option<String>), String> {
    let net =
        |v: &Option<String>, field: &str| v.as_deref().map(parse_net).transpose().map_err(|e| format!("match.{field}: {e}"));
    let m = Matcher {
        src_port: spec.src_port,
        dst_port: spec.dst_port,
        port: spec.port,
        src_addr: net(&spec.src_addr, "src_addr")?,
        dst_addr: net(&spec.dst_addr, "dst_addr")?,
        addr: net(&spec.addr, "addr")?,
        cong_alg: spec.cong_alg.clone(),
        cgroup: spec.cgroup.clone(),
    };
    if m.is_empty() && spec.algorithm.is_none() {
        return Err("match has no conditions (use target \"all\" for every flow)".into());
    }
    Ok((m, spec.algorithm.clone()))
}

impl Runtime {
    pub(super) fn serve_control(&mut self, token: Token) {
        let Some(mut server) = self.services.control.take() else { return };
        for (tok, request) in server.ready(self.poll.registry(), token, self.now().instant) {
            self.flows.counters.control_requests += 1;
            let response = match request {
                Ok(Request::Attach { spec }) => self.start_attach(&server, tok, &spec, true),
                Ok(Request::Detach { spec }) => self.start_attach(&server, tok, &spec, false),
                Ok(r) => Some(self.handle_request(r)),
                Err(e) => Some(Response::error(e)),
            };
            if let Some(response) = response {
                server.respond(self.poll.registry(), tok, &response, self.now().instant);
            }
        }
        self.services.control = Some(server);
    }

    /// Hands an attach or detach to a thread of its own (`jobs.rs`); `None` when it was, the
    /// answer coming when it is done.
    fn start_attach(&mut self, server: &ControlServer, tok: Token, spec: &Selection, attach: bool) -> Option<Response> {
        let Some(a) = self.datapaths.iter_mut().find_map(|d| d.attach_control()) else {
            let served: Vec<String> = self.datapaths.iter().map(|d| d.describe()).collect();
            return Some(Response::error(format!(
                "attach and detach need a datapath whose flows live in this kernel (run --datapath ebpf); this agent serves {}",
                served.join(", ")
            )));
        };
        let job = match a.job(spec, attach) {
            Ok(j) => j,
            Err(e) => return Some(Response::error(e)),
        };
        let serial = server.serial(tok)?;
        self.jobs.submit((tok, serial), job).err().map(Response::error)
    }

    /// Answers the attach and detach jobs that finished.
    pub(super) fn finish_jobs(&mut self) {
        let done = self.jobs.finished();
        let now = self.now().instant;
        let Some(server) = self.services.control.as_mut() else { return };
        for ((tok, serial), result) in done {
            let response = match result {
                Ok(report) => Response::ok(serde_json::to_value(report).unwrap_or_default()),
                Err(e) => Response::error(e),
            };
            server.respond_later(self.poll.registry(), tok, serial, &response, now);
        }
    }

    pub(super) fn serve_metrics(&mut self, token: Token) {
        let Some(mut server) = self.services.metrics.take() else { return };
        let now = self.now().instant;
        server.ready(self.poll.registry(), token, now, || self.metrics_text());
        self.services.metrics = Some(server);
    }

    fn handle_request(&mut self, request: Request) -> Response {
        match request {
            Request::Status { summary, offset, limit } => Response::ok(self.status_json(summary, offset, limit)),
            Request::Algorithms {} => Response::ok(crate::catalog::algorithms_json()),
            Request::Swap { target, algorithm, params } => self.swap(target, &algorithm, params),
            Request::Default { algorithm, params } => match self.choice(&algorithm, params, "default") {
                Ok(c) => {
                    info!(algorithm, "default algorithm for new flows changed");
                    self.flows.policy.default = c;
                    Response::ok(json!({ "default": algorithm }))
                }
                Err(e) => Response::error(e),
            },
            Request::Reload { apply_existing } => self.reload(apply_existing),
            Request::Attach { .. } | Request::Detach { .. } => Response::error("attach and detach are served off the loop"),
        }
    }

    /// `algorithm` with the configuration's `[algorithms.*]` table overlaid by `params`.
    fn choice(&self, algorithm: &str, params: toml::Table, origin: &str) -> Result<Choice, String> {
        let mut merged = self.algorithm_params.get(algorithm).cloned().unwrap_or_default();
        merged.extend(params);
        ccp_algorithms::registry::choose(algorithm, merged, origin).map_err(|e| e.to_string())
    }

    fn swap(&mut self, target: Target, algorithm: &str, params: toml::Table) -> Response {
        let choice = match self.choice(algorithm, params, "swap") {
            Ok(c) => c,
            Err(e) => return Response::error(e),
        };
        let keys: Vec<FlowKey> = match target {
            Target::Flow(id) => match self.flows.iter().find(|(_, f)| f.id == id) {
                Some((k, _)) => vec![*k],
                None => return Response::error(format!("unknown flow {id} (`ccp-agent ctl status` lists the flows)")),
            },
            Target::All => self.flows.iter().map(|(k, _)| *k).collect(),
            Target::Match(spec) => {
                let (matcher, current) = match matcher_of(&spec) {
                    Ok(m) => m,
                    Err(e) => return Response::error(e),
                };
                self.flows
                    .iter()
                    .filter(|(_, f)| {
                        matcher.matches(&f.info) && current.as_deref().is_none_or(|a| f.controller.algorithm_name() == a)
                    })
                    .map(|(k, _)| *k)
                    .collect()
            }
        };
        let ids = self.swap_flows(&keys, |_| choice.clone());
        info!(algorithm, flows = ids.len(), "hot swap");
        Response::ok(json!({ "algorithm": algorithm, "swapped": ids }))
    }

    /// Swaps each flow in `keys` to `choose(flow)`; returns the ids swapped.
    fn swap_flows(&mut self, keys: &[FlowKey], choose: impl Fn(&crate::flows::Flow) -> Choice) -> Vec<u64> {
        let now = self.now();
        self.flows.swap(keys, choose, &mut self.datapaths, now)
    }

    /// Re-reads the configuration file, if the agent has one; either way every Python algorithm
    /// of the policy is resolved again (the response lists them, and those whose file changed).
    pub(super) fn reload(&mut self, apply_existing: bool) -> Response {
        let from = self.services.reload_from.clone();
        let policy = match &from {
            Some((path, overrides)) => match AgentConfig::load(path, overrides) {
                Ok(cfg) => {
                    self.flows.limits = cfg.limits;
                    self.flows.set_flow_limits(cfg.flow_limits);
                    self.flows.idle_timeout_us = cfg.flow_idle_timeout.as_micros() as u64;
                    self.algorithm_params = cfg.algorithm_params;
                    cfg.policy
                }
                Err(e) => return Response::error(format!("reload refused, the running configuration stays: {e}")),
            },
            None if self.python_versions.is_empty() => {
                return Response::error(
                    "the agent was started without a configuration file (--config or /etc/ccp-agent/agent.toml) and its \
                     policy names no Python algorithm: nothing to reload",
                )
            }
            None => match reresolve_python(&self.flows.policy) {
                Ok(p) => p,
                Err(e) => return Response::error(format!("reload refused, the running policy stays: {e}")),
            },
        };
        let versions = python_versions(&policy);
        let changed: Vec<&'static str> =
            versions.iter().filter(|(n, v)| self.python_versions.get(*n) != Some(*v)).map(|(n, _)| *n).collect();
        self.flows.policy = policy;
        self.python_versions = versions;
        let mut swapped = Vec::new();
        if apply_existing {
            let policy = self.flows.policy.clone();
            let keys: Vec<_> = self
                .flows
                .iter()
                .filter(|(_, f)| {
                    let now = policy.select(&f.info);
                    !now.same_setup(f.controller.choice()) || changed.contains(&now.algorithm())
                })
                .map(|(k, _)| *k)
                .collect();
            swapped = self.swap_flows(&keys, |f| policy.select(&f.info).clone());
        }
        let python: Vec<&str> = self.python_versions.keys().copied().collect();
        let config = from.as_ref().map(|(p, _)| p.display().to_string());
        info!(
            config = config.as_deref().unwrap_or("none"),
            rules = self.flows.policy.rules.len(),
            python = python.len(),
            python_changed = changed.len(),
            swapped = swapped.len(),
            "policy reloaded"
        );
        Response::ok(json!({
            "config": config,
            "default": self.flows.policy.default.algorithm(),
            "rules": self.flows.policy.rules.len(),
            "python_reloaded": python,
            "python_changed": changed,
            "swapped": swapped,
            "note": match from {
                Some(_) => "datapath, control, metrics and cnm settings take effect at the next start",
                None => "no configuration file: only the Python algorithms were resolved again",
            },
        }))
    }

    fn status_json(&self, summary: bool, offset: Option<usize>, limit: Option<usize>) -> serde_json::Value {
        let offset = offset.unwrap_or(0);
        let limit = limit.unwrap_or(MAX_STATUS_ROWS).min(MAX_STATUS_ROWS);
        let rows = if summary { Vec::new() } else { self.flows.status_page(&self.datapaths, self.now(), offset, limit) };
        let shown = rows.len();
        let choice = |c: &Choice| json!({ "algorithm": c.algorithm(), "params": c.params });
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": self.clock.started().elapsed().as_secs_f64(),
            "config": self.config_source,
            "datapaths": self.datapaths.iter().map(|d| d.describe()).collect::<Vec<_>>(),
            "datapath_stats": self.datapaths.iter().map(|d| d.stats_json()).collect::<Vec<_>>(),
            "attach_jobs": self.jobs.outstanding(),
            "default": choice(&self.flows.policy.default),
            "fallback": choice(&self.flows.policy.fallback),
            "rules": self.flows.policy.rules.iter().map(|r| json!({ "name": r.name, "algorithm": r.choice.algorithm(), "params": r.choice.params })).collect::<Vec<_>>(),
            "counters": self.flows.counters,
            "admission": json!({ "refused": self.flows.admission.refusals, "refused_flows_now": self.flows.admission.refused_now() }),
            "cnm": self.services.cnm.as_ref().map(|c| c.status_json()),
            "flow_count": self.flows.len(),
            "flows_offset": offset,
            "flows_more": !summary && offset + shown < self.flows.len(),
            "flows": if summary { serde_json::Value::Null } else { json!(rows) },
        })
    }

    fn metrics_text(&self) -> String {
        let c = &self.flows.counters;
        let r = self.flows.admission.refusals;
        let counter = |name, help, v: u64| Family::single(name, "counter", help, v as f64);
        let mut cnm = Vec::new();
        if let Some(l) = self.services.cnm.as_ref() {
            let k = l.counters;
            let mut samples = vec![(vec![("outcome", "delivered".to_string())], k.delivered as f64)];
            samples.extend(Reason::ALL.iter().map(|r| (vec![("outcome", r.name().to_string())], k.get(*r) as f64)));
            samples.push((vec![("outcome", "socket_overflow".to_string())], k.socket_overflows as f64));
            cnm.push(Family {
                name: "ccp_cnm_datagrams_total",
                kind: "counter",
                help: "CNM datagrams by outcome: delivered to a flow, or why dropped (socket_overflow: dropped by the kernel).",
                samples,
            });
            cnm.push(counter(
                "ccp_cnm_actions_total",
                "Delivered CNMs whose decision sent a command to the datapath.",
                k.actions,
            ));
            cnm.push(Family::single(
                "ccp_cnm_read_to_action_p99_seconds",
                "gauge",
                "99th percentile, since start, of a CNM's read to its flow's decision applied.",
                l.latency_summary().p99_us as f64 / 1e6,
            ));
        }
        let mut families = vec![
            Family::single(
                "ccp_uptime_seconds",
                "gauge",
                "Seconds since the agent started.",
                self.clock.started().elapsed().as_secs_f64(),
            ),
            Family {
                name: "ccp_flows",
                kind: "gauge",
                help: "Flows the agent controls, by algorithm.",
                samples: by_label("algorithm", self.flows.iter().map(|(_, f)| f.controller.algorithm_name().to_string())),
            },
            counter("ccp_flows_started_total", "Flows that started under the agent.", c.flows_started),
            counter("ccp_flows_adopted_total", "Running flows adopted (agent restart, attach).", c.flows_adopted),
            counter("ccp_flows_closed_total", "Flows that ended.", c.flows_closed),
            counter("ccp_flows_forgotten_total", "Flows forgotten after going silent.", c.flows_forgotten),
            counter("ccp_reports_total", "Reports received from datapaths.", c.reports),
            counter("ccp_reports_unknown_flow_total", "Reports for flows no adapter announced.", c.reports_for_unknown_flows),
            counter("ccp_commands_total", "Commands sent to datapaths.", c.commands_sent),
            counter("ccp_command_errors_total", "Commands that could not be delivered.", c.apply_errors),
            counter(
                "ccp_commands_deferred_total",
                "Commands held back because the datapath's queue was full (sent when it drains).",
                c.apply_deferred,
            ),
            counter("ccp_algorithm_faults_total", "Algorithm panics and invalid outputs contained.", c.algorithm_faults),
            counter("ccp_algorithm_panics_total", "Algorithm panics contained.", c.algorithm_panics),
            counter("ccp_clamped_values_total", "Algorithm outputs clamped to safe bounds.", c.clamped_values),
            counter("ccp_fallbacks_total", "Algorithms replaced by the fallback after repeated faults.", c.fallbacks),
            counter("ccp_swaps_total", "Hot swaps of a flow's algorithm.", c.swaps),
            counter("ccp_control_requests_total", "Control socket requests served.", c.control_requests),
            counter(
                "ccp_feedback_reports_total",
                "Reports carrying network feedback (CNMs) delivered to flows.",
                c.feedback_reports,
            ),
            Family {
                name: "ccp_flows_refused_total",
                kind: "counter",
                help: "Flows refused by a [safety] flow limit (the datapath's fallback steers them), by limit.",
                samples: [
                    ("max_flows", r.max_flows),
                    ("max_flows_per_peer", r.max_flows_per_peer),
                    ("max_flows_per_netns", r.max_flows_per_netns),
                    ("max_flows_per_uid", r.max_flows_per_uid),
                ]
                .into_iter()
                .map(|(l, v)| (vec![("limit", l.to_string())], v as f64))
                .collect(),
            },
            counter("ccp_refused_flow_reports_total", "Reports of refused flows, dropped.", r.reports_dropped),
            counter(
                "ccp_loop_budget_exhausted_total",
                "Loop turns in which a datapath had more waiting than the work budget (served after timers, signals, control).",
                c.loop_budget_exhausted,
            ),
        ];
        families.extend(cnm);
        render(&families)
    }
}
