//! The network paths a benchmark's bulk flows run over: network namespaces, and a veth pair
//! between two of them, optionally held at a rate by a TBF. Everything is removed on drop.

use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// Runs a tool (`ip`, `tc`) and fails if it does.
fn run(cmd: &str, args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new(cmd).args(args).stderr(Stdio::null()).status().with_context(|| format!("running {cmd}"))?;
    if !st.success() {
        bail!("{cmd} {} failed", args.join(" "));
    }
    Ok(())
}

/// How one benchmark names what it creates, so two benchmarks running at once never share a
/// namespace, device or subnet.
#[derive(Debug, Clone, Copy)]
pub struct Naming {
    /// Namespaces are `<netns>-<tag>-lo`, `<netns>-<tag>-a` and `<netns>-<tag>-b`.
    pub netns: &'static str,
    /// The veth pair is `<dev>0` (sender) and `<dev>1` (receiver).
    pub dev: &'static str,
    /// The veth pair's /24: `<subnet>.1` sends, `<subnet>.2` receives.
    pub subnet: &'static str,
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
    pub fn loopback(naming: &Naming, tag: &str) -> anyhow::Result<Path> {
        let ns = format!("{}-{tag}-lo", naming.netns);
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

    /// Two namespaces joined by a veth pair, whose sender side a TBF holds at `rate_mbps` if
    /// given.
    pub fn veth(naming: &Naming, tag: &str, rate_mbps: Option<u32>) -> anyhow::Result<Path> {
        let a = format!("{}-{tag}-a", naming.netns);
        let b = format!("{}-{tag}-b", naming.netns);
        let (dev_a, dev_b) = (format!("{}0", naming.dev), format!("{}1", naming.dev));
        let (addr_a, addr_b) = (format!("{}.1", naming.subnet), format!("{}.2", naming.subnet));
        for n in [&a, &b] {
            let _ = run("ip", &["netns", "del", n]);
        }
        run("ip", &["netns", "add", &a])?;
        // From here on, drop removes what exists.
        let p = Path {
            label: "veth",
            sender: a.clone(),
            receiver: b.clone(),
            receiver_addr: addr_b.clone(),
            names: vec![a.clone(), b.clone()],
        };
        run("ip", &["netns", "add", &b])?;
        run("ip", &["-n", &a, "link", "add", &dev_a, "type", "veth", "peer", "name", &dev_b, "netns", &b])?;
        run("ip", &["-n", &a, "addr", "add", &format!("{addr_a}/24"), "dev", &dev_a])?;
        run("ip", &["-n", &b, "addr", "add", &format!("{addr_b}/24"), "dev", &dev_b])?;
        for (n, dev) in [(&a, &dev_a), (&b, &dev_b)] {
            run("ip", &["-n", n, "link", "set", dev, "up"])?;
            run("ip", &["-n", n, "link", "set", "lo", "up"])?;
        }
        if let Some(mbps) = rate_mbps {
            // HZ is 250 here: the bucket must hold at least rate/HZ (500 kB at 1 Gbit/s) and a
            // GSO frame; 20 ms of queue at the rate (2.5 MB) is far beyond the BDP of a veth.
            let burst = (u64::from(mbps) * 1_000_000 / 8 / 250 * 2).max(131_072).to_string();
            let rate = format!("{mbps}mbit");
            run(
                "tc",
                &["-n", &a, "qdisc", "add", "dev", &dev_a, "root", "tbf", "rate", &rate, "burst", &burst, "latency", "20ms"],
            )?;
        }
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
