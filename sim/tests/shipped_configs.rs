//! Every scenario shipped in configs/sim loads, validates and builds.

use std::path::Path;

#[test]
fn shipped_scenarios_build() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5);
    for f in files {
        // Sweep files (`ccp-sim sweep`): every variant's first run loads and builds.
        if let Some(plan) = ccp_sim::sweep::read_sweep_file(&f).unwrap_or_else(|e| panic!("{e}")) {
            ccp_sim::sweep::validate(&plan).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let jobs = ccp_sim::sweep::jobs(&plan, Path::new("/nonexistent"));
            for v in &plan.variants {
                let job = jobs.iter().find(|j| j.variant == v.name).unwrap();
                let loaded = match ccp_sim::config::load(&plan.scenario, &job.overrides) {
                    Ok(l) => l,
                    Err(e) if e.to_string().contains("does not exist") && e.to_string().contains("shared/workloads") => {
                        eprintln!("skipping {} {}: {e}", f.display(), v.name);
                        continue;
                    }
                    Err(e) => panic!("{} variant {}: {e}", f.display(), v.name),
                };
                ccp_sim::Sim::new(&loaded).unwrap_or_else(|e| panic!("{} variant {}: {e}", f.display(), v.name));
            }
            continue;
        }
        let loaded = match ccp_sim::config::load(&f, &[]) {
            Ok(l) => l,
            // The random-workload scenarios read shared/workloads beside the repository.
            Err(e) if e.to_string().contains("does not exist") && e.to_string().contains("shared/workloads") => {
                eprintln!("skipping {}: {e}", f.display());
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        let sim = ccp_sim::Sim::new(&loaded).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(!sim.flows.is_empty(), "{}", f.display());
    }
}
