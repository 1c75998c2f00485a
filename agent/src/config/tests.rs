use super::*;
use crate::datapath::ebpf::EbpfSettings;
use crate::datapath::Selection;
use ccp_contract::ReportPolicy;

fn parse(text: &str) -> Result<AgentConfig, ConfigError> {
    AgentConfig::parse("test.toml", text, &Overrides::default())
}

#[test]
fn empty_file_gives_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c.datapath.kind, "unix");
    assert!(c.datapath.sections.is_empty(), "each adapter fills in its own defaults");
    assert_eq!(c.policy.default.algorithm(), "reno");
    assert_eq!(c.policy.fallback.algorithm(), "reno");
    // The default datapath (unix, libccp) reports once per RTT, as portus's agents have it.
    assert_eq!(c.limits.default_report, ReportPolicy::PerRtt { rtts: 1.0 });
    assert!(c.policy.rules.is_empty());
}

#[test]
fn shipped_config_is_valid() {
    let text = include_str!("../../../configs/agent.toml");
    let c = parse(text).unwrap();
    assert_eq!(c.policy.rules.len(), 2);
    assert_eq!(c.policy.rules[0].choice.algorithm(), "dctcp");
    assert_eq!(c.policy.rules[0].name, "datacenter");
}

#[test]
fn overrides_win() {
    let ov = Overrides {
        algorithm: Some("cubic".into()),
        datapath: Some("netlink".into()),
        ipc_name: Some("other".into()),
        report_interval_us: Some(20_000),
        ..Overrides::default()
    };
    let c = AgentConfig::parse("t", "[default]\nalgorithm = \"reno\"\n", &ov).unwrap();
    assert_eq!(c.policy.default.algorithm(), "cubic");
    assert_eq!(c.datapath.kind, "netlink");
    assert_eq!(c.datapath.section("unix").get("name"), Some(&toml::Value::String("other".into())));
    assert_eq!(c.limits.default_report, ReportPolicy::EveryUs(20_000));
}

#[test]
fn command_line_params_are_validated() {
    let ov = Overrides {
        algorithm: Some("reno".into()),
        params: vec![("beta".into(), toml::Value::Float(2.0))],
        ..Overrides::default()
    };
    let e = AgentConfig::parse("t", "", &ov).unwrap_err();
    assert!(e.to_string().contains("beta") && e.to_string().contains("out of range"), "{e}");
}

#[test]
fn unknown_key_points_at_line() {
    let e = parse("[datapath]\nkind = \"unix\"\nbogus = 1\n").unwrap_err();
    assert_eq!(e.location, "test.toml:3", "{e}");
    assert!(e.message.contains("bogus"), "{e}");
}

#[test]
fn bad_datapath_kind() {
    let e = parse("[datapath]\nkind = \"carrier-pigeon\"\n").unwrap_err();
    assert_eq!(e.location, "test.toml:2", "{e}");
    assert!(e.message.contains("known: unix, netlink, ebpf"), "{e}");
    let e = parse("[datapath.pigeon]\nx = 1\n").unwrap_err();
    assert!(e.message.contains("[datapath.pigeon]") && e.message.contains("unknown datapath"), "{e}");
}

#[test]
fn each_datapath_section_is_checked_by_its_adapter() {
    let e = parse("[datapath.unix]\ndri = \"/tmp/x\"\n").unwrap_err();
    assert!(e.message.contains("[datapath.unix]") && e.message.contains("dri"), "{e}");
    let e = parse("[datapath.netlink]\naddress_order = \"middle\"\n").unwrap_err();
    assert!(e.message.contains("[datapath.netlink]"), "{e}");
    // A section for a kind not in use is still checked, so a typo never waits for a switch.
    let e = parse("[datapath]\nkind = \"unix\"\n[datapath.ebpf]\nring_bytes = 5\n").unwrap_err();
    assert!(e.message.contains("ring_bytes"), "{e}");
}

#[test]
fn per_rtt_reports_become_the_default_policy() {
    let c = parse("[datapath]\nkind = \"ebpf\"\n[reports]\nper_rtt = true\n").unwrap();
    assert_eq!(c.limits.default_report, ReportPolicy::PerRtt { rtts: 1.0 });
}

