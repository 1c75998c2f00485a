//! What an attach or detach covers, as one serialisable value: built from `ccp-agent attach`'s
//! and `ccp-agent ctl attach`'s flags, carried over the control socket, and turned into
//! `ccp-ebpf`'s `Attach`/`Detach` wherever the work is done.

use std::path::PathBuf;

use ccp_ebpf::attach::{Attach, Detach, Filter, Namespaces, Outcome};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Selection {
    /// Every flow.
    pub all: bool,
    /// Flows with either end on one of these ports.
    pub ports: Vec<u16>,
    /// Flows with either end in one of these addresses or prefixes.
    pub addrs: Vec<String>,
    /// Namespace paths (/run/netns/NAME, /proc/PID/ns/net); none: the agent's own.
    pub netns: Vec<PathBuf>,
    /// Every namespace that can be named.
    pub all_netns: bool,
    /// cgroup v2 directories: attach puts their new flows on the congestion control; detach
    /// removes it from them.
    pub cgroups: Vec<PathBuf>,
    /// Attach only: make the congestion control the namespaces' default.
    pub set_default: bool,
}

impl Selection {
    fn filter(&self) -> Result<Option<Filter>, String> {
        let nets = self.addrs.iter().map(|a| a.parse()).collect::<Result<Vec<_>, _>>()?;
        let f = Filter { all: self.all, ports: self.ports.clone(), nets };
        if !f.selects_something() {
            return Ok(None);
        }
        f.validate()?;
        Ok(Some(f))
    }

    fn namespaces(&self) -> Namespaces {
        Namespaces { paths: self.netns.clone(), all: self.all_netns }
    }

    pub fn attach(&self) -> Result<Attach, String> {
        let existing = self.filter()?;
        Ok(Attach {
            new_flows: existing.clone().unwrap_or_else(Filter::all),
            existing,
            namespaces: self.namespaces(),
            cgroups: self.cgroups.clone(),
            set_default: self.set_default,
        })
    }

    pub fn detach(&self) -> Result<Detach, String> {
        if self.set_default {
            return Err("set_default applies to attach only".into());
        }
        Ok(Detach { filter: self.filter()?, namespaces: self.namespaces(), cgroups: self.cgroups.clone() })
    }
}

/// What an attach or detach did, for the control socket's caller.
pub fn outcome_json(out: &Outcome) -> serde_json::Value {
    let end = |e: &Option<ccp_ebpf::Endpoint>| e.map(|e| format!("{}:{}", e.addr, e.port));
    let switched: Vec<_> = out
        .switched
        .iter()
        .map(|s| {
            serde_json::json!({
                "netns": s.netns,
                "local": end(&s.local),
                "remote": end(&s.remote),
                "from": s.from,
                "to": s.to,
                "error": s.errno.map(|e| std::io::Error::from_raw_os_error(e).to_string()),
            })
        })
        .collect();
    serde_json::json!({
        "switched": switched,
        "failed": out.failures().count(),
        "cgroups": out.cgroups,
        "defaults": out.defaults,
        "warnings": out.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_become_attach_and_detach() {
        let s = Selection { ports: vec![5201], addrs: vec!["10.0.0.0/8".into()], ..Selection::default() };
        let a = s.attach().unwrap();
        assert_eq!(a.existing.as_ref().unwrap().ports, vec![5201]);
        assert_eq!(a.new_flows.ports, vec![5201]);
        let d = s.detach().unwrap();
        assert!(d.filter.is_some());
        // Detaching everything is the empty selection.
        assert!(Selection::default().detach().unwrap().filter.is_none());
    }

    #[test]
    fn bad_input_is_an_error_naming_it() {
        let s = Selection { addrs: vec!["10.0.0/99".into()], ..Selection::default() };
        assert!(s.attach().is_err());
        let s = Selection { set_default: true, ..Selection::default() };
        assert!(s.detach().unwrap_err().contains("attach only"));
        assert!(serde_json::from_value::<Selection>(serde_json::json!({"prots": [1]})).is_err());
    }
}
