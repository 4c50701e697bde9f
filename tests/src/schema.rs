//! The records a test reads from a real run, checked against their committed JSON
//! Schemas (`docs/reference/*.schema.json`, generated from the types the records are
//! written from by `chunkrt reference schema`; a stale copy fails
//! crates/chunkrt-cli/tests/reference.rs). The validator is an independent
//! implementation (`jsonschema`), not the writer's own types read back.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The committed schema of a record, by its file name (`report.json`, `margin.json`,
/// `gap.json`); `None` for any other file.
pub fn schema_file(record: &Path) -> Option<PathBuf> {
    let name = match record.file_name()?.to_str()? {
        "report.json" => "report",
        "margin.json" => "margin",
        "gap.json" => "gap",
        _ => return None,
    };
    Some(crate::repo_root().join(format!("docs/reference/{name}.schema.json")))
}

/// What the schema in `schema_file` finds wrong with `doc`: one line per error, with
/// where in the document it is (empty: valid). Panics when the schema itself is
/// unreadable or not a valid JSON Schema.
pub fn schema_errors(schema_file: &Path, doc: &Value) -> Vec<String> {
    let text = std::fs::read_to_string(schema_file)
        .unwrap_or_else(|e| panic!("{}: {e}", schema_file.display()));
    let schema: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not JSON: {e}", schema_file.display()));
    let validator = jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("{}: not a JSON Schema: {e}", schema_file.display()));
    validator
        .iter_errors(doc)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect()
}

/// Reads the record at `path` (`report.json`, `margin.json` or `gap.json`), checks it
/// against its committed schema and returns it. Panics, naming the file and every
/// error the validator found, when it is not JSON or does not follow its schema; and
/// for a file that is none of the three (a test that means another file reads it
/// itself).
pub fn read_json_checked(path: &Path) -> Value {
    let schema = schema_file(path)
        .unwrap_or_else(|| panic!("{}: no schema for this file name", path.display()));
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    let errors = schema_errors(&schema, &doc);
    assert!(
        errors.is_empty(),
        "{} does not follow {}:\n{}",
        path.display(),
        schema.display(),
        errors.join("\n")
    );
    doc
}

/// Asserts that the schema of the record at `path` refuses `doc` (a record read from
/// it) once `edit` has changed it (`what` says how, for the message): the schema is
/// no schema that passes anything.
pub fn assert_refused(path: &Path, doc: &Value, what: &str, edit: impl FnOnce(&mut Value)) {
    let schema = schema_file(path)
        .unwrap_or_else(|| panic!("{}: no schema for this file name", path.display()));
    let mut bad = doc.clone();
    edit(&mut bad);
    assert_ne!(&bad, doc, "{what}: the edit changed nothing");
    assert!(
        !schema_errors(&schema, &bad).is_empty(),
        "{} with {what} passes {}",
        path.display(),
        schema.display()
    );
}
