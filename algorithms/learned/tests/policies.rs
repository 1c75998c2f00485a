//! Learned policies end to end inside the one containment controller: loading (and refusing)
//! models and manifests, inference, the deadline, NaN answers and the manifest's fallback.
//!
//! Every test here keeps the deadline enforced (it is process-wide, and tests run in parallel).

use std::path::{Path, PathBuf};

use ccp_contract::{CallError, Choice, Controller, Fault, FlowStart, Limits, Report, RttStats};
use ccp_learned::model::Runner;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models")
}

/// A copy of a test model and its manifest in a fresh directory, the manifest edited by `edit`.
fn copy_model(name: &str, edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join(format!("{name}.onnx"));
    std::fs::copy(models().join(format!("{name}.onnx")), &model).unwrap();
    let manifest = std::fs::read_to_string(models().join(format!("{name}.toml"))).unwrap();
    std::fs::write(dir.path().join(format!("{name}.toml")), edit(manifest)).unwrap();
    (dir, model)
}

fn choose(model: &Path) -> Choice {
    ccp_learned::register();
    ccp_algorithms::registry::choose(&format!("onnx:{}", model.display()), toml::Table::new(), "test")
        .unwrap_or_else(|e| panic!("{e}"))
}

fn reno() -> Choice {
    ccp_algorithms::registry::choose("reno", toml::Table::new(), "fallback").unwrap()
}

fn report(i: u64) -> Report {
    let rtt_us = 20_000 + (i % 7) * 1_000;
    Report {
        now_us: i * 20_000,
        interval_us: 20_000,
        mss_bytes: 1448,
        acked_bytes: 20 * 1448,
        acked_pkts: 20,
        rtt: Some(RttStats { min_us: rtt_us, max_us: rtt_us, last_us: rtt_us, srtt_us: rtt_us, mean_us: rtt_us, samples: 20 }),
        inflight_bytes: 20 * 1448,
        cwnd_bytes: 20 * 1448,
        send_rate_bytes_per_s: Some(1_500_000),
        recv_rate_bytes_per_s: Some(1_448_000),
        ..Report::default()
    }
}

fn start(choice: Choice) -> Controller {
    let caps = ccp_contract::Capabilities {
        max_cwnd_bytes: 1 << 30,
        max_rate_bytes_per_s: 1 << 40,
        can_clear_pacing: true,
        per_rtt_reports: true,
        cwnd_packets: None,
    };
    Controller::start(choice, reno(), caps, Limits::default(), &FlowStart::new(1448, 10 * 1448), 0).0
}

#[test]
fn the_mlp_and_the_gru_load_and_answer_deterministically() {
    for name in ["mlp", "gru"] {
        let policy = ccp_learned::load_policy(&models().join(format!("{name}.onnx"))).unwrap();
        let shape = policy.manifest.observation.shape();
        let obs: Vec<f32> = (0..policy.manifest.observation.len()).map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0).collect();
        let a = Runner::new(&policy.plan, &shape).unwrap().run(&obs).unwrap();
        let mut again = Runner::new(&policy.plan, &shape).unwrap();
        assert_eq!(again.run(&obs).unwrap(), a, "{name}: a fresh runner answers the same");
        assert_eq!(again.run(&obs).unwrap(), a, "{name}: a runner keeps no state between reports");
        let zeros = again.run(&vec![0.0; obs.len()]).unwrap();
        assert!(a.is_finite() && a != zeros, "{name}: the answer depends on the observation ({a} vs {zeros})");
    }
}

#[test]
fn onnx_names_resolve_through_the_registry_and_name_the_manifests_fallback() {
    let choice = choose(&models().join("mlp.onnx"));
    let canonical = format!("onnx:{}", models().join("mlp.onnx").canonicalize().unwrap().display());
    assert_eq!(choice.algorithm(), canonical);
    assert_eq!(choice.factory.fallback().map(|c| c.algorithm()), Some("cubic"));
    let info = ccp_algorithms::registry::find(&format!("onnx:{}/./mlp.onnx", models().display())).unwrap();
    assert_eq!(info.name, canonical, "one policy whatever the path's spelling");
    assert_eq!(info.summary, "test MLP 2x64 (random weights)");
}

#[test]
fn the_mlp_steers_a_flow_with_aurora_rule_bounded_by_its_manifest() {
    // A budget no scheduler hiccup reaches: this test is about the rule, not the cost.
    let (_dir, model) = copy_model("mlp", |m| m.replace("budget_us = 200", "budget_us = 1000000"));
    let mut c = start(choose(&model));
    let mut last = c.cwnd_bytes() as f64;
    for i in 1..=50 {
        let out = c.on_report(&report(i), i * 20_000);
        assert_eq!(out.fault, None, "report {i}");
        let now = c.cwnd_bytes() as f64;
        // One report changes the window by at most the step: ×(1 ± 0.025).
        assert!(now <= (last * 1.025).ceil() + 1.0 && now >= (last / 1.025).floor() - 1.0, "report {i}: {last} -> {now}");
        last = now;
    }
    let state = c.algorithm_state();
    assert!(state.iter().any(|v| v.name == "inference_us" && v.value > 0.0), "{state:?}");
}

