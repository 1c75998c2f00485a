//! The runner's error type. Configuration errors carry the file, line and key so a user can fix
//! the experiment file without guessing; everything else says what was being done.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A problem in an experiment file (syntax, type or meaning).
    #[error("{}:{line}: {key}: {message}", file.display())]
    Config { file: PathBuf, line: usize, key: String, message: String },
    /// The machine cannot run what was asked (a missing binary, an unregistered congestion
    /// control, no root): not a bug and not the file's fault.
    #[error("{0}")]
    Unavailable(String),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("ccp-router: {0}")]
    Router(#[from] ccp_router::Error),
    /// Something failed while a run was in progress (a flow could not connect, the agent died).
    #[error("{0}")]
    Run(String),
    /// SIGINT/SIGTERM arrived.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// The `errno` of the last failed libc call, with context.
    pub fn last_os(context: impl Into<String>) -> Error {
        Error::io(context, std::io::Error::last_os_error())
    }
}
