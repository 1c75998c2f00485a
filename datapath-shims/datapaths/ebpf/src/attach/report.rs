//! What an attach or detach did, as the programs that attach show it: a serialisable report
//! (`ccp-agent` sends it over its control socket) printed one line per flow on the command line,
//! and the same outcome in the log when a running datapath attaches by itself.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Outcome;
use crate::Endpoint;

/// One flow an attach or detach tried to switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchedFlow {
    pub netns: String,
    pub local: Option<String>,
    pub remote: Option<String>,
    pub from: String,
    pub to: String,
    /// Why the switch failed, if it did.
    pub error: Option<String>,
}

/// What an attach or detach did, for the caller and the log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttachReport {
    pub switched: Vec<SwitchedFlow>,
    pub failed: usize,
    pub cgroups: Vec<PathBuf>,
    pub defaults: Vec<String>,
    pub warnings: Vec<String>,
}

/// An endpoint as `ADDR:PORT`.
fn end(e: &Option<Endpoint>) -> Option<String> {
    e.map(|e| format!("{}:{}", e.addr, e.port))
}

impl From<&Outcome> for AttachReport {
    fn from(out: &Outcome) -> AttachReport {
        AttachReport {
            switched: out
                .switched
                .iter()
                .map(|s| SwitchedFlow {
                    netns: s.netns.clone(),
                    local: end(&s.local),
                    remote: end(&s.remote),
                    from: s.from.clone(),
                    to: s.to.clone(),
                    error: s.errno.map(|e| std::io::Error::from_raw_os_error(e).to_string()),
                })
                .collect(),
            failed: out.failures().count(),
            cgroups: out.cgroups.clone(),
            defaults: out.defaults.clone(),
            warnings: out.warnings.clone(),
        }
    }
}

impl AttachReport {
    /// Prints what the `verb` (attach, detach) did, a line per flow, cgroup and namespace
    /// default, warnings on stderr; an error when a flow could not be switched.
    pub fn print(&self, verb: &str) -> Result<(), String> {
        let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".to_string());
        for sw in &self.switched {
            let status = sw.error.as_deref().unwrap_or("ok");
            println!("{} {} -> {} {} -> {}: {status}", sw.netns, s(&sw.local), s(&sw.remote), sw.from, sw.to);
        }
        for c in &self.cgroups {
            println!("cgroup {}: sockops {verb}ed", c.display());
        }
        for d in &self.defaults {
            println!("default {d}");
        }
        for w in &self.warnings {
            eprintln!("warning: {w}");
        }
        let failed = self.failed;
        println!("{verb}: {} flow(s) switched, {failed} failed", self.switched.len().saturating_sub(failed));
        if failed > 0 {
            return Err(format!("{failed} flow(s) could not be switched"));
        }
        Ok(())
    }
}

impl Outcome {
    /// Logs what an attach or detach (`what`: attach, detach, restart) did.
    pub fn log(&self, what: &str) {
        let end = |e: &Option<Endpoint>| end(e).unwrap_or_else(|| "?".to_string());
        for s in &self.switched {
            match s.errno {
                None => {
                    info!(netns = %s.netns, local = end(&s.local), remote = end(&s.remote), from = %s.from, to = %s.to, "{what}: switched")
                }
                Some(e) => warn!(
                    netns = %s.netns, local = end(&s.local), remote = end(&s.remote), from = %s.from, to = %s.to,
                    error = %std::io::Error::from_raw_os_error(e), "{what}: could not switch"
                ),
            }
        }
        for c in &self.cgroups {
            info!(cgroup = %c.display(), "{what}: sockops");
        }
        for d in &self.defaults {
            info!(default = %d, "{what}: namespace default");
        }
        for w in &self.warnings {
            warn!("{what}: {w}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attach::Switched;

    #[test]
    fn a_report_names_each_flow_and_counts_the_failures() {
        let flow = |errno| Switched {
            netns: "net:[1]".into(),
            cookie: 9,
            local: Some(Endpoint { addr: "10.0.0.1".parse().unwrap(), port: 40_000 }),
            remote: None,
            from: "cubic".into(),
            to: "ccp".into(),
            errno,
        };
        let out = Outcome { switched: vec![flow(None), flow(Some(libc::EPERM))], ..Outcome::default() };
        let r = AttachReport::from(&out);
        assert_eq!(r.failed, 1);
        assert_eq!((r.switched[0].local.as_deref(), r.switched[0].remote.as_deref()), (Some("10.0.0.1:40000"), None));
        assert_eq!(r.switched[1].error, Some(std::io::Error::from_raw_os_error(libc::EPERM).to_string()));
        assert_eq!(r.print("attach"), Err("1 flow(s) could not be switched".to_string()));
        assert_eq!(AttachReport::default().print("detach"), Ok(()));
        let back: AttachReport = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r, "the report crosses the control socket whole");
    }
}
