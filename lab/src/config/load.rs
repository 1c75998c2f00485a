//! Reading an experiment file: parse, validate, and report any error with the file, the line
//! and the key. Syntax and type errors come from the TOML parser (its byte span gives the line,
//! and the line gives the key); semantic errors (an unknown scheme kind, a negative rate, both a
//! rate and a share) are located on the key's own line by [`TomlIndex`].

use std::path::{Path, PathBuf};

use super::toml_index::TomlIndex;
use super::validate::{is_safe_name, validate};
use super::Experiment;
use crate::error::{Error, Result};

/// A loaded, validated experiment and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub experiment: Experiment,
    /// The file, as given.
    pub path: PathBuf,
    /// Base for relative paths inside the file (its directory).
    pub dir: PathBuf,
    pub name: String,
    /// The file's text (copied into the output directory for provenance).
    pub text: String,
}

/// Reads, parses and validates an experiment file.
pub fn load(path: &Path) -> Result<Loaded> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    parse(path, &text)
}

/// Parses and validates experiment text (`path` names it in errors and anchors relative paths).
pub fn parse(path: &Path, text: &str) -> Result<Loaded> {
    let index = TomlIndex::new(text);
    let mut experiment: Experiment = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        Error::Config { file: path.to_path_buf(), line, key: index.path_at(line), message: e.message().trim().to_string() }
    })?;
    let fail = |key: String, message: String| Error::Config { file: path.to_path_buf(), line: index.locate(&key), key, message };
    // A Python algorithm's path (`agent:py:file.py:Class`) is relative to this file's directory.
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for (i, s) in experiment.schemes.iter_mut().enumerate() {
        s.cc = crate::scheme::absolute_agent_cc(&s.cc, &base).map_err(|m| fail(format!("schemes[{i}].cc"), m))?;
        for (g, cc) in s.flow_cc.iter_mut() {
            if cc.starts_with(crate::scheme::STRUCT_OPS) {
                *cc = crate::scheme::absolute_agent_cc(cc, &base).map_err(|m| fail(format!("schemes[{i}].flow_cc.{g}"), m))?;
            }
        }
    }
    validate(&experiment).map_err(|(k, m)| fail(k, m))?;
    let name = match &experiment.name {
        Some(n) => n.clone(),
        None => path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "experiment".into()),
    };
    if !is_safe_name(&name) {
        return Err(fail("name".into(), format!("{name:?}: use letters, digits, '-', '_', '.' or '+' (it names directories)")));
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Loaded { experiment, path: path.to_path_buf(), dir, name, text: text.to_string() })
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QdiscSpec;

    const MINIMAL: &str = r#"
