//! Moving flows onto the congestion control and back.
//!
//! - Existing flows: an iter/tcp program walks a namespace's TCP sockets and switches those the
//!   filter selects with `bpf_setsockopt(TCP_CONGESTION)`, recording each one's previous
//!   congestion control in socket storage shared with the congestion control (pinned as
//!   `prev_cc`). Iterators see one namespace each, so this runs once per namespace asked for.
//! - New flows: a sockops program on a cgroup switches flows as they reach ESTABLISHED (never
//!   at connect: see `attach.bpf.c`). Its link is pinned so that it outlives `ccp-agent attach`.
//! - Namespace defaults: the `tcp_congestion_control` sysctl, after putting the name on the
//!   allowed list (see `sysctl`).
//!
//! Everything attach does is recorded in the state file; detach undoes it. Detaching restores
//! each flow's previous congestion control (or `restore_cc` when it is unknown or gone), and the
//! congestion control's `release` resets any pacing it set.

#[cfg(feature = "clap")]
pub mod args;
pub mod filter;
mod programs;
pub mod report;
pub mod state;
mod sysctl;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use libbpf_rs::MapHandle;

pub use filter::{Filter, Net};
pub use programs::Switched;
use programs::{Action, AttachObject};
pub use report::{AttachReport, SwitchedFlow};
use state::{CgroupRecord, NetnsRecord};

use crate::netns::Netns;
use crate::{available_congestion_controls, Error};

/// Where an agent instance keeps what attach needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The congestion control's name.
    pub cc_name: String,
    /// The instance's pin directory (`prev_cc`, sockops links).
    pub pin_dir: PathBuf,
    pub state_file: PathBuf,
    /// Where flows go back to when their previous congestion control is unknown or gone.
    pub restore_cc: String,
}

/// Which network namespaces an operation covers.
#[derive(Debug, Clone, Default)]
pub struct Namespaces {
    /// Paths of namespaces (/run/netns/NAME, /proc/PID/ns/net); none: the caller's.
    pub paths: Vec<PathBuf>,
    /// Every namespace that can be named (`ip netns`, and those of running processes).
    pub all: bool,
}

/// What an attach covers.
#[derive(Debug, Clone)]
pub struct Attach {
    /// Existing flows to switch, in `namespaces`; `None`: leave existing flows alone.
    pub existing: Option<Filter>,
    pub namespaces: Namespaces,
    /// cgroups whose new flows (those `new_flows` selects) get the congestion control.
    pub cgroups: Vec<PathBuf>,
    pub new_flows: Filter,
    /// Make the congestion control the default of `namespaces`.
    pub set_default: bool,
}

/// What a detach covers.
#[derive(Debug, Clone, Default)]
pub struct Detach {
    /// Restore only these flows; `None`: every flow on the congestion control, and every cgroup
    /// attachment and namespace default attach made.
    pub filter: Option<Filter>,
    pub namespaces: Namespaces,
    /// Remove the sockops program from these cgroups (all recorded ones when detaching
    /// everything).
    pub cgroups: Vec<PathBuf>,
}

/// What an operation did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub switched: Vec<Switched>,
    /// Cgroups whose sockops attachment was added or removed.
    pub cgroups: Vec<PathBuf>,
    /// Namespace defaults changed, as "namespace: old -> new".
    pub defaults: Vec<String>,
    /// Things skipped on the way (a namespace that is gone, say).
    pub warnings: Vec<String>,
}

impl Outcome {
    pub fn failures(&self) -> impl Iterator<Item = &Switched> {
        self.switched.iter().filter(|s| s.errno.is_some())
    }
}

/// Attach and detach for one congestion control instance.
pub struct Attacher {
    settings: Settings,
    prev_cc: Option<MapHandle>,
}

impl Attacher {
    /// `prev_cc` is the congestion control's previous-CC storage (from `Instance::prev_cc_map`).
    pub fn new(settings: Settings, prev_cc: Option<MapHandle>) -> Attacher {
        Attacher { settings, prev_cc }
    }

