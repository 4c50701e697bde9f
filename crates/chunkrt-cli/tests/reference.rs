//! What `chunkrt reference` generates from the code, as a user meets it: the committed
//! exit-statuses page, configuration reference and records' JSON Schemas are what the
//! code generates now (a stale copy fails here), a schema refuses a real record with a
//! field missing or of the wrong type (it is no schema that passes anything), and
//! the man pages and completions that `scripts/install-cli-docs.sh` installs work in
//! the tools that read them (a real bash completing a real command line).

mod common;

use chunkrt_tests::schema::{read_json_checked, schema_errors, schema_file};
use common::{bin, repo, temp_dir};
use serde_json::{json, Value};
use std::process::Command;

fn generated(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(out.status.success(), "chunkrt {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_committed_exit_statuses_page_is_what_the_code_generates() {
    let page = "docs/reference/exit-statuses.md";
    let committed = std::fs::read_to_string(repo().join(page)).unwrap();
    assert!(
        committed == generated(&["reference", "exit-statuses"]),
        "{page} is stale: regenerate it with scripts/gen-reference.sh and commit it"
    );
}

/// The records' JSON Schemas (`docs/reference/{report,margin,gap}.schema.json`), which
/// every test that reads a record checks it against, are the ones the types the records
/// are written from give now.
#[test]
fn the_committed_record_schemas_are_what_the_code_generates() {
    for record in ["report", "margin", "gap", "config", "budget", "ecsim"] {
        let file = format!("docs/reference/{record}.schema.json");
        let committed = std::fs::read_to_string(repo().join(&file)).unwrap();
        let schema = generated(&["reference", "schema", record]);
        let parsed: Value = serde_json::from_str(&schema).unwrap();
        let title = match record {
            "config" => "Config".to_string(),
            "budget" => "BudgetFile".to_string(),
            "ecsim" => "SimConfig".to_string(),
            _ => format!("{record}.json"),
        };
        assert_eq!(parsed["title"], title, "{schema}");
        assert!(
            committed == schema,
            "{file} is stale: regenerate it with scripts/gen-reference.sh and commit it"
        );
    }
}

/// The report's schema can fail: a real `report.json` (a short run of the bundled
/// configuration) passes it, and the same report with one required field removed, or
/// one field of the wrong type, is refused, the error naming the field.
#[test]
fn the_report_schema_refuses_a_report_missing_a_field_or_with_a_wrong_type() {
    let dir = temp_dir("reference", "schema");
    let config = common::sim_with(&dir, "sim.toml", "");
    let out = dir.join("run");
    common::run_chunkrt("schema", &config, &out, "2s");
    let path = out.join("report.json");
    let report = read_json_checked(&path);
    let schema = schema_file(&path).unwrap();
    let metric = report["metrics"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("the report has metrics");
    type Edit = (&'static str, Box<dyn Fn(&mut Value)>);
    let edits: [Edit; 6] = [
        (
            "schema",
            Box::new(|r| {
                r.as_object_mut().unwrap().remove("schema");
            }),
        ),
        (
            "sched_fifo",
            Box::new(|r| {
                r["host"].as_object_mut().unwrap().remove("sched_fifo");
            }),
        ),
        ("duration_s", Box::new(|r| r["duration_s"] = json!("2 s"))),
        ("cpus", Box::new(|r| r["host"]["cpus"] = json!(-1))),
        (
            "p99",
            Box::new(move |r| r["metrics"][&metric]["p99"] = json!(1.5)),
        ),
        (
            "counters",
            Box::new(|r| r["counters"]["cycles"] = json!("many")),
        ),
    ];
    for (field, edit) in &edits {
        let mut bad = report.clone();
        edit(&mut bad);
        assert_ne!(bad, report, "{field}: the edit changed nothing");
        let errors = schema_errors(&schema, &bad);
        assert!(
            !errors.is_empty(),
            "a report edited at `{field}` passes {}",
            schema.display()
        );
        let all = errors.join("\n");
        assert!(all.contains(field), "{field}: {all}");
    }
    assert!(schema_errors(&schema, &report).is_empty());
}

#[test]
fn the_committed_configuration_reference_is_what_the_code_generates() {
    let page = "docs/reference/config.md";
    let committed = std::fs::read_to_string(repo().join(page)).unwrap();
    let out = Command::new(bin())
        .args(["reference", "config"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        committed.as_bytes() == out.stdout.as_slice(),
        "{page} is stale: regenerate it with scripts/gen-reference.sh and commit it"
    );
}

/// The reference names every key a bundled configuration sets, and its ranges are the
/// validator's: a key set to the probed value in the file the page names is refused
/// with the very message the page gives.
#[test]
fn the_configuration_reference_covers_the_bundled_configurations_keys() {
    let page = std::fs::read_to_string(repo().join("docs/reference/config.md")).unwrap();
    let text = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let mut keys = Vec::new();
    for (section, v) in &doc {
        for key in v.as_table().unwrap().keys() {
            keys.push(format!("{section}.{key}"));
        }
    }
    assert!(keys.len() > 30, "{keys:?}");
    for k in &keys {
        assert!(
            page.contains(&format!("| `{k}` |")),
            "{k} is not in the reference"
        );
    }
    // The period's row, as a user would try it: 1e9 in rt-config/sim.toml.
    let row = page
        .lines()
        .find(|l| l.starts_with("| `control.period_ms` |"))
        .unwrap();
    let dir = temp_dir("reference", "period");
    let file = dir.join("sim.toml");
    let edited = text.replace("period_ms = 20.0", "period_ms = 1e9");
    assert_ne!(edited, text);
    std::fs::write(&file, edited).unwrap();
    let out = Command::new(bin())
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let message = stderr
        .split("key `control.period_ms`: ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap();
    let message = message.split(" (read as").next().unwrap();
    assert!(
        row.contains(message),
        "the validator says {message:?}; the page: {row}"
    );
}

#[test]
fn the_exit_statuses_page_has_a_row_for_each_status_the_binary_gives() {
    let page = generated(&["reference", "exit-statuses"]);
    let row = |code: i32| page.lines().any(|l| l.starts_with(&format!("| {code} | ")));
    // A file that does not exist: a usage error.
    let missing = Command::new(bin())
        .args(["validate", "/nonexistent/chunkrt.toml"])
        .output()
        .unwrap();
    // A metrics endpoint nobody serves: nothing answers.
    let silent = Command::new(bin())
        .args(["status", "--metrics", "127.0.0.1:1"])
        .output()
        .unwrap();
    for out in [missing, silent] {
        let code = out.status.code().unwrap();
        assert!(
            code != 0 && row(code),
            "exit status {code} has no row:\n{page}"
        );
    }
    assert!(row(0) && row(130), "{page}");
}

/// Bash's completion of `words` (the cursor at the last one) with the installed script.
fn complete(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let cmd = format!(
        "source '{}'; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; \
         COMP_POINT=${{#COMP_LINE}}; _chunkrt chunkrt '{}' '{}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash").args(["-c", &cmd]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn installed_man_pages_and_completions_follow_the_command_line() {
    let prefix = temp_dir("reference", "install");
    let out = Command::new("bash")
        .arg(repo().join("scripts/install-cli-docs.sh"))
        .arg(&prefix)
        .env("CHUNKRT_BIN", bin())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // One page per subcommand that `--help` lists.
    let help = generated(&["--help"]);
    let subcommands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .take_while(|w| !w.ends_with(':'))
        .filter(|w| *w != "help")
        .collect();
    assert!(
        subcommands.contains(&"run") && subcommands.len() >= 10,
        "{help}"
    );
    let man = prefix.join("share/man/man1");
    for sub in &subcommands {
        let page = man.join(format!("chunkrt-{sub}.1"));
        let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{page:?}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page:?} is no man page"
        );
    }
    // `run`'s page documents its flags, as `chunkrt run --help` names them.
    let run_page = std::fs::read_to_string(man.join("chunkrt-run.1")).unwrap();
    assert!(run_page.contains("runs\\-dir"), "{run_page}");
    // A real bash completes subcommands and flags with the installed script.
    let script = prefix.join("share/bash-completion/completions/chunkrt");
    let subs = complete(&script, &["chunkrt", "re"]);
    assert!(subs.iter().any(|s| s == "reference"), "{subs:?}");
    let flags = complete(&script, &["chunkrt", "run", "--runs"]);
    assert_eq!(flags, ["--runs-dir"], "{flags:?}");
    for f in [
        "share/zsh/site-functions/_chunkrt",
        "share/fish/vendor_completions.d/chunkrt.fish",
    ] {
        let text = std::fs::read_to_string(prefix.join(f)).unwrap();
        assert!(text.contains("runs-dir"), "{f}: {text}");
    }
}

/// Every committed configuration file follows its JSON Schema: a budget
/// (`rt-config/budget*.toml`) `budget.schema.json`, an ecsim configuration
/// (`rt-config/ecsim-*.toml`) `ecsim.schema.json`, every other `rt-config/*.toml` and the
/// reference's every-section example `config.schema.json` — their keys, the keys' types,
/// no unknown key. The schemas can fail: a key misspelt, or a number given as text, is
/// refused by each.
#[test]
fn every_committed_configuration_follows_its_schema() {
    let schema_of = |p: &std::path::Path| {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let kind = if name.starts_with("budget") {
            "budget"
        } else if name.starts_with("ecsim") {
            "ecsim"
        } else {
            "config"
        };
        repo().join(format!("docs/reference/{kind}.schema.json"))
    };
    let as_json = |p: &std::path::Path| -> Value {
        let text = std::fs::read_to_string(p).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        serde_json::to_value(doc).unwrap()
    };
    let mut files: Vec<_> = std::fs::read_dir(repo().join("rt-config"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.push(repo().join("docs/reference/every-section.toml"));
    files.sort();
    let mut kinds = std::collections::BTreeMap::new();
    for f in &files {
        let schema = schema_of(f);
        let errors = schema_errors(&schema, &as_json(f));
        assert!(errors.is_empty(), "{}: {errors:#?}", f.display());
        *kinds.entry(schema).or_insert(0) += 1;
    }
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    // Each schema refuses a misspelt key and a number as text.
    for (file, table, key, number) in [
        (
            "rt-config/sim.toml",
            "executor",
            "blend_ms",
            ("control", "period_ms"),
        ),
        (
            "rt-config/budget-ci.toml",
            "baseline",
            "p99_ratio",
            ("baseline", "p99_ratio"),
        ),
        (
            "rt-config/ecsim-faults.toml",
            "frames",
            "drop",
            ("frames", "delay_us"),
        ),
    ] {
        let path = repo().join(file);
        let (schema, doc) = (schema_of(&path), as_json(&path));
        let mut misspelt = doc.clone();
        let t = misspelt[table].as_object_mut().expect(table);
        let v = t.remove(key).expect(key);
        t.insert(format!("{key}_x"), v);
        assert!(
            !schema_errors(&schema, &misspelt).is_empty(),
            "{file}: a misspelt key passed"
        );
        let mut text = doc.clone();
        text[number.0][number.1] = Value::String("20".into());
        assert!(
            !schema_errors(&schema, &text).is_empty(),
            "{file}: a number as text passed"
        );
    }
}
