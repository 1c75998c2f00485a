//! The check every binary that links libccp needs: that its machine code never calls `log`.
//!
//! libccp exports a C function named `log`, which the linker binds every call of libm's `log()`
//! to: `f64::ln` anywhere in such a binary jumps into libccp and crashes. Each of those binaries
//! has a test that runs [`calls_to_log`] on itself, so a dependency that starts using `ln` is
//! caught there rather than in production.

use std::path::Path;
use std::process::Command;

/// What `objdump -d` found in `bin`: the call and jump instructions to `log`. `Err` when objdump
/// cannot run (the test says so and skips) or the binary does not link libccp's `log` at all.
pub fn calls_to_log(bin: &Path) -> Result<Vec<String>, String> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(bin)
        .output()
        .map_err(|e| format!("objdump (binutils) is not available: {e}"))?;
    if !out.status.success() {
        return Err(format!("objdump failed on {}: {}", bin.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.contains("<log>:") {
        return Err(format!("{}: libccp's `log` is not linked in (or the binary has no symbols)", bin.display()));
    }
    Ok(text
        .lines()
        .filter(|l| (l.contains("call") || l.contains("jmp")) && (l.ends_with("<log>") || l.ends_with("<log@plt>")))
        .map(str::to_string)
        .collect())
}
