//! `ccp-agent ctl`: talk to a running agent over its control socket.

use std::path::PathBuf;

use anyhow::bail;
use clap::Subcommand;
use serde_json::Value;

use ccp_ebpf::attach::args::{AttachArgs, DetachArgs};

use super::attach::print_outcome;
use super::parse_param;
use crate::config::client_control_socket;
use crate::control::client;
use crate::control::protocol::{MatchSpec, Request, Target};
use crate::datapath::Selection;

#[derive(Debug, clap::Args)]
pub struct CtlArgs {
    /// The agent's control socket. Default: /run/ccp-agent/control.sock if it exists, else the
    /// user's own agent's ($XDG_RUNTIME_DIR/ccp-agent/control.sock or /tmp/ccp-agent-UID/).
    #[arg(long, value_name = "PATH", env = "CCP_CONTROL_SOCKET")]
    pub socket: Option<PathBuf>,

    /// Print the agent's JSON answer instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Datapaths, policy, counters, and every flow with its algorithm, window, rate, RTT and report age.
    Status {
        /// Counters and the number of flows only, not every flow (fast with very many flows).
        #[arg(long)]
        summary: bool,
        /// Flow rows from this one on (the agent answers at most 2,000 rows per request).
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many flow rows (10,000 at most).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Every algorithm the agent can run, with its parameters.
    Algorithms,
    /// Swap the algorithm of running flows; each continues from its current window, rate and RTT.
    Swap(SwapArgs),
    /// Set the algorithm new flows get when no rule matches.
    Default {
        /// Algorithm name (`ccp-agent ctl algorithms` lists them).
        algorithm: String,
        /// A parameter, as NAME=VALUE (repeatable).
        #[arg(long = "param", short = 'p', value_name = "NAME=VALUE", value_parser = parse_param)]
        params: Vec<(String, toml::Value)>,
    },
    /// Re-read the configuration file; new flows follow the new rules.
    Reload {
        /// Also move existing flows whose rule now picks a different algorithm or parameters.
        #[arg(long)]
        apply_existing: bool,
    },
    /// Switch kernel flows to the agent (eBPF datapath).
    Attach(AttachArgs),
    /// Hand kernel flows back to the congestion control they had.
    Detach(DetachArgs),
}

#[derive(Debug, clap::Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("target").required(true).multiple(false)))]
pub struct SwapArgs {
    /// One flow, by the id `ctl status` shows.
    #[arg(long, value_name = "ID", group = "target")]
    pub flow: Option<u64>,

    /// Every flow.
    #[arg(long, group = "target")]
    pub all: bool,

    /// Flows matching KEY=VALUE: a rule's match keys (src_port, dst_port, port, src_addr,
    /// dst_addr, addr, cong_alg, cgroup) or algorithm (the flow's current one). Repeatable: all
    /// must hold.
    #[arg(long = "match", value_name = "KEY=VALUE", value_parser = parse_param, group = "target")]
    pub matches: Vec<(String, toml::Value)>,

    /// The algorithm to swap to.
    pub algorithm: String,

    /// A parameter for it, as NAME=VALUE (repeatable).
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, toml::Value)>,
}

fn table(pairs: Vec<(String, toml::Value)>) -> toml::Table {
    pairs.into_iter().collect()
}

/// A Python algorithm's path made absolute against this client's working directory: the agent
/// runs elsewhere (as a service, from `/`), so a relative path would mean another file there.
fn absolute(algorithm: String) -> anyhow::Result<String> {
    let cwd = std::env::current_dir().unwrap_or_default();
    ccp_algorithms::registry::absolute_name(&algorithm, &cwd).map_err(|e| anyhow::anyhow!("{algorithm}: {e}"))
}

fn request(cmd: CtlCommand) -> anyhow::Result<Request> {
    Ok(match cmd {
        CtlCommand::Status { summary, offset, limit } => Request::Status { summary, offset: Some(offset), limit },
        CtlCommand::Algorithms => Request::Algorithms {},
        CtlCommand::Swap(s) => {
            let target = if let Some(id) = s.flow {
                Target::Flow(id)
            } else if s.all {
                Target::All
            } else {
                let mut spec: MatchSpec =
                    toml::Value::Table(table(s.matches)).try_into().map_err(|e| anyhow::anyhow!("--match: {}", e.message()))?;
                // Flows run Python algorithms under their absolute names.
                spec.algorithm = spec.algorithm.map(absolute).transpose()?;
                Target::Match(spec)
            };
            Request::Swap { target, algorithm: absolute(s.algorithm)?, params: table(s.params) }
        }
        CtlCommand::Default { algorithm, params } => Request::Default { algorithm: absolute(algorithm)?, params: table(params) },
        CtlCommand::Reload { apply_existing } => Request::Reload { apply_existing },
        CtlCommand::Attach(a) => Request::Attach { spec: Selection::from(&a) },
        CtlCommand::Detach(d) => Request::Detach { spec: Selection::from(&d) },
    })
}