#[test]
fn malformed_models_and_manifests_are_refused_naming_the_file_and_field() {
    let (dir, model) = copy_model("mlp", |m| m);
    std::fs::write(&model, b"not a protobuf at all").unwrap();
    let err = ccp_learned::load_policy(&model).err().unwrap();
    assert!(err.contains(&model.display().to_string()) && err.contains("ONNX"), "{err}");
    drop(dir);

    let (_dir, model) = copy_model("two_inputs", |m| m);
    let err = ccp_learned::load_policy(&model).err().unwrap();
    assert!(err.contains("2 inputs") && err.contains("two_inputs.onnx"), "{err}");

    // The manifest's history does not fit the model's input.
    let (_dir, model) = copy_model("mlp", |m| m.replace("history = 10", "history = 7"));
    let err = ccp_learned::load_policy(&model).err().unwrap();
    assert!(err.contains("mlp.onnx") && err.contains("[1, 42]"), "{err}");

    let (_dir, model) = copy_model("mlp", |m| m.replace("\"loss_fraction\"", "\"packet_loss\""));
    let err = ccp_learned::load_policy(&model).err().unwrap();
    assert!(err.contains("mlp.toml") && err.contains("observation.features[3].name"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("lone.onnx");
    std::fs::copy(models().join("mlp.onnx"), &lone).unwrap();
    let err = ccp_learned::load_policy(&lone).err().unwrap();
    assert!(err.contains("lone.toml") && err.contains("manifest"), "{err}");

    ccp_learned::register();
    let err = ccp_algorithms::registry::choose("onnx:/nowhere/x.onnx", toml::Table::new(), "t").err().unwrap();
    assert!(err.to_string().contains("/nowhere/x.onnx"), "{err}");
}

/// The slow model's median cost here, µs (its manifest's budget is generous enough to load it).
fn slow_cost_us() -> f64 {
    let (_dir, model) = copy_model("slow", |m| m.replace("budget_us = 200", "budget_us = 1000000"));
    ccp_learned::load_policy(&model).unwrap().load_cost_us
}

#[test]
fn a_policy_past_its_budget_keeps_the_last_window_then_hands_the_flow_to_the_manifests_fallback() {
    // A budget a fifth of what the model costs on this machine: every inference is late.
    let budget_us = ((slow_cost_us() / 5.0) as u64).max(1);
    let (_dir, model) = copy_model("slow", |m| m.replace("budget_us = 200", &format!("budget_us = {budget_us}")));
    let mut c = start(choose(&model));
    let before = c.cwnd_bytes();
    let mut fell_back = None;
    for i in 1..=10 {
        let out = c.on_report(&report(i), i * 20_000);
        if let Some(to) = out.fell_back_to {
            fell_back = Some((i, to));
            break;
        }
        // The first late answer is skipped as a possible hiccup of the host; the next are faults.
        match (i, &out.fault) {
            (1, None) => {}
            (2.., Some(Fault::Call(CallError::Late { budget_us: b, took_us }))) if *b == budget_us && *took_us > budget_us => {}
            (_, f) => panic!("report {i}: {f:?}"),
        }
        assert_eq!(c.cwnd_bytes(), before, "report {i}: a late answer changes nothing");
    }
    let limits = Limits::default();
    assert_eq!(fell_back, Some((u64::from(limits.max_faults) + 2, "cubic")), "the manifest's fallback, not the caller's reno");
    assert_eq!(c.algorithm_name(), "cubic");
    let out = c.on_report(&report(20), 400_000);
    assert_eq!(out.fault, None, "the fallback runs the flow");
}

#[test]
fn a_lone_late_answer_skips_its_report_and_is_no_fault() {
    // Alternate the slow model's budget between met and missed by swapping the flow's policy: a
    // simpler way to get one late answer among timely ones is a budget the model meets except
    // once, which no test can arrange; so this checks the rule on the algorithm directly.
    let budget_us = ((slow_cost_us() / 5.0) as u64).max(1);
    let (_dir, model) = copy_model("slow", |m| m.replace("budget_us = 200", &format!("budget_us = {budget_us}")));
    let factory = choose(&model).factory;
    let mut alg = factory.create();
    alg.try_init(&FlowStart::new(1448, 10 * 1448)).unwrap();
    assert_eq!(alg.try_on_report(&report(1)), Ok(ccp_contract::Action::default()), "the first late answer is skipped");
    assert!(
        matches!(alg.try_on_report(&report(2)), Err(CallError::Late { budget_us: b, .. }) if b == budget_us),
        "the second in a row is a fault"
    );
    let late = alg.state().into_iter().find(|v| v.name == "late_answers").unwrap().value;
    assert_eq!(late, 2.0);
}

#[test]
fn a_model_that_could_never_meet_its_budget_is_refused_when_it_loads() {
    let (_dir, model) = copy_model("slow", |m| m.replace("budget_us = 200", "budget_us = 1"));
    let err = ccp_learned::load_policy(&model).err().unwrap();
    assert!(err.contains("slow.onnx") && err.contains("budget_us"), "{err}");
}

#[test]
fn a_model_answering_nan_is_a_fault_and_the_flow_falls_back() {
    let mut c = start(choose(&models().join("nan.onnx")));
    let before = c.cwnd_bytes();
    let out = c.on_report(&report(1), 20_000);
    assert!(matches!(out.fault, Some(Fault::Call(CallError::WrongType(ref m))) if m.contains("NaN")), "{:?}", out.fault);
    assert_eq!(c.cwnd_bytes(), before);
    let fell = (2..=10).find_map(|i| c.on_report(&report(i), i * 20_000).fell_back_to);
    assert_eq!(fell, Some("cubic"));
}
