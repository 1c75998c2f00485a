//! Per-flow algorithm selection: the first rule whose every condition matches the flow wins;
//! flows no rule matches get the default.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::datapath::FlowInfo;
use ccp_contract::Choice;

/// Conditions on a flow; all that are set must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matcher {
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// Either end's port.
    pub port: Option<u16>,
    pub src_addr: Option<IpNet>,
    pub dst_addr: Option<IpNet>,
    /// Either end's address.
    pub addr: Option<IpNet>,
    /// The algorithm name the datapath asked for.
    pub cong_alg: Option<String>,
    /// The flow's cgroup path, or an ancestor of it.
    pub cgroup: Option<String>,
}

fn ip_in(net: &IpNet, ip: IpAddr) -> bool {
    net.contains(&ip)
}

fn cgroup_within(flow: &str, rule: &str) -> bool {
    let rule = rule.trim_end_matches('/');
    flow == rule || flow.strip_prefix(rule).is_some_and(|rest| rest.starts_with('/')) || rule.is_empty()
}

impl Matcher {
    pub fn is_empty(&self) -> bool {
        *self == Matcher::default()
    }

    pub fn matches(&self, f: &FlowInfo) -> bool {
        let src = f.src;
        let dst = f.dst;
        let port_ok = |want: Option<u16>, end: Option<(IpAddr, u16)>| want.is_none_or(|p| end.is_some_and(|(_, q)| q == p));
        let addr_ok = |want: &Option<IpNet>, end: Option<(IpAddr, u16)>| {
            want.as_ref().is_none_or(|n| end.is_some_and(|(a, _)| ip_in(n, a)))
        };
        port_ok(self.src_port, src)
            && port_ok(self.dst_port, dst)
            && self.port.is_none_or(|p| src.is_some_and(|(_, q)| q == p) || dst.is_some_and(|(_, q)| q == p))
            && addr_ok(&self.src_addr, src)
            && addr_ok(&self.dst_addr, dst)
            && self.addr.as_ref().is_none_or(|n| src.is_some_and(|(a, _)| ip_in(n, a)) || dst.is_some_and(|(a, _)| ip_in(n, a)))
            && self.cong_alg.as_ref().is_none_or(|c| f.cong_alg.as_deref() == Some(c.as_str()))
            && self.cgroup.as_ref().is_none_or(|c| f.cgroup.as_deref().is_some_and(|fc| cgroup_within(fc, c)))
    }
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub matcher: Matcher,
    pub choice: Choice,
}

/// The agent's algorithm policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub default: Choice,
    pub rules: Vec<Rule>,
    /// Replaces an algorithm that keeps faulting.
    pub fallback: Choice,
}

impl Policy {
    pub fn select(&self, flow: &FlowInfo) -> &Choice {
        self.rules.iter().find(|r| r.matcher.matches(flow)).map_or(&self.default, |r| &r.choice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(name: &str, origin: &str) -> Choice {
        ccp_algorithms::registry::choose(name, toml::Table::new(), origin).unwrap()
    }

    fn flow(src: &str, sport: u16, dst: &str, dport: u16) -> FlowInfo {
        FlowInfo { src: Some((src.parse().unwrap(), sport)), dst: Some((dst.parse().unwrap(), dport)), ..FlowInfo::default() }
    }

    fn policy() -> Policy {
        Policy {
            default: choice("reno", "default"),
            rules: vec![
                Rule {
                    name: "dc".into(),
                    matcher: Matcher {
                        dst_addr: Some("10.1.0.0/16".parse().unwrap()),
                        dst_port: Some(5201),
                        ..Matcher::default()
                    },
                    choice: choice("dctcp", "dc"),
                },
                Rule {
                    name: "any-9000".into(),
                    matcher: Matcher { port: Some(9000), ..Matcher::default() },
                    choice: choice("cubic", "any-9000"),
                },
                Rule {
                    name: "hint".into(),
                    matcher: Matcher { cong_alg: Some("cubic".into()), ..Matcher::default() },
                    choice: choice("cubic", "hint"),
                },
                Rule {
                    name: "batch".into(),
                    matcher: Matcher { cgroup: Some("/sys/fs/cgroup/batch".into()), ..Matcher::default() },
                    choice: choice("cubic", "batch"),
                },
            ],
            fallback: choice("reno", "fallback"),
        }
    }

    #[test]
    fn all_conditions_must_hold() {
        let p = policy();
        assert_eq!(p.select(&flow("10.0.0.1", 40000, "10.1.2.3", 5201)).origin, "dc");
        assert_eq!(p.select(&flow("10.0.0.1", 40000, "10.2.2.3", 5201)).origin, "default");
        assert_eq!(p.select(&flow("10.0.0.1", 40000, "10.1.2.3", 5202)).origin, "default");
    }

    #[test]
    fn either_end_port() {
        let p = policy();
        assert_eq!(p.select(&flow("1.1.1.1", 9000, "2.2.2.2", 1)).origin, "any-9000");
        assert_eq!(p.select(&flow("1.1.1.1", 1, "2.2.2.2", 9000)).origin, "any-9000");
    }

    #[test]
    fn first_match_wins_and_hint_matches() {
        let p = policy();
        let mut f = flow("1.1.1.1", 9000, "2.2.2.2", 1);
        f.cong_alg = Some("cubic".into());
        assert_eq!(p.select(&f).origin, "any-9000");
        let mut f = flow("1.1.1.1", 1, "2.2.2.2", 1);
        f.cong_alg = Some("cubic".into());
        assert_eq!(p.select(&f).origin, "hint");
    }

    #[test]
    fn cgroup_matches_descendants_only() {
        let p = policy();
        let mut f = FlowInfo { cgroup: Some("/sys/fs/cgroup/batch/job1".into()), ..FlowInfo::default() };
        assert_eq!(p.select(&f).origin, "batch");
        f.cgroup = Some("/sys/fs/cgroup/batchy".into());
        assert_eq!(p.select(&f).origin, "default");
        f.cgroup = None;
        assert_eq!(p.select(&f).origin, "default");
    }

    #[test]
    fn unknown_endpoints_never_match_address_rules() {
        let p = policy();
        assert_eq!(p.select(&FlowInfo::default()).origin, "default");
    }
}
