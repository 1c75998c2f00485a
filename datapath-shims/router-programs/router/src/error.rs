//! The router's error type: every message names what to fix (a file and line, a parameter, a
//! command that failed and what it printed).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call or file operation failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// An external command (`ip`) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command { command: String, status: String, stderr: String },
    /// A malformed trace file.
    #[error("{}:{line}: {message}", path.display())]
    Trace { path: PathBuf, line: usize, message: String },
    /// An impossible or inconsistent parameter.
    #[error("{param}: {message}")]
    Param { param: String, message: String },
    /// The namespace prefix is in use or its namespaces belong to someone else.
    #[error("{0}")]
    Topology(String),
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    pub fn param(param: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Param { param: param.into(), message: message.into() }
    }

    /// The last OS error, with context.
    pub fn last_os(context: impl Into<String>) -> Error {
        Error::io(context, std::io::Error::last_os_error())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