#[test]
fn the_report_policy_defaults_to_the_datapaths_unless_an_interval_is_given() {
    let policy = |text: &str| parse(text).unwrap().limits.default_report;
    assert_eq!(policy("[datapath]\nkind = \"unix\"\n"), ReportPolicy::PerRtt { rtts: 1.0 });
    assert_eq!(policy("[datapath]\nkind = \"netlink\"\n"), ReportPolicy::PerRtt { rtts: 1.0 });
    assert_eq!(policy("[datapath]\nkind = \"ebpf\"\n"), ReportPolicy::EveryUs(10_000));
    assert_eq!(policy("[reports]\ninterval_us = 20000\n"), ReportPolicy::EveryUs(20_000), "an interval is a request");
    assert_eq!(policy("[reports]\nper_rtt = false\n"), ReportPolicy::EveryUs(10_000));
    let ov = Overrides { report_interval_us: Some(5_000), ..Overrides::default() };
    let c = AgentConfig::parse("t", "", &ov).unwrap();
    assert_eq!(c.limits.default_report, ReportPolicy::EveryUs(5_000), "so is --report-interval-us");
    let ov = Overrides { datapath: Some("ebpf".into()), ..Overrides::default() };
    let c = AgentConfig::parse("t", "", &ov).unwrap();
    assert_eq!(c.limits.default_report, ReportPolicy::EveryUs(10_000), "--datapath decides the default");
}

#[test]
fn unknown_algorithm_points_at_line() {
    let e = parse("\n[default]\nalgorithm = \"nope\"\n").unwrap_err();
    assert_eq!(e.location, "test.toml:3", "{e}");
    assert!(e.message.contains("unknown algorithm") && e.message.contains("reno"), "{e}");
}

#[test]
fn bad_rule_param_names_rule_field_and_line() {
    let text = "\n\n[[rules]]\nname = \"dc\"\nmatch = { port = 1 }\nalgorithm = \"dctcp\"\nparams = { g = 7.0 }\n";
    let e = parse(text).unwrap_err();
    assert_eq!(e.location, "test.toml:7", "{e}");
    assert!(e.message.contains("rule \"dc\"") && e.message.contains("\"g\""), "{e}");
}

#[test]
fn bad_algorithm_table_param() {
    let e = parse("[algorithms.cubic]\nbeta = \"high\"\n").unwrap_err();
    assert!(e.message.contains("beta") && e.message.contains("number"), "{e}");
    let e = parse("[algorithms.nosuch]\nx = 1\n").unwrap_err();
    assert!(e.message.contains("unknown algorithm"), "{e}");
}

#[test]
fn rule_params_override_algorithm_table() {
    let text = "[algorithms.reno]\nbeta = 0.5\ninit_cwnd_pkts = 4\n[[rules]]\nmatch = { port = 80 }\nalgorithm = \"reno\"\nparams = { beta = 0.7 }\n";
    let c = parse(text).unwrap();
    assert_eq!(c.policy.rules[0].name, "rules[0]");
    // The instance starts at init_cwnd_pkts (4) from the algorithm table...
    let mut alg = c.policy.rules[0].choice.factory.create();
    let a = alg.init(&ccp_contract::FlowStart::new(1000, 0));
    assert_eq!(a.cwnd_bytes, Some(4000.0));
}

#[test]
fn empty_match_rejected() {
    let e = parse("[[rules]]\nmatch = {}\nalgorithm = \"reno\"\n").unwrap_err();
    assert!(e.message.contains("no conditions"), "{e}");
}

#[test]
fn bad_prefix_rejected() {
    let e = parse("[[rules]]\nmatch = { dst_addr = \"10.0.0.0/99\" }\nalgorithm = \"reno\"\n").unwrap_err();
    assert_eq!(e.location, "test.toml:2");
    assert!(e.message.contains("dst_addr"), "{e}");
    let c = parse("[[rules]]\nmatch = { addr = \"192.168.1.7\" }\nalgorithm = \"reno\"\n").unwrap();
    assert!(c.policy.rules[0].matcher.addr.is_some());
}

#[test]
fn report_interval_bounds() {
    let e = parse("[reports]\ninterval_us = 5\n").unwrap_err();
    assert_eq!(e.location, "test.toml:2", "{e}");
}

#[test]
fn missing_file_is_a_clear_error() {
    let e = AgentConfig::load(Path::new("/nonexistent/agent.toml"), &Overrides::default()).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/agent.toml") && e.to_string().contains("cannot read"), "{e}");
}