    /// For a process other than the agent: the storage comes from the agent's pins.
    pub fn from_pins(settings: Settings) -> Attacher {
        let prev_cc = crate::instance::pinned_map(&settings.pin_dir, "prev_cc").ok();
        Attacher { settings, prev_cc }
    }

    fn registered(&self) -> Result<(), Error> {
        if available_congestion_controls()?.iter().any(|n| n == &self.settings.cc_name) {
            Ok(())
        } else {
            Err(Error::NotRegistered(self.settings.cc_name.clone()))
        }
    }

    /// Resolves namespaces, adding the recorded ones when asked; skipped ones become warnings.
    fn resolve(&self, ns: &Namespaces, recorded: &[NetnsRecord], out: &mut Outcome) -> Result<Vec<Netns>, Error> {
        let mut list: Vec<Netns> = Vec::new();
        let mut push = |n: Netns| {
            if !list.iter().any(|m| m.same_as(&n)) {
                list.push(n);
            }
        };
        if ns.all {
            Netns::discover().into_iter().for_each(&mut push);
        } else if ns.paths.is_empty() {
            push(Netns::current()?);
        } else {
            for p in &ns.paths {
                push(Netns::open(p).map_err(|e| Error::Config(format!("network namespace {}: {e}", p.display())))?);
            }
        }
        for r in recorded {
            match Netns::open(&r.path) {
                Ok(n) if n.dev == r.dev && n.ino == r.ino => push(n),
                _ => out.warnings.push(format!("recorded namespace {} is gone", r.path.display())),
            }
        }
        Ok(list)
    }

    fn load(&self, progs: &[&str], filter: &Filter, action: Action) -> Result<AttachObject, Error> {
        AttachObject::load(progs, &self.settings.cc_name, &self.settings.restore_cc, filter, action, self.prev_cc.as_ref())
    }

    fn sockops_pin(&self, cgroup: &Path) -> Result<PathBuf, Error> {
        let ino = std::fs::metadata(cgroup)?.ino();
        Ok(self.settings.pin_dir.join(format!("sockops-{ino}")))
    }

    /// Switches the selected existing flows, attaches sockops to cgroups for new ones, and
    /// optionally makes the congestion control each namespace's default.
    pub fn attach(&self, a: &Attach) -> Result<Outcome, Error> {
        if a.existing.is_none() && a.cgroups.is_empty() && !a.set_default {
            return Err(Error::Config(
                "nothing to attach: select flows (--port, --addr, --all), a --cgroup, or --default".into(),
            ));
        }
        if let Some(f) = &a.existing {
            f.validate().map_err(Error::Config)?;
        }
        a.new_flows.validate().map_err(Error::Config)?;
        self.registered()?;
        let name = &self.settings.cc_name;
        let mut locked = state::lock(&self.settings.state_file)?;
        let mut out = Outcome::default();
        let targets =
            if a.existing.is_some() || a.set_default { self.resolve(&a.namespaces, &[], &mut out)? } else { Vec::new() };

        // New flows first, so that none slips between the walk and the hooks.
        if a.set_default {
            let mut allowed = sysctl::allowed()?;
            if !allowed.contains(name) {
                allowed.push(name.clone());
                sysctl::set_allowed(&allowed)?;
                locked.state.allowed_added = true;
            }
        }
        for n in &targets {
            if locked.state.netns_mut(n.dev, n.ino).is_none() {
                locked.state.netns.push(NetnsRecord { path: n.path.clone(), dev: n.dev, ino: n.ino, previous_default: None });
            }
            if a.set_default {
                let before = sysctl::default_in(n)?;
                if &before != name {
                    sysctl::set_default_in(n, name)?;
                    out.defaults.push(format!("{n}: {before} -> {name}"));
                    if let Some(r) = locked.state.netns_mut(n.dev, n.ino) {
                        r.previous_default.get_or_insert(before);
                    }
                }
            }
        }
        if !a.cgroups.is_empty() {
            let obj = self.load(&["set_cc"], &a.new_flows, Action::Attach)?;
            for cg in &a.cgroups {
                let dir = crate::cgroup::dir(cg)?;
                let pin = self.sockops_pin(&dir)?;
                obj.attach_cgroup(&dir, &pin)?;
                locked.state.cgroups.retain(|c| c.pin != pin);
                locked.state.cgroups.push(CgroupRecord { path: dir.clone(), pin });
                out.cgroups.push(dir);
            }
        }
        if let Some(filter) = &a.existing {
            let obj = self.load(&["switch_cc"], filter, Action::Attach)?;
            for n in &targets {
                out.switched.extend(obj.switch_in(n)?);
            }
        }
        locked.save()?;
        Ok(out)
    }

