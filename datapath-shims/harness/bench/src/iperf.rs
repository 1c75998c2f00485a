//! iperf3 bulk flows between a path's namespaces.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::net::Path;

/// `iperf3 -s` in the receiver's namespace, killed on drop.
pub struct Server(Child);

impl Server {
    pub fn start(path: &Path, port: u16) -> anyhow::Result<Server> {
        let child = Command::new("ip")
            .args(["netns", "exec", &path.receiver, "iperf3", "-s", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting iperf3 -s (scripts/setup.sh installs iperf3)")?;
        // iperf3 has no readiness signal; a client that comes too early is refused.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Server(child))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One bulk flow on congestion control `cc` for `seconds`: the receiver's goodput, Gbit/s.
pub fn bulk(path: &Path, port: u16, cc: &str, seconds: u32) -> anyhow::Result<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", &path.sender, "iperf3", "-c", &path.receiver_addr, "-p", &port.to_string()])
        .args(["-t", &seconds.to_string(), "-J", "-C", cc])
        .stdin(Stdio::null())
        .output()
        .context("running iperf3 -c")?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("iperf3 JSON")?;
    if !v["error"].is_null() {
        bail!("iperf3 with {cc}: {}", v["error"]);
    }
    Ok(v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9)
}
