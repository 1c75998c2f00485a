//! `ccp-test-datapath`: a test and benchmark datapath for CCP agents.
//!
//! It emulates TCP-like flows over a simple deterministic path model ([`model`]) in real time,
//! and drives the real libccp C library with them exactly like a libccp user-space datapath:
//! READY and CREATE go to the agent over a unix datagram socket, every emulated ACK is one
//! `load_primitives` + `invoke`, and the window and pacing rate libccp commands take effect on
//! the next packet. Events of interest are written to stdout as JSON Lines ([`output`]).
//!
//! It has to be its own process: libccp exports a C symbol named `log`, which captures libm's
//! `log()`, so any `f64::ln` call in a binary linking libccp crashes. Nothing in this crate
//! uses floating point, and it depends only on `libccp`, `libc` and `ccp-libccp-host` (the
//! socket to the agent, primitives, error codes and log throttling it shares with the portus
//! shim; integer-only too).
//!
//! Modules: [`cli`] (arguments), [`model`] (flows, links, the receiver), [`ccp`] (libccp glue),
//! [`guard`] (checks on agent messages before libccp sees them), [`driver`] (the real-time
//! loop), [`output`] (JSON Lines).

mod ccp;
mod cli;
mod driver;
mod guard;
mod model;
mod output;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Result<Vec<String>, _> = std::env::args_os().skip(1).map(|a| a.into_string()).collect();
    let parsed = match args {
        Ok(args) => cli::parse(args),
        Err(bad) => Err(format!("argument {bad:?} is not valid UTF-8")),
    };
    match parsed {
        Ok(cli::Command::Help) => {
            print!("{}", cli::HELP);
            ExitCode::SUCCESS
        }
        Ok(cli::Command::Run(cfg)) => match driver::run(&cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ccp-test-datapath: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("ccp-test-datapath: {e}\nTry `ccp-test-datapath --help`.");
            ExitCode::from(2)
        }
    }
}
