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
