//! `attach` and `detach`: ccp-ebpf's machinery (iter/tcp per namespace, sockops per cgroup,
//! namespace defaults, a state file), pointed at this shim's congestion control and pins.

use ccp_ebpf::attach::{Attach, Attacher, Detach, Filter, Outcome};
use tracing::{info, warn};

use crate::cli::{AttachArgs, DetachArgs};

pub fn attach(args: &AttachArgs) -> anyhow::Result<()> {
    let existing = args.select.filter();
    let a = Attach {
        new_flows: existing.clone().unwrap_or_else(Filter::all),
        existing,
        namespaces: args.select.namespaces(),
        cgroups: args.cgroups.clone(),
        set_default: args.set_default,
    };
    let attacher = Attacher::from_pins(args.select.instance.attach_settings());
    print_outcome("attach", &attacher.attach(&a)?)
}

pub fn detach(args: &DetachArgs) -> anyhow::Result<()> {
    let d = Detach { filter: args.select.filter(), namespaces: args.select.namespaces(), cgroups: args.cgroups.clone() };
    let attacher = Attacher::from_pins(args.select.instance.attach_settings());
    print_outcome("detach", &attacher.detach(&d)?)
}

fn endpoint(e: &Option<ccp_ebpf::Endpoint>) -> String {
    e.map_or_else(|| "?".to_string(), |e| format!("{}:{}", e.addr, e.port))
}

/// Prints what an attach or detach did (one line per flow, as `ccp-agent attach` does); fails
/// when a flow could not be switched.
fn print_outcome(verb: &str, out: &Outcome) -> anyhow::Result<()> {
    for sw in &out.switched {
        let status = sw.errno.map_or_else(|| "ok".to_string(), |e| std::io::Error::from_raw_os_error(e).to_string());
        println!(
            "{} {} -> {} [{}] {} -> {}: {status}",
            sw.netns,
            endpoint(&sw.local),
            endpoint(&sw.remote),
            sw.cookie,
            sw.from,
            sw.to
        );
    }
    for c in &out.cgroups {
        println!("cgroup {}: sockops {verb}ed", c.display());
    }
    for d in &out.defaults {
        println!("default {d}");
    }
    for w in &out.warnings {
        eprintln!("warning: {w}");
    }
    let failed = out.failures().count();
    println!("{verb}: {} flow(s) switched, {failed} failed", out.switched.len() - failed);
    anyhow::ensure!(failed == 0, "{failed} flow(s) could not be switched");
    Ok(())
}

/// Logs what an attach or detach done by `run` itself did.
pub fn log_outcome(what: &str, out: &Outcome) {
    for s in &out.switched {
        match s.errno {
            None => {
                info!(netns = %s.netns, local = endpoint(&s.local), remote = endpoint(&s.remote), from = %s.from, to = %s.to, "{what}: switched")
            }
            Some(e) => warn!(
                netns = %s.netns, local = endpoint(&s.local), remote = endpoint(&s.remote), from = %s.from, to = %s.to,
                error = %std::io::Error::from_raw_os_error(e), "{what}: could not switch"
            ),
        }
    }
    for c in &out.cgroups {
        info!(cgroup = %c.display(), "{what}: sockops");
    }
    for d in &out.defaults {
        info!(default = %d, "{what}: namespace default");
    }
    for w in &out.warnings {
        warn!("{what}: {w}");
    }
}
