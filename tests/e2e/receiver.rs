//! `ccp-agent receiver enable|status|disable` as an operator runs them: on a veth device in a
//! network namespace this test creates (and deletes), with the errors an operator can meet.
//! The receiver's behaviour on real flows is tested in its crate
//! (`datapath-shims/datapaths/inigo-receiver/tests/e2e.rs`).

use std::path::Path;
use std::process::{Command, Stdio};

use ccp_integration_tests::{bin, is_root};

fn agent(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin("ccp-agent")).arg("receiver").args(args).output().expect("run ccp-agent");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A namespace with a veth pair, deleted on drop (which takes the receiver's links with it).
struct Ns(String);

impl Ns {
    fn new(name: &str) -> Ns {
        let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
        for args in [
            vec!["netns", "add", name],
            vec!["-n", name, "link", "add", "dev", "rx-a", "type", "veth", "peer", "name", "rx-b"],
            vec!["-n", name, "link", "set", "dev", "rx-a", "up"],
        ] {
            assert!(Command::new("ip").args(&args).status().unwrap().success(), "ip {}", args.join(" "));
        }
        Ns(name.to_string())
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = agent(&["disable", "--netns", &self.0, "--dev", "rx-a"]);
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn receiver_enable_status_replace_disable() {
    if !is_root() {
        eprintln!("SKIPPED receiver_enable_status_replace_disable: needs root (BPF, network namespaces)");
        return;
    }
    let ns = Ns::new(&format!("ccprx{}", std::process::id() % 100_000));
    let t = ["--netns", ns.0.as_str(), "--dev", "rx-a"];
    let with = |extra: &[&'static str], cmd: &'static str| -> Vec<String> {
        std::iter::once(cmd).chain(t.iter().copied()).chain(extra.iter().copied()).map(str::to_string).collect()
    };
    let run = |a: Vec<String>| agent(&a.iter().map(String::as_str).collect::<Vec<_>>());

    let (ok, out, err) = run(with(&[], "enable"));
    assert!(ok && out.contains("receiver enabled on rx-a") && out.contains("mode mark"), "{out}{err}");
    let (ok, out, _) = run(with(&[], "enable"));
    assert!(ok && out.contains("nothing changed"), "{out}");
    let (ok, out, _) = run(with(&["--json"], "status"));
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["settings"]["mode"].as_str(), v["settings"]["threshold_pct"].as_u64()), (Some("mark"), Some(17)));
    assert_eq!((v["ingress_attached"].as_bool(), v["egress_attached"].is_null()), (Some(true), true));
    assert!(v["counters"]["ingress"]["ce_set"].is_u64() && v["counters"]["egress"]["capped"].is_u64());

    let (ok, out, _) = run(with(&["--mode", "window", "--fairness", "20"], "enable"));
    assert!(ok && out.contains("settings replaced (mode mark -> window, fairness 10 -> 20)"), "{out}");
    let (ok, out, _) = run(with(&[], "status"));
    assert!(ok && out.contains("ingress attached, egress attached") && out.contains("capped"), "{out}");

    // What an operator can get wrong is named.
    let (ok, _, err) = agent(&["enable", "--netns", &ns.0, "--dev", "nope0"]);
    assert!(!ok && err.contains("device nope0 not found"), "{err}");
    let (ok, _, err) = agent(&["enable", "--netns", "ccprx-none", "--dev", "rx-a"]);
    assert!(!ok && err.contains("network namespace /run/netns/ccprx-none not found"), "{err}");
    let (ok, _, err) = run(with(&["--mode", "window", "--fairness", "20", "--max-conns", "64"], "enable"));
    assert!(!ok && err.contains("max-conns 16384") && err.contains("disable it first"), "{err}");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin("ccp-agent"))
        .args(["receiver", "status"])
        .args(t)
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("needs root"), "{err}");

    let pins = Path::new("/sys/fs/bpf/ccp-inigo-receiver").join(&ns.0);
    assert!(pins.join("rx-a/link-egress").exists());
    let (ok, out, _) = run(with(&[], "disable"));
    assert!(ok && out.contains("5 pin(s) removed"), "{out}");
    assert!(!pins.exists(), "{} is left", pins.display());
    let (ok, out, _) = run(with(&[], "disable"));
    assert!(ok && out.contains("nothing to do"), "{out}");
    let (ok, _, err) = run(with(&[], "status"));
    assert!(!ok && err.contains("not enabled"), "{err}");
}