    /// Restores flows (and, when detaching everything, removes every hook attach installed).
    pub fn detach(&self, d: &Detach) -> Result<Outcome, Error> {
        let everything = d.filter.is_none() && d.cgroups.is_empty();
        let name = &self.settings.cc_name;
        let mut locked = state::lock(&self.settings.state_file)?;
        let mut out = Outcome::default();
        let recorded = if everything || d.namespaces.paths.is_empty() { locked.state.netns.clone() } else { Vec::new() };
        let targets = self.resolve(&d.namespaces, &recorded, &mut out)?;

        if everything {
            for r in &mut locked.state.netns {
                let Some(prev) = r.previous_default.take() else { continue };
                let Some(n) = targets.iter().find(|n| n.dev == r.dev && n.ino == r.ino) else { continue };
                if sysctl::default_in(n).is_ok_and(|cur| &cur == name) {
                    sysctl::set_default_in(n, &prev)?;
                    out.defaults.push(format!("{n}: {name} -> {prev}"));
                }
            }
        }
        let wanted: Vec<PathBuf> = d.cgroups.iter().map(|c| crate::cgroup::dir(c)).collect::<Result<_, _>>()?;
        locked.state.cgroups.retain(|c| {
            let remove = everything || wanted.iter().any(|w| w == &c.path);
            if remove {
                // Unpinning drops the last reference to the link: the program detaches.
                match std::fs::remove_file(&c.pin) {
                    Ok(()) => out.cgroups.push(c.path.clone()),
                    Err(e) => out.warnings.push(format!("sockops pin {}: {e}", c.pin.display())),
                }
            }
            !remove
        });
        let filter = d.filter.clone().unwrap_or_else(Filter::all);
        if filter.selects_something() {
            let obj = self.load(&["switch_cc"], &filter, Action::Restore)?;
            for n in &targets {
                out.switched.extend(obj.switch_in(n)?);
            }
        }
        if everything {
            if locked.state.allowed_added {
                let allowed: Vec<String> = sysctl::allowed()?.into_iter().filter(|n| n != name).collect();
                sysctl::set_allowed(&allowed)?;
                locked.state.allowed_added = false;
            }
            locked.state.netns.clear();
        }
        locked.save()?;
        Ok(out)
    }

    /// After an agent restart: namespace defaults recorded as ours still point at the old,
    /// unregistered instance (the kernel holds the pointer); setting them again moves them to
    /// the new one.
    pub fn reassert_defaults(&self) -> Result<Outcome, Error> {
        let name = &self.settings.cc_name;
        let locked = state::lock(&self.settings.state_file)?;
        let mut out = Outcome::default();
        let with_defaults: Vec<NetnsRecord> =
            locked.state.netns.iter().filter(|r| r.previous_default.is_some()).cloned().collect();
        if with_defaults.is_empty() {
            return Ok(out);
        }
        let mut allowed = sysctl::allowed()?;
        if !allowed.contains(name) {
            allowed.push(name.clone());
            sysctl::set_allowed(&allowed)?;
        }
        for r in &with_defaults {
            match Netns::open(&r.path) {
                Ok(n) if n.dev == r.dev && n.ino == r.ino => {
                    sysctl::set_default_in(&n, name)?;
                    out.defaults.push(format!("{n}: {name} (re-registered)"));
                }
                _ => out.warnings.push(format!("recorded namespace {} is gone", r.path.display())),
            }
        }
        locked.save()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
