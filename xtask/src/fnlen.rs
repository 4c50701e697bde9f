//! Function length in the crates the control cycle runs through.

use crate::modtree::{is_cfg_test, rust_files};
use anyhow::{Context, Result};
use std::path::Path;
use syn::visit::Visit;

/// Longest a function may be, in lines from `fn` to its closing brace.
pub const LIMIT: usize = 80;

/// The source folders whose functions are limited: the core, the runtime's threads,
/// the EtherCAT backend (bring-up and the cyclic exchange) with its raw socket, and
/// the margin and gap instruments.
pub const LIMITED: &[&str] = &[
    "crates/chunkrt-core/src",
    "crates/chunkrt-rt/src",
    "crates/chunkrt-ethercat/src",
    "crates/chunkrt-afpacket/src",
    "crates/chunkrt-margin/src",
    "crates/chunkrt-gap/src",
    "crates/chunkrt-learn/src",
];

pub struct FnLen {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub lines: usize,
}

struct Collect<'a> {
    file: &'a str,
    owner: Option<String>,
    out: Vec<FnLen>,
}

impl Collect<'_> {
    fn record(&mut self, name: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let name = match &self.owner {
            Some(o) => format!("{o}::{name}"),
            None => name.to_string(),
        };
        self.out.push(FnLen {
            name,
            file: self.file.to_string(),
            line: start,
            lines: end + 1 - start,
        });
    }
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("test")) || is_cfg_test(attrs)
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            self.record(&f.sig.ident, &f.sig, &f.block);
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_cfg_test(&i.attrs) {
            return;
        }
        let ty = &i.self_ty;
        let before = self.owner.replace(quote_type(ty));
        syn::visit::visit_item_impl(self, i);
        self.owner = before;
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            self.record(&f.sig.ident, &f.sig, &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record(&f.sig.ident, &f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

fn quote_type(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => "impl".to_string(),
    }
}

/// Every non-test function of the limited crates with its length.
pub fn all(root: &Path) -> Result<Vec<FnLen>> {
    let mut out = Vec::new();
    for dir in LIMITED {
        out.extend(in_dir(root, &root.join(dir))?);
    }
    Ok(out)
}

/// Every non-test function of the `.rs` files under `dir`, named relative to `root`.
pub fn in_dir(root: &Path, dir: &Path) -> Result<Vec<FnLen>> {
    let mut out = Vec::new();
    {
        for path in rust_files(dir)? {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let file =
                syn::parse_file(&text).with_context(|| format!("parsing {}", path.display()))?;
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let mut c = Collect {
                file: &rel,
                owner: None,
                out: Vec::new(),
            };
            c.visit_file(&file);
            out.extend(c.out);
        }
    }
    Ok(out)
}

pub fn longest(root: &Path, n: usize) -> Result<Vec<FnLen>> {
    let mut v = all(root)?;
    v.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.name.cmp(&b.name)));
    v.truncate(n);
    Ok(v)
}

pub fn check(root: &Path) -> Result<Vec<String>> {
    Ok(longest(root, usize::MAX)?
        .into_iter()
        .filter(|f| f.lines > LIMIT)
        .map(|f| {
            format!(
                "fn-length: {} is {} lines (limit {LIMIT}): {}:{}",
                f.name, f.lines, f.file, f.line
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_run_from_fn_to_the_closing_brace_and_tests_are_left_out() {
        let dir = std::env::temp_dir().join(format!("xtask-fnlen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let body = "    let _x = 1;\n".repeat(79);
        let text = format!(
            "/// doc\n#[inline]\npub fn long() {{\n{body}}}\n\nstruct S;\nimpl S {{\n    fn short(&self) {{}}\n}}\n\n#[cfg(test)]\nmod tests {{\n    fn huge() {{\n{body}{body}}}\n}}\n"
        );
        std::fs::write(dir.join("lib.rs"), text).unwrap();
        let mut found = in_dir(&dir, &dir).unwrap();
        found.sort_by_key(|f| f.line);
        let got: Vec<(String, usize, usize)> = found
            .iter()
            .map(|f| (f.name.clone(), f.line, f.lines))
            .collect();
        assert_eq!(
            got,
            vec![("long".to_string(), 3, 81), ("S::short".to_string(), 87, 1)]
        );
    }
}
