//! The command line by which a libccp datapath reaches its agent, the same for every program
//! that hosts libccp (the portus shim, the DPDK datapath): where the sockets are, how ours is
//! addressed, and what READY and CREATE say. The datapath's own socket name (`--ipc-name`) is
//! each program's, with its own default.

use std::path::PathBuf;

use crate::ipc::{Bind, Endpoints};

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The socket directory shared with the agent (portus's convention: /tmp/ccp; portus 0.7
    /// cannot use another).
    #[arg(long, default_value = "/tmp/ccp", value_name = "DIR")]
    pub ipc_dir: PathBuf,

    /// The agent's socket name inside --ipc-dir (ccp-agent's `unix` datapath and portus bind
    /// `portus`).
    #[arg(long, default_value = "portus", value_name = "NAME")]
    pub agent: String,

    /// How the agent sees our address: `relative` to --ipc-dir (portus 0.7, which replies to
    /// /tmp/ccp/<address>) or `absolute` (portus 0.9, which replies to the address as given).
    /// ccp-agent takes either.
    #[arg(long, value_enum, default_value_t = Bind::Relative)]
    pub bind: Bind,

    /// Datapath id sent in READY.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub datapath_id: u32,

    /// Algorithm name sent in every CREATE (at most 63 bytes): ccp-agent's rules pick by it, and
    /// portus when it runs several. Default: none.
    #[arg(long, value_name = "NAME", value_parser = parse_cong_alg)]
    pub cong_alg: Option<String>,
}

impl AgentArgs {
    /// The sockets, ours named `name` inside --ipc-dir.
    pub fn endpoints(&self, name: &str) -> Endpoints {
        Endpoints { dir: self.ipc_dir.clone(), name: name.to_string(), agent: self.agent.clone(), bind: self.bind }
    }
}

fn parse_cong_alg(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 63 || s.contains('\0') {
        return Err("an algorithm name is 1-63 bytes without NUL".into());
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    #[test]
    fn defaults_follow_portus_and_bad_names_are_refused() {
        let a = Cli::parse_from(["x"]).agent;
        let ep = a.endpoints("me");
        assert_eq!(
            (ep.dir, ep.name.as_str(), ep.agent.as_str(), ep.bind),
            (PathBuf::from("/tmp/ccp"), "me", "portus", Bind::Relative)
        );
        assert_eq!((a.datapath_id, a.cong_alg), (0, None));
        assert!(Cli::try_parse_from(["x", "--cong-alg", ""]).is_err());
        assert!(Cli::try_parse_from(["x", "--cong-alg", &"a".repeat(64)]).is_err());
        assert_eq!(Cli::parse_from(["x", "--cong-alg", "reno"]).agent.cong_alg.as_deref(), Some("reno"));
    }
}
