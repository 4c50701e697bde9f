//! Edges between the workspace's crates, from `cargo metadata`: no cycle, counting
//! dev-dependencies (a test of crate A that builds crate B which depends on A is a
//! cycle: ARCHITECTURE.md's layering would no longer hold), and none of the banned
//! normal edges (an optional dependency, behind a feature, is not a normal edge).

use anyhow::{Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Normal (shipped) dependencies that may not exist: (from, to, why).
pub const BANNED: &[(&str, &str, &str)] = &[(
    "chunkrt-ethercat",
    "chunkrt-ecsim",
    "the drive simulator would ship in every production build; make it a dev-dependency",
)];

pub fn check(repo: &Path) -> Result<Vec<String>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo)
        .output()
        .context("running cargo metadata")?;
    anyhow::ensure!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).context("cargo metadata's JSON")?;
    let packages = meta["packages"].as_array().context("no packages")?;
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    // (from, to) -> kinds ("normal", "dev", "build").
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for p in packages {
        let from = p["name"].as_str().unwrap_or_default();
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let to = d["name"].as_str().unwrap_or_default();
            if members.contains(to) && to != from {
                let mut kind = d["kind"].as_str().unwrap_or("normal").to_string();
                // An optional dependency is behind a feature (none of ours is default).
                if kind == "normal" && d["optional"].as_bool() == Some(true) {
                    kind = "optional".to_string();
                }
                edges
                    .entry((from.to_string(), to.to_string()))
                    .or_default()
                    .insert(kind);
            }
        }
    }
    let mut findings = Vec::new();
    for (from, to, why) in BANNED {
        if let Some(kinds) = edges.get(&(from.to_string(), to.to_string())) {
            if kinds.contains("normal") {
                findings.push(format!("crates: {from} depends on {to}: {why}"));
            }
        }
    }
    // A cycle: an edge a -> b with b reaching a; each cycle once.
    let mut seen: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for ((a, b), kinds) in &edges {
        if let Some(path) = reach(&edges, b, a) {
            let members: BTreeSet<String> = path.iter().cloned().collect();
            if !seen.insert(members) {
                continue;
            }
            let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
            findings.push(format!(
                "crates: cycle {a} -({})-> {}",
                kinds.join("/"),
                path.join(" -> ")
            ));
        }
    }
    Ok(findings)
}

/// A path of crates from `from` to `to`, if any.
fn reach(
    edges: &BTreeMap<(String, String), BTreeSet<String>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut prev: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from.to_string()]);
    let mut seen = BTreeSet::from([from.to_string()]);
    while let Some(n) = queue.pop_front() {
        if n == to {
            let mut path = vec![n.clone()];
            let mut cur = n;
            while let Some(p) = prev.get(&cur) {
                path.push(p.clone());
                cur = p.clone();
            }
            path.reverse();
            return Some(path);
        }
        for (a, b) in edges.keys() {
            if *a == n && seen.insert(b.clone()) {
                prev.insert(b.clone(), n.clone());
                queue.push_back(b.clone());
            }
        }
    }
    None
}
