//! The benchmark's network paths (namespaces, a veth pair, a 1 Gbit/s TBF), undone on drop,
//! and iperf3 between their ends.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

fn run(cmd: &str, args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new(cmd).args(args).stderr(Stdio::null()).status().with_context(|| format!("running {cmd}"))?;
    if !st.success() {
        bail!("{cmd} {} failed", args.join(" "));
    }
    Ok(())
}

/// Where a bulk flow runs: its namespaces and the receiver's address.
pub struct Path {
    pub label: &'static str,
    pub sender: String,
    pub receiver: String,
    pub receiver_addr: String,
    names: Vec<String>,
}

impl Path {
    /// One namespace; the flow runs over its loopback.
    pub fn loopback(tag: &str) -> anyhow::Result<Path> {
        let ns = format!("ccpshimbench-{tag}-lo");
        let _ = run("ip", &["netns", "del", &ns]);
        run("ip", &["netns", "add", &ns])?;
        let p = Path {
            label: "loopback",
            sender: ns.clone(),
            receiver: ns.clone(),
            receiver_addr: "127.0.0.1".into(),
            names: vec![ns],
        };
        run("ip", &["-n", &p.sender, "link", "set", "lo", "up"])?;
        Ok(p)
    }

    /// Two namespaces joined by a veth pair whose sender side a TBF holds at `mbps`.
    pub fn veth(tag: &str, mbps: u32) -> anyhow::Result<Path> {
        let a = format!("ccpshimbench-{tag}-a");
        let b = format!("ccpshimbench-{tag}-b");
        for n in [&a, &b] {
            let _ = run("ip", &["netns", "del", n]);
        }
        run("ip", &["netns", "add", &a])?;
        let p = Path {
            label: "veth",
            sender: a.clone(),
            receiver: b.clone(),
            receiver_addr: "10.203.0.2".into(),
            names: vec![a.clone(), b.clone()],
        };
        run("ip", &["netns", "add", &b])?;
        run("ip", &["-n", &a, "link", "add", "ccpsb0", "type", "veth", "peer", "name", "ccpsb1", "netns", &b])?;
        run("ip", &["-n", &a, "addr", "add", "10.203.0.1/24", "dev", "ccpsb0"])?;
        run("ip", &["-n", &b, "addr", "add", "10.203.0.2/24", "dev", "ccpsb1"])?;
        for (n, dev) in [(&a, "ccpsb0"), (&b, "ccpsb1")] {
            run("ip", &["-n", n, "link", "set", dev, "up"])?;
            run("ip", &["-n", n, "link", "set", "lo", "up"])?;
        }
        // HZ is 250 here: the bucket must hold at least rate/HZ (500 kB at 1 Gbit/s) and a GSO
        // frame; 20 ms of queue at the rate (2.5 MB) is far beyond the BDP of a veth.
        let burst = (u64::from(mbps) * 1_000_000 / 8 / 250 * 2).max(131_072).to_string();
        run(
            "tc",
            &[
                "-n",
                &a,
                "qdisc",
                "add",
                "dev",
                "ccpsb0",
                "root",
                "tbf",
                "rate",
                &format!("{mbps}mbit"),
                "burst",
                &burst,
                "latency",
                "20ms",
            ],
        )?;
        Ok(p)
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = run("ip", &["netns", "del", n]);
        }
    }
}

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
