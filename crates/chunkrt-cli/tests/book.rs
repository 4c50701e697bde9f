//! Every `chunkrt` command line in the manual (docs/) and the README is one the binary
//! accepts: each is given to the real binary's argument parser (the command line as
//! printed, with `--help` appended: clap parses and checks every argument before it,
//! flag names, values and their parsers, then prints the help and exits 0). A renamed
//! flag, a removed subcommand or a changed value syntax fails here with the page and
//! line. The commands are not run (most move an arm for seconds or minutes, several
//! need root and a veth pair): what is checked is that a reader who copies one gets no
//! usage error.

mod common;

use common::{bin, repo};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One command line found in a page.
struct Found {
    place: String,
    args: Vec<String>,
}

/// The subcommands the binary has (its `--help`).
fn subcommands() -> Vec<String> {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    help.split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// `line` split as a POSIX shell splits words (quotes and backslashes), up to a
/// comment, a pipe, a redirection or a command separator.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut any) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => cur.extend(chars.next()),
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (None, '\\') => cur.extend(chars.next()),
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, '#' | '|' | ';' | '&' | '>' | '<') if cur.is_empty() && !any => break,
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The `chunkrt` command lines of the shell blocks of `text` (`sh`, `bash`,
/// `console` or unlabelled; `$ ` prompts stripped, `\` continuations joined); a line
/// whose word after `chunkrt` is not a subcommand is output, not a command.
fn commands(file: &str, text: &str, subs: &[String]) -> (Vec<Found>, usize) {
    let (mut found, mut synopses) = (Vec::new(), 0);
    let mut block: Option<bool> = None;
    let mut pending = String::new();
    let mut start = 0;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            block = match block {
                Some(_) => None,
                // The language is the info string's first word; the rest are
                // scripts/book-examples.py's tags (`sh run`, `console long`, ...).
                None => Some(matches!(
                    info.split_whitespace().next().unwrap_or(""),
                    "" | "sh" | "bash" | "console"
                )),
            };
            continue;
        }
        if block != Some(true) {
            continue;
        }
        if pending.is_empty() {
            start = i + 1;
        }
        let l = line.trim().strip_prefix("$ ").unwrap_or(line.trim());
        if let Some(head) = l.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(l);
        let w = words(&std::mem::take(&mut pending));
        let Some(at) = w
            .iter()
            .position(|t| Path::new(t).file_name().is_some_and(|n| n == "chunkrt"))
        else {
            continue;
        };
        let args: Vec<String> = w[at + 1..].to_vec();
        if !args.first().is_some_and(|a| subs.contains(a)) {
            continue;
        }
        if args.iter().any(|a| a.starts_with('[')) {
            synopses += 1; // a synopsis (`[--stride N]`), not a command to copy
            continue;
        }
        found.push(Found {
            place: format!("{file}:{start}"),
            args,
        });
    }
    (found, synopses)
}

/// The pages: README.md and every Markdown file under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut out);
    out.sort();
    out
}

/// The parser's answer to `args`: `None` when it accepts them, else its error.
fn refused(args: &[String]) -> Option<String> {
    let out = Command::new(bin())
        .args(args)
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (!out.status.success()).then(|| {
        let err = String::from_utf8_lossy(&out.stderr);
        err.lines().next().unwrap_or("").to_string()
    })
}

#[test]
fn every_chunkrt_command_in_the_manual_is_one_the_binary_accepts() {
    let subs = subcommands();
    assert!(
        subs.iter().any(|s| s == "run") && subs.len() >= 10,
        "{subs:?}"
    );
    let (mut all, mut synopses) = (Vec::new(), 0);
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page
            .strip_prefix(repo())
            .unwrap_or(&page)
            .display()
            .to_string();
        let (found, s) = commands(&name, &text, &subs);
        all.extend(found);
        synopses += s;
    }
    let bad: Vec<String> = all
        .iter()
        .filter_map(|f| {
            refused(&f.args).map(|e| format!("{}: chunkrt {}: {e}", f.place, f.args.join(" ")))
        })
        .collect();
    eprintln!(
        "{} command lines checked, {synopses} synopses left out",
        all.len()
    );
    assert!(
        bad.is_empty(),
        "commands in the manual the binary refuses:\n{}",
        bad.join("\n")
    );
    // Not vacuous: the manual's commands are found, of many subcommands.
    assert!(all.len() >= 20, "only {} commands found", all.len());
    let kinds: std::collections::BTreeSet<&str> = all.iter().map(|f| f.args[0].as_str()).collect();
    assert!(kinds.len() >= 6, "{kinds:?}");
}

/// The check itself fails on a renamed flag, a removed subcommand and a bad value.
#[test]
fn a_renamed_flag_in_a_page_fails_the_check() {
    let subs = subcommands();
    let page = "```sh run\n./target/release/chunkrt run --config rt-config/sim.toml \\\n    --duration 10s   # ten seconds\n```\n";
    let (found, _) = commands("page.md", page, &subs);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].args,
        ["run", "--config", "rt-config/sim.toml", "--duration", "10s"]
    );
    assert_eq!(refused(&found[0].args), None);
    for (from, to) in [
        ("--duration", "--durations"),
        ("10s", "ten"),
        ("run", "runn"),
    ] {
        let (found, _) = commands("page.md", &page.replace(from, to), &subs);
        let args = if to == "runn" {
            vec!["runn".to_string()]
        } else {
            found[0].args.clone()
        };
        assert!(refused(&args).is_some(), "{from} -> {to} was accepted");
    }
}
