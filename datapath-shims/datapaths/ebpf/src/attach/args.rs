//! The command line of an attach or detach, the same for every program that moves flows onto a
//! ccp-ebpf congestion control and back: `ccp-agent attach`/`detach` (and `ccp-agent ctl
//! attach`/`detach`), `ccp-libccp-shim attach`/`detach`.

use std::path::{Path, PathBuf};

use super::{Attach, Detach, Filter, Namespaces, Net};

/// Which flows and namespaces an attach or detach covers.
#[derive(Debug, Clone, clap::Args)]
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
    /// /proc/PID/ns/net (repeatable). Default: the namespace of the program that does the
    /// attach (the running agent's, through `ctl`).
    #[arg(long = "netns", value_name = "NAME|PATH", value_parser = parse_netns)]
    pub netns: Vec<PathBuf>,

    /// Every network namespace that can be named.
    #[arg(long)]
    pub all_netns: bool,
}

impl SelectArgs {
    /// The flows selected; none when no flag selects any.
    pub fn filter(&self) -> Option<Filter> {
        let f = Filter { all: self.all, ports: self.ports.clone(), nets: self.addrs.clone() };
        f.selects_something().then_some(f)
    }

    pub fn namespaces(&self) -> Namespaces {
        Namespaces { paths: self.netns.clone(), all: self.all_netns }
    }
}

#[derive(Debug, Clone, clap::Args)]
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

impl AttachArgs {
    /// The attach: the selected existing flows (none selected: leave them alone), and the
    /// cgroups' new flows that the same selection takes (every one, without a selection).
    pub fn attach(&self) -> Attach {
        let existing = self.select.filter();
        Attach {
            new_flows: existing.clone().unwrap_or_else(Filter::all),
            existing,
            namespaces: self.select.namespaces(),
            cgroups: self.cgroups.clone(),
            set_default: self.set_default,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct DetachArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Remove the sockops program from this cgroup only (repeatable).
    #[arg(long = "cgroup", value_name = "DIR")]
    pub cgroups: Vec<PathBuf>,
}

impl DetachArgs {
    /// The detach (without a selection: everything attach did).
    pub fn detach(&self) -> Detach {
        Detach { filter: self.select.filter(), namespaces: self.select.namespaces(), cgroups: self.cgroups.clone() }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    enum Cli {
        Attach(AttachArgs),
        Detach(DetachArgs),
    }

    #[test]
    fn flags_become_an_attach_and_a_detach() {
        let Cli::Attach(a) =
            Cli::parse_from(["x", "attach", "--port", "5201", "--addr", "10.0.0.0/8", "--netns", "snd", "--default"])
        else {
            panic!("not attach")
        };
        let at = a.attach();
        assert_eq!(at.existing.as_ref().unwrap().ports, vec![5201]);
        assert_eq!(at.new_flows.ports, vec![5201], "new flows of cgroups: the same selection");
        assert_eq!(at.namespaces.paths, vec![PathBuf::from("/run/netns/snd")]);
        assert!(at.set_default);
        let Cli::Detach(d) = Cli::parse_from(["x", "detach"]) else { panic!("not detach") };
        assert!(d.detach().filter.is_none(), "no selection: detach everything");
        for bad in [&["x", "attach", "--addr", "10.0.0.0/40"][..], &["x", "attach", "--netns", ""]] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }
}
