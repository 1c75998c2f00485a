//! libccp exports a C function named `log`, which the linker binds every call of libm's `log()`
//! to: `f64::ln` anywhere in a binary that links libccp jumps into libccp and crashes. This
//! checks the shim's machine code for calls to `log`, so a dependency that starts using `ln` is
//! caught here rather than in production.

use std::process::Command;

#[test]
fn the_shim_never_calls_log() {
    let bin = env!("CARGO_BIN_EXE_ccp-libccp-shim");
    let out = match Command::new("objdump").args(["-d", "--no-show-raw-insn", bin]).output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => panic!("objdump failed on {bin}: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => {
            eprintln!("SKIPPED the_shim_never_calls_log: objdump (binutils) is not available: {e}");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("<log>:"), "libccp's `log` is linked in (or the binary has no symbols)");
    let calls: Vec<&str> = text
        .lines()
        .filter(|l| (l.contains("call") || l.contains("jmp")) && (l.ends_with("<log>") || l.ends_with("<log@plt>")))
        .collect();
    assert!(calls.is_empty(), "calls to `log` (an f64::ln somewhere?):\n{}", calls.join("\n"));
}
