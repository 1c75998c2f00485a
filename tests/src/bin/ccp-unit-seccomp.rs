//! Runs a program under the system call filter of the shipped systemd unit, as systemd would.
//!
//!   ccp-unit-seccomp [--without CALL]... -- PROGRAM [ARG]...
//!
//! Reads `SystemCallFilter=`, `SystemCallErrorNumber=`, `SystemCallArchitectures=` and
//! `NoNewPrivileges=` from the unit compiled into ccp-agent (`ccp_agent::install`), expands the
//! groups with this machine's `systemd-analyze`, loads the seccomp filter into itself and executes
//! PROGRAM, which inherits it (`ccp_integration_tests::syscall_filter`). `--without CALL` takes a
//! call the unit allows off the list: a negative control, to show the filter is in force.

use std::os::unix::process::CommandExt;

use ccp_integration_tests::syscall_filter::{Groups, UnitFilter};

fn fail(what: &str) -> ! {
    eprintln!("ccp-unit-seccomp: {what}");
    std::process::exit(127)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        fail("usage: ccp-unit-seccomp [--without CALL]... -- PROGRAM [ARG]...")
    };
    let (options, command) = (&args[..split], &args[split + 1..]);
    let Some((program, program_args)) = command.split_first() else { fail("no PROGRAM after --") };
    let groups = Groups::of_this_machine().unwrap_or_else(|e| fail(&e));
    let unit = ccp_agent::install::unit_text(&ccp_agent::install::InstallPaths::default());
    let mut filter = UnitFilter::of_unit(&unit, &groups).unwrap_or_else(|e| fail(&e));
    let mut it = options.iter();
    while let Some(option) = it.next() {
        match (option.as_str(), it.next()) {
            ("--without", Some(call)) => filter.without(call).unwrap_or_else(|e| fail(&e)),
            _ => fail(&format!("unknown option {option}")),
        }
    }
    let native = filter.load().unwrap_or_else(|e| fail(&e));
    let refusal = filter.errno.map_or("kill the process".to_string(), |e| format!("fail with errno {e}"));
    eprintln!(
        "ccp-unit-seccomp: SystemCallFilter={} ({native} calls on this architecture); others {refusal}",
        filter.written.join(" ")
    );
    let err = std::process::Command::new(program).args(program_args).exec();
    fail(&format!("executing {program}: {err}"))
}
