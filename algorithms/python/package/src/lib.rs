//! The `ccp_agent` wheel's extension module, `ccp_agent._ccp_agent` (maturin, `pyproject.toml`
//! here), which the package's `ccp_agent/__init__.py` re-exports:
//!
//! - the very module ccp-agent embeds (`ccp_python::api`), so an algorithm tested against the
//!   wheel sees what it sees in the agent;
//! - [`env`]: ccp-sim with one flow controlled from Python, the engine of the Gymnasium
//!   environment `ccp_agent.env.CcEnv`;
//! - [`learned`]: learned policies run as the agent runs them (`ccp_agent.learned`).

mod env;
mod learned;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "_ccp_agent")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    ccp_python::api::ccp_agent(m)?;
    // `onnx:` policies may run as the environment's cross traffic, and are what
    // `ccp_agent.learned` checks; neither may depend on how busy the host is.
    ccp_learned::register();
    ccp_learned::set_deadline(false);
    m.add_class::<env::SimCore>()?;
    m.add_function(wrap_pyfunction!(env::manifest_spaces, m)?)?;
    m.add_function(wrap_pyfunction!(learned::infer, m)?)?;
    m.add_function(wrap_pyfunction!(learned::replay, m)?)?;
    Ok(())
}
