//! Import circles between the files of a crate: file A uses (by a `use` or a path in
//! its code) an item defined in file B, and B, through any chain of such uses, uses
//! one defined in A. A `mod` declaration is not a use, nor is a re-export (`pub use`,
//! the module's façade); test modules are left out.

use crate::modtree::{Module, Tree};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;

/// The crates checked: every crate's `src` (library and binary roots).
fn roots(repo: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(repo.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.push(repo.join("tests"));
    dirs.push(repo.join("xtask"));
    dirs.sort();
    for d in dirs {
        for f in ["src/lib.rs", "src/main.rs"] {
            if d.join(f).is_file() {
                out.push(d.join(f));
            }
        }
    }
    Ok(out)
}

struct Resolver<'a> {
    t: &'a Tree,
}

const MAX_DEPTH: usize = 16;

impl Resolver<'_> {
    fn module(&self, m: usize) -> &Module {
        &self.t.modules[m]
    }

    /// The module at an absolute path, and the segments past it.
    fn walk<'p>(&self, abs: &'p [String]) -> (usize, &'p [String]) {
        let mut m = 0;
        for (i, s) in abs.iter().enumerate() {
            match self.module(m).children.get(s) {
                Some(&c) => m = c,
                None => return (m, &abs[i..]),
            }
        }
        (m, &[])
    }

    /// `path` as written in module `m`, made absolute; None when it names something
    /// outside the crate (another crate, std, `Self::…`, a local item's variant).
    fn absolute(&self, m: usize, path: &[String], depth: usize) -> Option<Vec<String>> {
        let here = &self.module(m).path;
        let first = path.first()?;
        match first.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" => Some([here.as_slice(), &path[1..]].concat()),
            "super" => {
                let ups = path.iter().take_while(|s| *s == "super").count();
                let keep = here.len().checked_sub(ups)?;
                Some([&here[..keep], &path[ups..]].concat())
            }
            _ if self.module(m).children.contains_key(first) => {
                Some([here.as_slice(), path].concat())
            }
            _ if depth < MAX_DEPTH => {
                let b = self
                    .module(m)
                    .uses
                    .iter()
                    .find(|b| b.name.as_deref() == Some(first.as_str()))?;
                let head = self.absolute(m, &b.path, depth + 1)?;
                Some([head.as_slice(), &path[1..]].concat())
            }
            _ => None,
        }
    }

    /// The module that defines what an absolute path names, following `use`s.
    fn defining(&self, abs: &[String], depth: usize) -> usize {
        let (m, rest) = self.walk(abs);
        let Some(name) = rest.first() else {
            return m;
        };
        if depth >= MAX_DEPTH || self.module(m).defines.contains(name) {
            return m;
        }
        for b in &self.module(m).uses {
            let names_it = b.name.as_deref() == Some(name.as_str());
            if !(names_it || b.name.is_none()) {
                continue;
            }
            let Some(target) = self.absolute(m, &b.path, depth + 1) else {
                continue;
            };
            let next = if names_it {
                [target.as_slice(), &rest[1..]].concat()
            } else {
                // A glob: only if the globbed module has the name.
                let (g, grest) = self.walk(&target);
                let gm = self.module(g);
                let has = grest.is_empty()
                    && (gm.defines.contains(name)
                        || gm.uses.iter().any(|u| u.name.as_deref() == Some(name)));
                if !has {
                    continue;
                }
                [target.as_slice(), rest].concat()
            };
            return self.defining(&next, depth + 1);
        }
        m
    }
}

/// Edges between files: (from, to) -> the first line in `from` that makes it.
fn edges(t: &Tree) -> BTreeMap<(String, String), usize> {
    let r = Resolver { t };
    let mut out = BTreeMap::new();
    for (i, m) in t.modules.iter().enumerate() {
        let uses = m
            .uses
            .iter()
            .filter(|b| !b.reexport)
            .map(|b| (&b.path, b.line));
        let paths = m.paths.iter().map(|(p, l)| (p, *l));
        for (path, line) in uses.chain(paths) {
            let Some(abs) = r.absolute(i, path, 0) else {
                continue;
            };
            let to = &t.modules[r.defining(&abs, 0)].file;
            if *to != m.file {
                out.entry((m.file.clone(), to.clone())).or_insert(line);
            }
        }
    }
    out
}

/// Strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<(String, String), usize>) -> Vec<Vec<String>> {
    let mut nodes: Vec<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    nodes.sort();
    nodes.dedup();
    let idx: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut adj = vec![Vec::new(); nodes.len()];
    for (a, b) in edges.keys() {
        adj[idx[a]].push(idx[b]);
    }
    let n = nodes.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut out) = (Vec::new(), 0, Vec::new());
    // Iterative Tarjan: (node, next child position).
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        let mut work = vec![(s, 0usize)];
        while let Some(&(v, pos)) = work.last() {
            if pos == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = adj[v].get(pos) {
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}

pub fn check(repo: &Path) -> Result<Vec<String>> {
    check_roots(repo, &roots(repo)?)
}

/// The circles of the crates rooted at `roots` (their `lib.rs`/`main.rs`).
pub fn check_roots(repo: &Path, roots: &[std::path::PathBuf]) -> Result<Vec<String>> {
    let mut findings = Vec::new();
    for root in roots {
        let tree = Tree::load(repo, root)?;
        let e = edges(&tree);
        for comp in circles(&e) {
            let within: Vec<String> = e
                .iter()
                .filter(|((a, b), _)| comp.contains(a) && comp.contains(b))
                .map(|((a, b), l)| format!("{a}:{l} -> {b}"))
                .collect();
            findings.push(format!(
                "imports: circle between {}: {}",
                comp.join(", "),
                within.join("; ")
            ));
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn krate(name: &str, files: &[(&str, &str)]) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("xtask-imports-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (f, text) in files {
            let p = dir.join("src").join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let root = dir.join("src/lib.rs");
        (dir, root)
    }

    #[test]
    fn a_circle_through_a_use_and_a_path_is_found_and_a_chain_is_not() {
        let (dir, root) = krate(
            "circle",
            &[
                ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
                ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
                ("b.rs", "pub struct B;\nfn f() -> super::c::C { todo!() }\n"),
                ("c.rs", "pub struct C(crate::A);\n"),
            ],
        );
        let found = check_roots(&dir, &[root]).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("src/a.rs")
                && found[0].contains("src/b.rs")
                && found[0].contains("src/c.rs"),
            "{found:?}"
        );
        // The same files without c's use of A (reached through lib.rs's re-export).
        let (dir, root) = krate(
            "chain",
            &[
                ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
                ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
                ("b.rs", "pub struct B;\nfn f() -> super::c::C { todo!() }\n"),
                (
                    "c.rs",
                    "pub struct C;\n#[cfg(test)]\nmod tests { use crate::A; }\n",
                ),
            ],
        );
        let found = check_roots(&dir, &[root]).unwrap();
        assert!(found.is_empty(), "{found:?}");
    }
}