duration_s = 2
[network]
rtt_ms = 20
buffer_pkts = 100
[[links]]
kind = "fixed"
rate_mbps = 12
[[schemes]]
name = "cubic"
cc = "kernel:cubic"
"#;

    fn err(text: &str) -> (usize, String, String) {
        match parse(Path::new("x.toml"), text) {
            Err(Error::Config { line, key, message, .. }) => (line, key, message),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn a_fixed_link_may_have_its_own_rtt_but_not_with_delay_classes() {
        let text = MINIMAL.replace("rate_mbps = 12", "rate_mbps = 12\nrtt_ms = 80");
        let l = parse(Path::new("dir/min.toml"), &text).unwrap();
        let links = crate::link::resolve(&l.experiment.links, Path::new("."), Path::new(".")).unwrap();
        assert_eq!(crate::run::plan::rtt_ms(&l, &links[0]), 80.0);
        assert_eq!(crate::run::plan::buffer_pkts(&l, &links[0]), 100);
        let plain = parse(Path::new("dir/min.toml"), MINIMAL).unwrap();
        let links = crate::link::resolve(&plain.experiment.links, Path::new("."), Path::new(".")).unwrap();
        assert_eq!(crate::run::plan::rtt_ms(&plain, &links[0]), 20.0);
        let (line, key, _) = err(&text.replace("rtt_ms = 80", "rtt_ms = -1"));
        assert_eq!((line, key.as_str()), (9, "links[0].rtt_ms"));
        let classes = text.replace("buffer_pkts = 100", "buffer_pkts = 100\nclass_delays = [\"dport=5201:down=5\"]");
        let (_, key, message) = err(&classes);
        assert_eq!(key, "links[0].rtt_ms");
        assert!(message.contains("class_delays"), "{message}");
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let l = parse(Path::new("dir/min.toml"), MINIMAL).unwrap();
        assert_eq!(l.name, "min");
        assert_eq!(l.dir, Path::new("dir"));
        let x = &l.experiment;
        assert_eq!((x.repetitions, x.sample_interval_ms), (1, 100));
        assert_eq!(x.scenarios.len(), 1);
        assert_eq!(x.scenarios[0].name, "solo");
        assert_eq!(x.flows[0].count, 1);
        assert!(matches!(x.schemes[0].qdisc, QdiscSpec::Droptail));
        assert_eq!(x.agent.cc_name, None);
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let text = MINIMAL.replace("cc = \"kernel:cubic\"", "cc = \"kernel:cubic\"\ncolour = 3");
        let (line, key, message) = err(&text);
        assert_eq!(line, 12);
        assert_eq!(key, "schemes[0].colour");
        assert!(message.contains("colour"), "{message}");
    }

    #[test]
    fn a_module_parameter_outside_the_congestion_controls_is_refused_where_it_is_given() {
        let ok = MINIMAL
            .replace("cc = \"kernel:cubic\"", "cc = \"kernel:cubic\"\nmodule_params = { \"tcp_cubic.hystart_detect\" = 2 }");
        let l = parse(Path::new("x.toml"), &ok).unwrap();
        assert_eq!(l.experiment.schemes[0].module_params.len(), 1);
        let (line, key, message) = err(&ok.replace("tcp_cubic.hystart_detect", "kvm.halt_poll_ns"));
        assert_eq!((line, key.as_str()), (12, "schemes[0].module_params"));
        assert!(message.contains("kvm.halt_poll_ns") && message.contains("tcp_<module>"), "{message}");
    }

    #[test]
    fn type_error_names_line_and_key() {
        let (line, key, message) = err(&MINIMAL.replace("rtt_ms = 20", "rtt_ms = \"twenty\""));
        assert_eq!((line, key.as_str()), (4, "network.rtt_ms"));
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn semantic_errors_are_located() {
        let (line, key, _) = err(&MINIMAL.replace("rate_mbps = 12", "rate_mbps = -1"));
        assert_eq!((line, key.as_str()), (8, "links[0].rate_mbps"));
        let (line, key, m) = err(&MINIMAL.replace("kernel:cubic", "kernel:cu bic"));
        assert_eq!((line, key.as_str()), (11, "schemes[0].cc"));
        assert!(m.contains("congestion control"), "{m}");
        let (_, key, m) = err(&MINIMAL.replace("kernel:cubic", "magic:cubic"));
        assert_eq!(key, "schemes[0].cc");
        assert!(m.contains("kernel:") && m.contains("agent:"), "{m}");
    }

    #[test]
    fn inline_table_errors_point_at_their_key() {
        let text = format!("{MINIMAL}qdisc = {{ kind = \"codel\", interval_ms = 0 }}\n");
        let (line, key, m) = err(&text);
        assert_eq!(line, 12);
        assert_eq!(key, "schemes[0].qdisc.interval_ms");
        assert!(m.contains("> 0"), "{m}");
    }

    #[test]
    fn hulls_phantom_queue_and_pacer_load_and_are_checked_against_the_links() {
        let hull = format!("{MINIMAL}qdisc = {{ kind = \"phantom\" }}\npacer = {{ beta_per_s = 64.0 }}\n");
        let l = parse(Path::new("x.toml"), &hull).unwrap();
        let scheme = crate::scheme::Scheme::from_spec(&l.experiment.schemes[0]).unwrap();
        assert!(matches!(scheme.qdisc, ccp_router::QdiscKind::Phantom { threshold_bytes, .. } if threshold_bytes == 1000.0));
        let (p, per_flow) = scheme.pacer.expect("the pacer");
        assert_eq!((p.beta_per_s, p.depth_bytes, p.tick_us), (64.0, 3000, 16.0), "the testbed's constants but β");
        assert!(!per_flow, "one pacer for the sender unless asked");
        // 16 µs of 10 Gbit/s is 20 KB: the testbed's 3 KB bucket could not pass the link.
        let (_, key, m) = err(&hull.replace("rate_mbps = 12", "rate_mbps = 10000"));
        assert_eq!(key, "schemes[0].pacer.depth_bytes");
        assert!(m.contains("links[0]"), "{m}");
        let (_, key, _) = err(&hull.replace("beta_per_s = 64.0", "associate_probability = 2.0"));
        assert_eq!(key, "schemes[0].pacer.associate_probability");
        let (_, key, _) = err(&hull.replace("kind = \"phantom\"", "kind = \"phantom\", gamma = 1.5"));
        assert_eq!(key, "schemes[0].qdisc.gamma");
    }

    #[test]
    fn nested_arrays_are_numbered() {
        let text = format!(
            "{MINIMAL}[[scenarios]]\nname = \"a\"\n[[scenarios]]\nname = \"b\"\n[[scenarios.cross]]\nkind = \"cbr\"\nrate_mbps = 1\nshare = 0.5\n"
        );
        let (line, key, m) = err(&text);
        assert_eq!(key, "scenarios[1].cross[0]");
        assert_eq!(line, 16);
        assert!(m.contains("exactly one"), "{m}");
    }

    #[test]
    fn per_flow_rtt_is_refused_with_a_reason() {
        let text = format!("{MINIMAL}[[scenarios]]\nname = \"x\"\n[[scenarios.cross]]\nkind = \"tcp\"\nextra_rtt_ms = 40\n");
        let (line, key, m) = err(&text);
        assert_eq!((line, key.as_str()), (16, "scenarios[0].cross[0].extra_rtt_ms"));
        assert!(m.contains("per-flow delay"), "{m}");
    }

    #[test]
    fn class_delays_are_parsed_by_the_router_and_located() {
        let good = MINIMAL.replace("buffer_pkts = 100", "buffer_pkts = 100\nclass_delays = [\"dport=5202:down=1,up=1\"]");
        let l = parse(Path::new("x.toml"), &good).unwrap();
        assert_eq!(l.experiment.network.class_delays, ["dport=5202:down=1,up=1"]);
        let bad =
            MINIMAL.replace("buffer_pkts = 100", "buffer_pkts = 100\nclass_delays = [\"dport=5201-5210:1\", \"dport=5205:2\"]");
        let (line, key, m) = err(&bad);
        assert_eq!((line, key.as_str()), (6, "network.class_delays"));
        assert!(m.contains("overlap"), "{m}");
    }

    #[test]
    fn kernel_schemes_refuse_agent_keys() {
        let text = format!("{MINIMAL}params = {{ g = 1 }}\n");
        let (_, key, m) = err(&text);
        assert_eq!(key, "schemes[0].params");
        assert!(m.contains("agent"), "{m}");
    }

    #[test]
    fn quic_schemes_refuse_tcp_settings_and_quinns_own_take_no_params() {
        let quic = |cc: &str, extra: &str| MINIMAL.replace("cc = \"kernel:cubic\"", &format!("cc = \"{cc}\"\n{extra}"));
        for (extra, field) in [
            ("receiver_ce_echo = true", "receiver_ce_echo"),
            ("receiver_cc = \"reno\"", "receiver_cc"),
            ("agent_args = [\"-v\"]", "agent_args"),
            ("tcp_usec_ts = true", "tcp_usec_ts"),
        ] {
            let (_, key, m) = err(&quic("quic:cubic", extra));
            assert_eq!(key, format!("schemes[0].{field}"));
            assert!(m.contains("QUIC"), "{m}");
        }
        let (_, key, m) = err(&quic("quic-native:cubic", "params = { beta = 0.7 }"));
        assert_eq!((key.as_str(), m.contains("no parameters")), ("schemes[0].params", true), "{m}");
        for ok in ["quic:cubic", "quic-embedded:cubic"] {
            parse(Path::new("x.toml"), &quic(ok, "params = { beta = 0.7 }")).unwrap();
        }
        let (_, key, _) = err(&quic("quic-native:copa", ""));
        assert_eq!(key, "schemes[0].cc");
    }

    #[test]
    fn receiver_cc_and_ce_echo_exclude_each_other() {
        let text = format!("{MINIMAL}receiver_cc = \"reno\"\nreceiver_ce_echo = true\n");
        let (_, key, m) = err(&text);
        assert_eq!(key, "schemes[0].receiver_ce_echo");
        assert!(m.contains("not both"), "{m}");
        let ok = parse(Path::new("x.toml"), &format!("{MINIMAL}receiver_ce_echo = true\n")).unwrap();
        assert!(ok.experiment.schemes[0].receiver_ce_echo);
        let (_, key, _) = err(&format!("{MINIMAL}[agent]\ncc_name = \"much-too-long-a-name\"\n"));
        assert_eq!(key, "agent.cc_name");
    }

    #[test]
    fn receivers_are_checked() {
        let ok = parse(
            Path::new("x.toml"),
            &format!(
                "{MINIMAL}receiver = {{ kind = \"inigo\", mode = \"window\", threshold_pct = 17, rfd_source = \"tsecr\" }}\n"
            ),
        )
        .unwrap();
        assert!(
            matches!(&ok.experiment.schemes[0].receiver, Some(crate::config::ReceiverSpec::Inigo { mode: Some(m), .. }) if m == "window")
        );
        let (line, key, m) = err(&format!("{MINIMAL}receiver = {{ kind = \"inigo\", mode = \"mark\" }}\n"));
        assert_eq!((line, key.as_str()), (12, "schemes[0].receiver.mode"));
        assert!(m.contains("tcp_ecn"), "{m}");
        let marking = format!(
            "{MINIMAL}sender_sysctls = {{ \"net.ipv4.tcp_ecn\" = 1 }}\nreceiver = {{ kind = \"inigo\", mode = \"mark\", clear_ce = true }}\n"
        );
        parse(Path::new("x.toml"), &marking).unwrap();
        let (_, key, _) = err(&format!("{MINIMAL}receiver = {{ kind = \"inigo\", clear_ce = true }}\n"));
        assert_eq!(key, "schemes[0].receiver.clear_ce");
        let (_, key, m) = err(&format!("{MINIMAL}receiver = {{ kind = \"inigo\", rfd_source = \"psychic\" }}\n"));
        assert_eq!(key, "schemes[0].receiver.rfd_source");
        assert!(m.contains("arrival"), "{m}");
        let (_, key, _) = err(&format!("{MINIMAL}receiver = {{ kind = \"inigo\", threshold_pct = 0 }}\n"));
        assert_eq!(key, "schemes[0].receiver.threshold_pct");
        let (_, _, m) = err(&format!("{MINIMAL}receiver = {{ kind = \"rfc9999\" }}\n"));
        assert!(m.contains("rfc9999"), "{m}");
    }

    #[test]
    fn an_agent_python_scheme_is_relative_to_the_experiment_file() {
        let dir = std::env::temp_dir().join(format!("ccp-lab-load-py-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mine.py"), "class Mine: pass\n").unwrap();
        let text = MINIMAL.replace("cc = \"kernel:cubic\"", "cc = \"agent:py:mine.py:Mine\"");
        let l = parse(&dir.join("x.toml"), &text).unwrap();
        let want = format!("agent:py:{}:Mine", dir.canonicalize().unwrap().join("mine.py").display());
        assert_eq!(l.experiment.schemes[0].cc, want);
        let scheme = crate::scheme::Scheme::from_spec(&l.experiment.schemes[0]).unwrap();
        assert_eq!(scheme.cc, crate::scheme::Cc::Agent(want["agent:".len()..].to_string()), "what --algorithm gets");
        let text = MINIMAL.replace("cc = \"kernel:cubic\"", "cc = \"agent:py:missing.py:Mine\"");
        match parse(&dir.join("x.toml"), &text) {
            Err(Error::Config { key, message, line, .. }) => {
                assert_eq!(key, "schemes[0].cc");
                assert_eq!(line, text.lines().position(|l| l.contains("missing.py")).unwrap() + 1);
                assert!(message.contains("missing.py"), "{message}");
            }
            other => panic!("expected a config error, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn qcn_sized_flows_group_cc_and_agent_placeholders() {
        let text = MINIMAL.replace("cc = \"kernel:cubic\"", "cc = \"agent:annulus\"")
            + "qdisc = { kind = \"qcn\", qeq_pkts = 20, w = 8, sample = \"bytes:15000\", quantization = \"standard\", ecn_k_pkts = 20 }\n\
               flow_cc = { \"0\" = \"bbr\" }\n\
               agent_args = [\"--cnm-listen\", \"{sender_addr}:7470\", \"--cnm-netns\", \"{sender_ns}\"]\n\
               [[flows]]\ncount = 1\n[[flows]]\ncount = 4\nstart_s = 1\nbytes = 2_000_000\n";
        let l = parse(Path::new("x.toml"), &text).unwrap();
        let s = &l.experiment.schemes[0];
        assert!(matches!(&s.qdisc, QdiscSpec::Qcn { w, ecn_k_pkts: Some(20), .. } if *w == 8.0), "{:?}", s.qdisc);
        assert_eq!(l.experiment.flows[1].bytes, Some(2_000_000));
        let scheme = crate::scheme::Scheme::from_spec(s).unwrap();
        assert_eq!((scheme.flow_cc("ccpx", 0), scheme.flow_cc("ccpx", 1)), ("bbr", "ccpx"));
        assert!(scheme.describe().contains("qcn Q_eq 30000 B w 8 sample bytes:15000 quantization standard, ECN K"));
        assert!(crate::scheme::uses_placeholders(&scheme.agent_args));
        let names = crate::scheme::RunNames {
            sender_ns: "p-snd".into(),
            receiver_ns: "p-rcv".into(),
            sender_addr: "10.77.0.1".into(),
            receiver_addr: "10.77.0.2".into(),
            router_addr: "10.77.0.254".into(),
        };
        assert_eq!(
            crate::scheme::expand_agent_args(&scheme.agent_args, &names),
            ["--cnm-listen", "10.77.0.1:7470", "--cnm-netns", "p-snd"]
        );
        assert!(!crate::scheme::uses_placeholders(&["--trace".to_string()]));
        // Errors name the key.
        let (_, key, m) = err(&text.replace("{sender_ns}", "{sender_netns}"));
        assert_eq!(key, "schemes[0].agent_args");
        assert!(m.contains("{sender_netns}") && m.contains("{sender_ns}"), "{m}");
        let (_, key, _) = err(&text.replace("bytes:15000", "bytes:0"));
        assert_eq!(key, "schemes[0].qdisc.sample");
        let (_, key, _) = err(&text.replace("\"standard\"", "\"fancy\""));
        assert_eq!(key, "schemes[0].qdisc.quantization");
        let (_, key, _) = err(&text.replace("w = 8", "w = -1"));
        assert_eq!(key, "schemes[0].qdisc.w");
        let (_, key, _) = err(&text.replace("ecn_k_pkts = 20", "ecn_k_pkts = 0"));
        assert_eq!(key, "schemes[0].qdisc.ecn_k_pkts");
        let (_, key, _) = err(&text.replace("bytes = 2_000_000", "bytes = 0"));
        assert_eq!(key, "flows[1].bytes");
        let (_, key, _) = err(&text.replace("\"0\" = \"bbr\"", "first = \"bbr\""));
        assert_eq!(key, "schemes[0].flow_cc");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let (line, _, _) = err("duration_s = 2\n[network\n");
        assert_eq!(line, 2);
    }
}
