//! Proptest over the fuzz targets (no panic on any input, and the targets' own
//! assertions), plus a replay of the committed corpus. Case count: PROPTEST_CASES
//! (default 256).

use chunkrt_fuzz::runner::load_corpus;
use chunkrt_fuzz::targets::{self, TARGETS};
use proptest::prelude::*;
use std::path::Path;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    load_corpus(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

#[test]
fn the_committed_corpus_runs_without_a_panic() {
    for (name, target) in TARGETS {
        let inputs = corpus(name);
        assert!(!inputs.is_empty(), "fuzz/corpus/{name} is empty");
        for input in inputs {
            target(&input);
        }
    }
}

/// Values a config key may be given instead of its own: wrong types, out of range,
/// non-finite, empty, huge arrays, unterminated strings.
fn weird_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("1e309".to_string()),
        Just("18446744073709551616".to_string()),
        Just("\"\"".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("true".to_string()),
        Just("\"unterminated".to_string()),
        any::<f64>().prop_map(|v| format!("{v:?}")),
        any::<i64>().prop_map(|v| v.to_string()),
        prop::collection::vec(any::<f32>(), 0..20)
            .prop_map(|v| format!("{v:?}").replace("NaN", "nan")),
        "[a-z_]{1,12}".prop_map(|s| format!("\"{s}\"")),
    ]
}

proptest! {
    #[test]
    fn config_with_one_value_replaced_never_panics(
        line in any::<prop::sample::Index>(),
        value in weird_value(),
    ) {
        let text = include_str!("../../rt-config/sim-scripted.toml");
        let lines: Vec<&str> = text.lines().collect();
        let assignments: Vec<usize> =
            (0..lines.len()).filter(|&i| lines[i].contains(" = ")).collect();
        let i = assignments[line.index(assignments.len())];
        let key = lines[i].split(" = ").next().unwrap();
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        edited[i] = format!("{key} = {value}");
        targets::config(edited.join("\n").as_bytes());
    }

    #[test]
    fn config_of_arbitrary_bytes_never_panics(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        targets::config(&data);
    }

    #[test]
    fn manifest_with_one_value_replaced_never_panics(
        line in any::<prop::sample::Index>(),
        value in weird_value(),
    ) {
        let text = include_str!("../../rt-config/policies/flow.toml");
        let lines: Vec<&str> = text.lines().collect();
        let assignments: Vec<usize> =
            (0..lines.len()).filter(|&i| lines[i].contains(" = ")).collect();
        let i = assignments[line.index(assignments.len())];
        let key = lines[i].split(" = ").next().unwrap();
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        edited[i] = format!("{key} = {value}");
        targets::manifest(edited.join("\n").as_bytes());
    }

    #[test]
    fn manifest_of_arbitrary_bytes_never_panics(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        targets::manifest(&data);
    }

    #[test]
    fn chunk_scripts_of_arbitrary_bytes_keep_every_command_within_limits(
        data in prop::collection::vec(any::<u8>(), 0..1024),
    ) {
        // The target asserts finiteness, position limits and reconciled counters.
        targets::chunks(&data);
    }

    #[test]
    fn chunk_scripts_built_from_valid_operations_keep_every_command_within_limits(
        ops in prop::collection::vec((0u8..5, prop::collection::vec(any::<u8>(), 0..24)), 1..40),
    ) {
        let mut data = Vec::new();
        for (op, args) in ops {
            data.push(op);
            data.extend(args);
        }
        targets::chunks(&data);
    }
}
