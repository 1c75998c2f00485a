//! The algorithm descriptor: what a registry lists about one algorithm and how it is built.

use std::sync::Arc;

use crate::algorithm::AlgorithmFactory;
use crate::params::{ParamError, ParamSpec, Params};

/// One algorithm as a registry, `ccp-agent algorithms` and the configuration see it.
pub struct AlgorithmInfo {
    pub name: &'static str,
    /// One line: what it is.
    pub summary: &'static str,
    /// The paper, RFC or spec section it implements.
    pub reference: &'static str,
    pub params: &'static [ParamSpec],
    /// Builds a factory from validated parameters; may reject cross-field inconsistencies.
    pub build: fn(&Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError>,
}

impl AlgorithmInfo {
    /// Validates `table` and builds a factory.
    pub fn configure(&self, table: &toml::Table) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
        let params = Params::parse(self.name, self.params, table)?;
        (self.build)(&params)
    }
}