#[test]
fn a_file_others_can_write_is_refused_before_it_is_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, "[default]\nalgorithm = \"cubic\"\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cfg = AgentConfig::load(&path, &Overrides::default()).expect("0644 of our own is read");
    assert_eq!(cfg.policy.default.algorithm(), "cubic");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = AgentConfig::load(&path, &Overrides::default()).unwrap_err();
    assert_eq!(e.location, path.display().to_string());
    let text = e.to_string();
    assert!(text.contains("world-writable") && text.contains("mode 0666") && text.contains("owner uid"), "{text}");
    assert!(text.contains(&format!("chmod go-w {}", path.display())), "{text}");
}

#[test]
fn cnm_is_off_unless_listen_is_set() {
    assert!(parse("").unwrap().cnm.is_none());
    assert!(parse("[cnm]\nallow_from = [\"10.77.0.254\"]\n").unwrap().cnm.is_none(), "a list alone listens nowhere");
    let c = parse("[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = [\"10.77.0.254\", \"10.1.0.0/16\"]\nnetns = \"lab-snd\"\n")
        .unwrap()
        .cnm
        .unwrap();
    assert_eq!(c.listen, "0.0.0.0:7470".parse().unwrap());
    assert_eq!(c.allow_from, vec!["10.77.0.254/32".parse().unwrap(), "10.1.0.0/16".parse().unwrap()]);
    assert_eq!(c.netns, Some(PathBuf::from("/run/netns/lab-snd")));
    assert_eq!((c.max_per_pass, c.recv_buffer_bytes), (crate::cnm::DEFAULT_MAX_PER_PASS, crate::cnm::DEFAULT_RECV_BUFFER_BYTES));
    let c = parse("[cnm]\nlisten = \"[::]:7470\"\nallow_from = [\"::1\"]\nnetns = \"/proc/1/ns/net\"\n").unwrap().cnm.unwrap();
    assert_eq!(c.netns, Some(PathBuf::from("/proc/1/ns/net")));
}

#[test]
fn cnm_needs_an_allow_list_and_says_why() {
    let cases = [("[cnm]\nlisten = \"0.0.0.0:7470\"\n", 2), ("[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = []\n", 3)];
    for (text, line) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.location, format!("test.toml:{line}"), "{e}");
        assert!(e.message.contains("cnm.allow_from") && e.message.contains("forged CNM"), "{e}");
    }
}

#[test]
fn bad_cnm_values_name_key_and_line() {
    let e = parse("[cnm]\nlisten = \"7470\"\nallow_from = [\"10.0.0.1\"]\n").unwrap_err();
    assert_eq!(e.location, "test.toml:2", "{e}");
    assert!(e.message.contains("cnm.listen") && e.message.contains("0.0.0.0:7470"), "{e}");
    let e = parse("[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = [\"10.0.0.1\", \"10.0.0.0/40\"]\n").unwrap_err();
    assert_eq!(e.location, "test.toml:3", "{e}");
    assert!(e.message.contains("cnm.allow_from[1]"), "{e}");
    let e = parse("[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = [\"10.0.0.1\"]\n\nmax_per_pass = 0\n").unwrap_err();
    assert_eq!(e.location, "test.toml:5", "{e}");
    assert!(e.message.contains("cnm.max_per_pass = 0 is out of range"), "{e}");
    let e = parse("[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = [\"10.0.0.1\"]\nrecv_buffer_bytes = 1\n").unwrap_err();
    assert!(e.message.contains("cnm.recv_buffer_bytes"), "{e}");
    let e = parse("[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = [\"10.0.0.1\"]\nnetns = \"\"\n").unwrap_err();
    assert!(e.message.contains("cnm.netns is empty"), "{e}");
    let e = parse("[cnm]\nlisen = \"0.0.0.0:7470\"\n").unwrap_err();
    assert!(e.message.contains("lisen"), "{e}");
}

#[test]
fn cnm_command_line_overrides_the_file() {
    let ov = Overrides {
        cnm_listen: Some("127.0.0.1:7471".into()),
        cnm_allow_from: vec!["127.0.0.2".into()],
        cnm_netns: Some("snd".into()),
        ..Overrides::default()
    };
    let c = AgentConfig::parse("t", "[cnm]\nlisten = \"0.0.0.0:7470\"\nallow_from = [\"10.0.0.1\"]\n", &ov).unwrap().cnm.unwrap();
    assert_eq!(c.listen, "127.0.0.1:7471".parse().unwrap());
    assert_eq!(c.allow_from, vec!["127.0.0.2/32".parse().unwrap()]);
    assert_eq!(c.netns, Some(PathBuf::from("/run/netns/snd")));
    let e =
        AgentConfig::parse("t", "", &Overrides { cnm_listen: Some("0.0.0.0:7470".into()), ..Overrides::default() }).unwrap_err();
    assert!(e.message.contains("--cnm-allow-from"), "{e}");
}

