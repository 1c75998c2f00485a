//! The `ccp_agent` extension module, built into a wheel by maturin (`pyproject.toml` here): the
//! very module ccp-agent embeds (`ccp_python::api`), so an algorithm tested against the wheel
//! sees what it sees in the agent.

pub use ccp_python::api::ccp_agent;
