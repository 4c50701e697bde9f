//! A crate's module tree as rustc builds it from `mod` declarations: which file each
//! module lives in, what it defines and what its `use` declarations bind. Modules
//! under `#[cfg(test)]` are left out (a test module may use anything).

use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Whether the attributes hold `#[cfg(test)]` (alone, not inside `any`/`not`).
pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// The `.rs` files under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// One `use` binding: the name it binds in its module and the path it names, as
/// written (`crate::a::B`, `super::c`, `child::d`); `glob` for `path::*`.
pub struct UseBinding {
    pub name: Option<String>,
    /// A `pub`/`pub(crate)` use: a re-export, the module's façade, not a use of the
    /// item by the module's own code.
    pub reexport: bool,
    pub path: Vec<String>,
    pub line: usize,
}

pub struct Module {
    /// Path from the crate root (empty for the root).
    pub path: Vec<String>,
    /// The file the module's items are written in (repository-relative).
    pub file: String,
    pub children: BTreeMap<String, usize>,
    pub defines: BTreeSet<String>,
    pub uses: Vec<UseBinding>,
    /// Paths written in the module's code that start with `crate`, `super` or the
    /// name of a child module, with their line.
    pub paths: Vec<(Vec<String>, usize)>,
}

pub struct Tree {
    pub modules: Vec<Module>,
}

impl Tree {
    /// The crate rooted at `root_file` (`src/lib.rs` or `src/main.rs`).
    pub fn load(repo: &Path, root_file: &Path) -> Result<Tree> {
        let mut t = Tree {
            modules: Vec::new(),
        };
        t.load_file(repo, root_file, Vec::new(), true)?;
        Ok(t)
    }

    fn load_file(
        &mut self,
        repo: &Path,
        file: &Path,
        path: Vec<String>,
        owns_dir: bool,
    ) -> Result<usize> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let parsed =
            syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
        // Where `mod x;` looks for x: beside lib.rs/main.rs/mod.rs, else in a folder
        // named after the file.
        let dir = if owns_dir {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        let rel = file
            .strip_prefix(repo)
            .unwrap_or(file)
            .display()
            .to_string();
        self.load_items(repo, &rel, &dir, path, &parsed.items)
    }

    fn new_module(&mut self, path: Vec<String>, file: &str) -> usize {
        self.modules.push(Module {
            path,
            file: file.to_string(),
            children: BTreeMap::new(),
            defines: BTreeSet::new(),
            uses: Vec::new(),
            paths: Vec::new(),
        });
        self.modules.len() - 1
    }

    fn load_items(
        &mut self,
        repo: &Path,
        file: &str,
        dir: &Path,
        path: Vec<String>,
        items: &[syn::Item],
    ) -> Result<usize> {
        let me = self.new_module(path.clone(), file);
        for item in items {
            match item {
                syn::Item::Mod(m) if is_cfg_test(&m.attrs) => {}
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let mut child = path.clone();
                    child.push(name.clone());
                    let idx = match &m.content {
                        Some((_, inner)) => {
                            self.load_items(repo, file, &dir.join(&name), child, inner)?
                        }
                        None => {
                            let f = mod_file(dir, &name, &m.attrs)
                                .with_context(|| format!("{file}: `mod {name};` has no file"))?;
                            let owns = f.file_name().is_some_and(|n| n == "mod.rs")
                                || attr_path(&m.attrs).is_some();
                            self.load_file(repo, &f, child, owns)?
                        }
                    };
                    self.modules[me].children.insert(name.clone(), idx);
                    self.modules[me].defines.insert(name);
                }
                syn::Item::Use(u) => {
                    let mut out = Vec::new();
                    flatten_use(&u.tree, Vec::new(), &mut out);
                    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                    for b in &mut out {
                        b.reexport = reexport;
                    }
                    self.modules[me].uses.extend(out);
                }
                other => {
                    if let Some(name) = item_name(other) {
                        self.modules[me].defines.insert(name);
                    }
                    let mut v = PathVisitor { found: Vec::new() };
                    syn::visit::Visit::visit_item(&mut v, other);
                    self.modules[me].paths.extend(v.found);
                }
            }
        }
        Ok(me)
    }
}

fn attr_path(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        if !a.path().is_ident("path") {
            return None;
        }
        match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        }
    })
}

fn mod_file(dir: &Path, name: &str, attrs: &[syn::Attribute]) -> Option<PathBuf> {
    if let Some(p) = attr_path(attrs) {
        return Some(dir.join(p));
    }
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

fn item_name(item: &syn::Item) -> Option<String> {
    let id = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(m) => m.ident.as_ref()?,
        _ => return None,
    };
    Some(id.to_string())
}

fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<UseBinding>) {
    let line = |t: &syn::UseTree| match t {
        syn::UseTree::Path(p) => p.ident.span().start().line,
        syn::UseTree::Name(n) => n.ident.span().start().line,
        syn::UseTree::Rename(r) => r.ident.span().start().line,
        syn::UseTree::Glob(g) => g.star_token.span.start().line,
        syn::UseTree::Group(g) => g.brace_token.span.open().start().line,
    };
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix;
            let name = n.ident.to_string();
            if name == "self" {
                let bound = path.last().cloned();
                out.push(UseBinding {
                    reexport: false,
                    name: bound,
                    path,
                    line: line(tree),
                });
            } else {
                path.push(name.clone());
                out.push(UseBinding {
                    reexport: false,
                    name: Some(name),
                    path,
                    line: line(tree),
                });
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(UseBinding {
                reexport: false,
                name: Some(r.rename.to_string()),
                path,
                line: line(tree),
            });
        }
        syn::UseTree::Glob(_) => out.push(UseBinding {
            reexport: false,
            name: None,
            path: prefix,
            line: line(tree),
        }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), out);
            }
        }
    }
}

/// Paths in code (types, expressions, patterns, macro paths) of two segments or more.
struct PathVisitor {
    found: Vec<(Vec<String>, usize)>,
}

impl<'ast> syn::visit::Visit<'ast> for PathVisitor {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() >= 2 {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = p.segments[0].ident.span().start().line;
            self.found.push((segs, line));
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_cfg_test(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
}