#[test]
fn flow_limits_are_read_and_bounded() {
    let c = parse("[safety]\nmax_flows = 1000\nmax_flows_per_uid = 10\n").unwrap();
    assert_eq!(c.flow_limits.max_flows, 1000);
    assert_eq!(c.flow_limits.max_flows_per_uid, 10);
    assert_eq!(c.flow_limits.max_flows_per_netns, FlowLimits::default().max_flows_per_netns);
    let e = parse("[safety]\nmax_flows_per_netns = 0\n").unwrap_err();
    assert!(e.message.contains("max_flows_per_netns = 0 is out of range"), "{e}");
}

#[test]
fn a_pacing_floor_that_would_let_a_flow_stall_is_refused() {
    for bad in [0u64, 1, 1499] {
        let e = parse(&format!("[safety]\nmin_pacing_rate_bytes_per_s = {bad}\n")).unwrap_err();
        assert!(e.message.contains("min_pacing_rate_bytes_per_s"), "{e}");
    }
    assert!(parse("[safety]\nmin_pacing_rate_bytes_per_s = 1500\n").is_ok());
    assert!(parse("[safety]\nmin_pacing_rate_bytes_per_s = 2000000000\n").is_err());
}

/// The example Reno class, copied into `dir` (whose files a configuration there names relatively).
fn python_reno_in(dir: &Path) -> PathBuf {
    ccp_python::register();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/python/examples/reno.py");
    let f = dir.join("my_reno.py");
    std::fs::copy(example, &f).unwrap();
    f.canonicalize().unwrap()
}

#[test]
fn python_algorithms_in_a_config_are_relative_to_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = python_reno_in(dir.path());
    let name = format!("py:{}:Reno", file.display());
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        "[default]\nalgorithm = \"py:my_reno.py:Reno\"\n\
         [algorithms.\"py:./my_reno.py:Reno\"]\nbeta = 0.7\n\
         [[rules]]\nname = \"web\"\nmatch = { dst_port = 80 }\nalgorithm = \"py:my_reno.py:Reno\"\nparams = { init_cwnd_pkts = 20 }\n",
    )
    .unwrap();
    // Loaded from elsewhere: the working directory plays no part.
    let c = AgentConfig::load(&cfg, &Overrides::default()).unwrap();
    assert_eq!(c.policy.default.algorithm(), name);
    assert_eq!(c.policy.default.params.get("beta"), Some(&toml::Value::Float(0.7)), "the table applies to both spellings");
    assert_eq!(c.policy.rules[0].choice.algorithm(), name);
    assert_eq!(c.policy.rules[0].choice.params.get("init_cwnd_pkts"), Some(&toml::Value::Integer(20)));
    assert!(c.algorithm_params.contains_key(&name), "ctl swap finds the table by the absolute name");

    std::fs::write(&cfg, "[default]\nalgorithm = \"py:missing.py:Reno\"\n").unwrap();
    let e = AgentConfig::load(&cfg, &Overrides::default()).unwrap_err().to_string();
    assert!(e.contains(&format!("{}:2", cfg.display())) && e.contains("missing.py"), "file, line and path: {e}");
    assert!(e.contains(&dir.path().canonicalize().unwrap().display().to_string()), "says what it is relative to: {e}");
}

#[test]
fn learned_policies_in_a_config_are_relative_to_its_folder() {
    ccp_learned::register();
    let dir = tempfile::tempdir().unwrap();
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/learned/tests/models");
    std::fs::create_dir(dir.path().join("p")).unwrap();
    for f in ["mlp.onnx", "mlp.toml"] {
        std::fs::copy(models.join(f), dir.path().join("p").join(f)).unwrap();
    }
    let name = format!("onnx:{}", dir.path().join("p/mlp.onnx").canonicalize().unwrap().display());
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        "[default]\nalgorithm = \"onnx:p/mlp.onnx\"\n\
         [[rules]]\nname = \"web\"\nmatch = { dst_port = 80 }\nalgorithm = \"onnx:./p/mlp.onnx\"\n",
    )
    .unwrap();
    let c = AgentConfig::load(&cfg, &Overrides::default()).unwrap();
    assert_eq!(c.policy.default.algorithm(), name);
    assert_eq!(c.policy.rules[0].choice.algorithm(), name, "one policy whatever the spelling");

    std::fs::write(&cfg, "[default]\nalgorithm = \"onnx:p/missing.onnx\"\n").unwrap();
    let e = AgentConfig::load(&cfg, &Overrides::default()).unwrap_err().to_string();
    assert!(e.contains(&format!("{}:2", cfg.display())) && e.contains("missing.onnx"), "file, line and path: {e}");
}

