//! `ccp-agent attach` / `detach` and their `ctl` counterparts: the same flags (ccp-ebpf's, which
//! the portus shim takes too), turned into one `Selection`; done directly through the kernel
//! datapath's pins, or by the running agent.

use std::path::{Path, PathBuf};

use ccp_ebpf::attach::args::{AttachArgs, DetachArgs, SelectArgs};

use super::load_config;
use crate::config::Overrides;
use crate::datapath::ebpf::attach_direct;
use crate::datapath::{AttachReport, Selection};

/// `attach`/`detach` run directly (not through the control socket) need the agent's pins.
#[derive(Debug, clap::Args)]
pub struct Direct<T: clap::Args> {
    #[command(flatten)]
    pub args: T,

    /// Configuration file (for its [datapath.ebpf] section: name, pins, state file).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
}

fn selection(select: &SelectArgs) -> Selection {
    Selection {
        all: select.all,
        ports: select.ports.clone(),
        addrs: select.addrs.iter().map(|n| format!("{}/{}", n.addr, n.prefix_len)).collect(),
        netns: select.netns.clone(),
        all_netns: select.all_netns,
        ..Selection::default()
    }
}

impl From<&AttachArgs> for Selection {
    fn from(a: &AttachArgs) -> Selection {
        Selection { cgroups: a.cgroups.clone(), set_default: a.set_default, ..selection(&a.select) }
    }
}

impl From<&DetachArgs> for Selection {
    fn from(d: &DetachArgs) -> Selection {
        Selection { cgroups: d.cgroups.clone(), ..selection(&d.select) }
    }
}

/// Prints what an attach or detach did; fails when a flow could not be switched.
pub fn print_outcome(verb: &str, out: &AttachReport) -> anyhow::Result<()> {
    out.print(verb).map_err(anyhow::Error::msg)
}

fn direct(config: Option<&Path>, selection: &Selection, attach: bool) -> anyhow::Result<AttachReport> {
    let cfg = load_config(config, &Overrides::default())?;
    attach_direct(&cfg.datapath, selection, attach)
}

pub fn attach(d: Direct<AttachArgs>) -> anyhow::Result<()> {
    print_outcome("attach", &direct(d.config.as_deref(), &Selection::from(&d.args), true)?)
}

pub fn detach(d: Direct<DetachArgs>) -> anyhow::Result<()> {
    print_outcome("detach", &direct(d.config.as_deref(), &Selection::from(&d.args), false)?)
}
