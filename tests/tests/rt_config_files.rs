//! Every file under rt-config/ loads with the loader it is written for: runtime
//! configs, budgets, EtherCAT simulator configs and policy manifests.

use chunkrt_tests::repo_root;
use std::path::{Path, PathBuf};

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            toml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
}

#[test]
fn every_file_in_rt_config_loads_with_its_loader() {
    let mut files = vec![];
    toml_files(&repo_root().join("rt-config"), &mut files);
    let mut kinds = [0usize; 4];
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let in_policies = p.parent().is_some_and(|d| d.ends_with("policies"));
        let result = if in_policies {
            kinds[3] += 1;
            std::fs::read_to_string(p)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    chunkrt_policy::manifest2::check_any_manifest(p, &text)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
        } else if name.starts_with("budget") {
            kinds[1] += 1;
            chunkrt_telemetry::budget::Budget::load(p)
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else if name.starts_with("ecsim") {
            kinds[2] += 1;
            chunkrt_ecsim::SimConfig::load(p)
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            kinds[0] += 1;
            chunkrt_config::Config::load(p)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        if let Err(e) = result {
            panic!("{}: {e}", p.display());
        }
    }
    assert!(kinds.iter().all(|k| *k >= 1), "kinds found: {kinds:?}");
}