#[test]
fn a_python_class_declared_parameter_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("py:{}:Reno", python_reno_in(dir.path()).display());
    let with = |params: Vec<(String, toml::Value)>| {
        let ov = Overrides { algorithm: Some(name.clone()), params, ..Overrides::default() };
        AgentConfig::defaults(&ov)
    };
    let c = with(vec![("beta".into(), toml::Value::Float(0.8))]).unwrap();
    assert_eq!(c.policy.default.algorithm(), name);
    assert_eq!(c.policy.default.params.get("beta"), Some(&toml::Value::Float(0.8)));
    // Declared `Param("beta", 0.5, min=0.01, max=0.99)`: out of range is refused, naming it.
    let e = with(vec![("beta".into(), toml::Value::Float(1.5))]).unwrap_err().to_string();
    assert!(e.contains("default algorithm") && e.contains("\"beta\" = 1.5 is out of range"), "{e}");
    let e = with(vec![("no_such".into(), toml::Value::Integer(1))]).unwrap_err().to_string();
    assert!(e.contains("no_such") && e.contains("init_cwnd_pkts"), "unknown, listing the known ones: {e}");
}

#[test]
fn ebpf_section_defaults_and_overrides() {
    let c = parse("[datapath]\nkind = \"ebpf\"\n").unwrap();
    assert_eq!(c.datapath.kind, "ebpf");
    let e = EbpfSettings::from_section(&c.datapath.section("ebpf")).unwrap();
    assert_eq!(e.name, "ccp");
    assert_eq!(e.pin_dir, PathBuf::from("/sys/fs/bpf/ccp-agent"));
    assert_eq!(e.fallback, ccp_ebpf::Fallback::Cubic);
    assert_eq!(e.realtime_priority, 10);
    assert_eq!(e.attach, Selection::default(), "nothing attached by default");
    let c = parse(
        "[datapath.ebpf]\nname = \"ccp2\"\nfallback = \"reno\"\n\
         [datapath.ebpf.attach]\nports = [5201]\naddrs = [\"10.0.0.0/8\"]\ncgroups = [\"test\"]\n",
    )
    .unwrap();
    let e = EbpfSettings::from_section(&c.datapath.section("ebpf")).unwrap();
    assert_eq!((e.name.as_str(), e.fallback), ("ccp2", ccp_ebpf::Fallback::Reno));
    assert_eq!(e.attach.ports, vec![5201]);
    assert_eq!(e.attach.cgroups, vec![PathBuf::from("test")]);
    let e = parse("[datapath.ebpf]\nreport_per_rtt = true\n").unwrap_err();
    assert!(e.message.contains("report_per_rtt"), "moved to [reports] per_rtt: {e}");
}

#[test]
fn bad_ebpf_settings_are_refused() {
    for (text, what) in [
        ("[datapath.ebpf]\nname = \"a-name-much-too-long\"\n", "name"),
        ("[datapath.ebpf]\nring_bytes = 5000\n", "ring_bytes"),
        ("[datapath.ebpf]\nsilence_timeout_ms = 0\n", "silence_timeout_ms"),
        ("[datapath.ebpf]\nconsume_interval_us = 1\n", "consume_interval_us"),
        ("[datapath.ebpf]\nfallback = \"bbr\"\n", "fallback"),
        ("[datapath.ebpf]\nrealtime_priority = 100\n", "realtime_priority"),
        ("[datapath.ebpf.attach]\naddrs = [\"nonsense\"]\n", "attach"),
        ("[datapath.ebpf.attach]\nports = [1,2,3,4,5,6,7,8,9]\n", "attach"),
    ] {
        let e = parse(text).expect_err(what);
        assert!(e.to_string().contains(what) || e.to_string().contains("unknown variant"), "{what}: {e}");
    }
}
