//! `ccp-agent attach` / `detach` and their `ctl` counterparts: the same flags, turned into one
//! `Selection`; done directly through the kernel datapath's pins, or by the running agent.

use std::path::{Path, PathBuf};

use ccp_ebpf::attach::Net;

use super::load_config;
use crate::config::Overrides;
use crate::datapath::ebpf::attach_direct;
use crate::datapath::{AttachReport, Selection};

/// Which flows and namespaces an attach or detach covers.
#[derive(Debug, clap::Args)]
pub struct SelectArgs {
    /// Flows with either end on this port (repeatable; with --addr, both must match).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,

    /// Flows with either end in this address or prefix, e.g. 10.0.0.0/8 (repeatable).
    #[arg(long = "addr", value_name = "ADDR[/LEN]", value_parser = parse_net)]
    pub addrs: Vec<Net>,

    /// Every flow.
    #[arg(long)]
    pub all: bool,

    /// A network namespace to work in: a name from `ip netns`, or a path such as
    /// /proc/PID/ns/net (repeatable). Default: the agent's namespace.
    #[arg(long = "netns", value_name = "NAME|PATH", value_parser = parse_netns)]
    pub netns: Vec<PathBuf>,

    /// Every network namespace that can be named.
    #[arg(long)]
    pub all_netns: bool,
}

#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// A cgroup v2 directory (absolute, or relative to the cgroup2 mount) whose new flows get
    /// the congestion control when they are established (repeatable).
    #[arg(long = "cgroup", value_name = "DIR")]
    pub cgroups: Vec<PathBuf>,

    /// Also make the congestion control the default of the namespaces.
    #[arg(long = "default")]
    pub set_default: bool,
}

#[derive(Debug, clap::Args)]
pub struct DetachArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Remove the sockops program from this cgroup only (repeatable).
    #[arg(long = "cgroup", value_name = "DIR")]
    pub cgroups: Vec<PathBuf>,
}

/// `attach`/`detach` run directly (not through the control socket) need the agent's pins.
#[derive(Debug, clap::Args)]
pub struct Direct<T: clap::Args> {
    #[command(flatten)]
    pub args: T,

    /// Configuration file (for its [datapath.ebpf] section: name, pins, state file).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
}

fn parse_net(s: &str) -> Result<Net, String> {
    s.parse()
}

/// A bare name is one of `ip netns`'s.
fn parse_netns(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("empty namespace".into());
    }
    Ok(if s.contains('/') { PathBuf::from(s) } else { Path::new("/run/netns").join(s) })
}

impl SelectArgs {
    fn selection(&self) -> Selection {
        Selection {
            all: self.all,
            ports: self.ports.clone(),
            addrs: self.addrs.iter().map(|n| format!("{}/{}", n.addr, n.prefix_len)).collect(),
            netns: self.netns.clone(),
            all_netns: self.all_netns,
            ..Selection::default()
        }
    }
}

impl AttachArgs {
    pub fn selection(&self) -> Selection {
        Selection { cgroups: self.cgroups.clone(), set_default: self.set_default, ..self.select.selection() }
    }
}

impl DetachArgs {
    pub fn selection(&self) -> Selection {
        Selection { cgroups: self.cgroups.clone(), ..self.select.selection() }
    }
}

/// Prints what an attach or detach did; fails when a flow could not be switched.
pub fn print_outcome(verb: &str, out: &AttachReport) -> anyhow::Result<()> {
    let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".to_string());
    for sw in &out.switched {
        let status = sw.error.as_deref().unwrap_or("ok");
        println!("{} {} -> {} {} -> {}: {status}", sw.netns, s(&sw.local), s(&sw.remote), sw.from, sw.to);
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
    let failed = out.failed;
    println!("{verb}: {} flow(s) switched, {failed} failed", out.switched.len().saturating_sub(failed));
    if failed > 0 {
        anyhow::bail!("{failed} flow(s) could not be switched");
    }
    Ok(())
}

fn direct(config: Option<&Path>, selection: &Selection, attach: bool) -> anyhow::Result<AttachReport> {
    let cfg = load_config(config, &Overrides::default())?;
    attach_direct(&cfg.datapath, selection, attach)
}

pub fn attach(d: Direct<AttachArgs>) -> anyhow::Result<()> {
    print_outcome("attach", &direct(d.config.as_deref(), &d.args.selection(), true)?)
}

pub fn detach(d: Direct<DetachArgs>) -> anyhow::Result<()> {
    print_outcome("detach", &direct(d.config.as_deref(), &d.args.selection(), false)?)
}