pub fn ctl(args: CtlArgs) -> anyhow::Result<()> {
    let req = request(args.command)?;
    let socket = args.socket.clone().unwrap_or_else(client_control_socket);
    let resp = client::call(&socket, &req)?;
    if !resp.ok {
        bail!("{}", resp.error.unwrap_or_else(|| "the agent refused without saying why".into()));
    }
    let r = resp.result;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    match req {
        Request::Status { .. } => print_status(&r),
        Request::Algorithms {} => print_algorithms(&r),
        Request::Swap { algorithm, .. } => {
            let ids = r["swapped"].as_array().map_or(0, Vec::len);
            println!("swapped {ids} flow(s) to {algorithm}");
        }
        Request::Default { algorithm, .. } => println!("new flows that no rule matches now get {algorithm}"),
        Request::Reload { .. } => {
            let names = |key: &str| -> Vec<String> {
                r[key].as_array().map_or_else(Vec::new, |a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            };
            println!(
                "reloaded {}: default {}, {} rule(s); {} existing flow(s) swapped ({})",
                r["config"].as_str().unwrap_or("no configuration file"),
                r["default"].as_str().unwrap_or("?"),
                r["rules"],
                r["swapped"].as_array().map_or(0, Vec::len),
                r["note"].as_str().unwrap_or(""),
            );
            let (all, changed) = (names("python_reloaded"), names("python_changed"));
            if !all.is_empty() {
                println!("Python algorithms resolved again: {}", all.join(", "));
                println!(
                    "  changed (new flows get the new version): {}",
                    if changed.is_empty() { "none".into() } else { changed.join(", ") }
                );
            }
        }
        Request::Attach { .. } => return print_outcome("attach", &serde_json::from_value(r)?),
        Request::Detach { .. } => return print_outcome("detach", &serde_json::from_value(r)?),
    }
    Ok(())
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// A fixed-width table of the agent's flows.
fn print_status(r: &Value) {
    println!(
        "ccp-agent {} up {:.0} s, config {}; datapaths: {}",
        r["version"].as_str().unwrap_or("?"),
        num(&r["uptime_s"]).unwrap_or(0.0),
        r["config"].as_str().unwrap_or("?"),
        r["datapaths"].as_array().map(|d| d.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
    );
    println!(
        "default {}, fallback {}, {} rule(s); counters {}",
        r["default"]["algorithm"].as_str().unwrap_or("?"),
        r["fallback"]["algorithm"].as_str().unwrap_or("?"),
        r["rules"].as_array().map_or(0, Vec::len),
        r["counters"]
    );
    if let Some(c) = r["cnm"].as_object() {
        println!(
            "cnm: {} (netns {}) from {}; counters {}; read to action p50/p99 {}/{} µs",
            c["listen"].as_str().unwrap_or("?"),
            c["netns"].as_str().unwrap_or("the agent's"),
            c["allow_from"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                .unwrap_or_default(),
            c["counters"],
            c["read_to_action_us"]["p50_us"],
            c["read_to_action_us"]["p99_us"],
        );
    }
    if r["flows"].is_null() {
        println!("{} flow(s)", r["flow_count"]);
        return;
    }
    let flows = r["flows"].as_array().cloned().unwrap_or_default();
    if flows.is_empty() {
        println!("no flows");
        return;
    }
    println!(
        "{:>6} {:<22} {:<22} {:<12} {:<12} {:>10} {:>10} {:>9} {:>9} {:>8} {:>7} {:>7}",
        "ID", "SRC", "DST", "ALGORITHM", "CHOSEN BY", "CWND KB", "RATE Mb/s", "SRTT ms", "REPORTS", "AGE ms", "FAULTS", "CNMS"
    );
    for f in &flows {
        let opt = |v: &Value, scale: f64, digits: usize| {
            num(v).map_or_else(|| "-".to_string(), |x| format!("{:.*}", digits, x / scale))
        };
        println!(
            "{:>6} {:<22} {:<22} {:<12} {:<12} {:>10} {:>10} {:>9} {:>9} {:>8} {:>7} {:>7}",
            f["id"].as_u64().unwrap_or(0),
            f["src"].as_str().unwrap_or("-"),
            f["dst"].as_str().unwrap_or("-"),
            f["algorithm"].as_str().unwrap_or("?"),
            f["chosen_by"].as_str().unwrap_or("?"),
            opt(&f["cwnd_bytes"], 1000.0, 1),
            opt(&f["pacing_rate_bytes_per_s"], 125_000.0, 2),
            opt(&f["srtt_us"], 1000.0, 2),
            f["reports"].as_u64().unwrap_or(0),
            opt(&f["report_age_ms"], 1.0, 0),
            f["faults"].as_u64().unwrap_or(0),
            f["cnms"].as_u64().unwrap_or(0),
        );
    }
    if r["flows_more"].as_bool() == Some(true) {
        let next = r["flows_offset"].as_u64().unwrap_or(0) + flows.len() as u64;
        println!("… {} flows in all: `ccp-agent ctl status --offset {next}` for the next rows", r["flow_count"]);
    }
}

fn print_algorithms(r: &Value) {
    for a in r.as_array().into_iter().flatten() {
        println!("{} — {}", a["name"].as_str().unwrap_or("?"), a["summary"].as_str().unwrap_or(""));
        for p in a["params"].as_array().into_iter().flatten() {
            println!(
                "  {:<22} default {} {} ({})",
                p["name"].as_str().unwrap_or("?"),
                p["default"].as_str().unwrap_or("?"),
                p["unit"].as_str().unwrap_or(""),
                p["range"].as_str().unwrap_or("")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swap(matches: &[(&str, toml::Value)]) -> anyhow::Result<Request> {
        request(CtlCommand::Swap(SwapArgs {
            flow: None,
            all: false,
            matches: matches.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            algorithm: "dctcp".into(),
            params: vec![("g".into(), toml::Value::Float(0.125))],
        }))
    }

    #[test]
    fn match_flags_become_a_match_spec() {
        let r = swap(&[("dst_port", toml::Value::Integer(5201)), ("algorithm", toml::Value::String("reno".into()))]).unwrap();
        let Request::Swap { target: Target::Match(m), params, .. } = r else { panic!("{r:?}") };
        assert_eq!(m.dst_port, Some(5201));
        assert_eq!(m.algorithm.as_deref(), Some("reno"));
        assert_eq!(params["g"], toml::Value::Float(0.125));
    }

    #[test]
    fn a_relative_python_algorithm_is_sent_absolute() {
        // Tests run in the package's directory, agent/.
        let reno = std::env::current_dir().unwrap().join("../algorithms/python/examples/reno.py").canonicalize().unwrap();
        let want = format!("py:{}:Reno", reno.display());
        let r = request(CtlCommand::Swap(SwapArgs {
            flow: Some(3),
            all: false,
            matches: Vec::new(),
            algorithm: "py:../algorithms/python/examples/reno.py:Reno".into(),
            params: Vec::new(),
        }))
        .unwrap();
        let Request::Swap { algorithm, .. } = r else { panic!("{r:?}") };
        assert_eq!(algorithm, want);
        let relative = toml::Value::String("py:../algorithms/python/examples/reno.py:Reno".into());
        let r = swap(&[("algorithm", relative)]).unwrap();
        let Request::Swap { target: Target::Match(m), .. } = r else { panic!("{r:?}") };
        assert_eq!(m.algorithm.as_deref(), Some(want.as_str()), "--match algorithm= names the flows' algorithm as they run it");
        let r = request(CtlCommand::Default {
            algorithm: "py:../algorithms/python/examples/./reno.py:Reno".into(),
            params: Vec::new(),
        })
        .unwrap();
        let Request::Default { algorithm, .. } = r else { panic!("{r:?}") };
        assert_eq!(algorithm, want);
        let e = request(CtlCommand::Default { algorithm: "py:no/such.py:Reno".into(), params: Vec::new() }).unwrap_err();
        assert!(e.to_string().contains("no/such.py"), "{e}");
        // Native names go as they are.
        let r = request(CtlCommand::Default { algorithm: "cubic".into(), params: Vec::new() }).unwrap();
        assert!(matches!(r, Request::Default { algorithm, .. } if algorithm == "cubic"));
    }

    #[test]
    fn bad_match_keys_are_named() {
        let e = swap(&[("dport", toml::Value::Integer(1))]).unwrap_err().to_string();
        assert!(e.contains("dport"), "{e}");
        let e = swap(&[("dst_port", toml::Value::Integer(70000))]).unwrap_err().to_string();
        assert!(e.contains("--match"), "{e}");
    }
}
