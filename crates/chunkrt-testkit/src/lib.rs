//! What chunkrt's tests share across crates.
//!
//! A test whose prerequisite is missing (the ONNX Runtime library, a Python with
//! onnxruntime) used to print to stderr and return: the test harness hides the
//! output of a passing test, so a skipped test read as a passed one. Here a
//! missing prerequisite fails the test under CI (`CI=true`, where every
//! prerequisite is installed) and, elsewhere, prints a SKIP line straight to
//! the process's stderr, past the harness's output capture. When
//! `CHUNKRT_SKIP_FILE` names a file (scripts/test.sh sets it), the skip is also
//! appended there, so that the runner's summary counts and names every skip.

use std::io::Write;
pub mod edit;
pub mod openpi_server;
pub mod policy_files;

/// Whether this is a CI run (`CI` set to anything but empty, `0` or `false`, as
/// CI services set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// The line a skipped test prints.
pub fn skip_line(test: &str, why: &str) -> String {
    format!("SKIP {test}: {why}")
}

/// The environment variable naming the file every skip is appended to.
pub const SKIP_FILE_ENV: &str = "CHUNKRT_SKIP_FILE";

/// The line a skip appends to the file named by [`SKIP_FILE_ENV`]: the skip line,
/// with the running test's own name (the harness names the test's thread after it)
/// when that is not already `test`.
pub fn skip_record(test: &str, why: &str) -> String {
    match std::thread::current().name() {
        Some(t) if t != test && t != "main" => skip_line(&format!("{test} ({t})"), why),
        _ => skip_line(test, why),
    }
}

/// Reports that `test` cannot run because `why` (which says how to install what is
/// missing). Under CI this panics, failing the test; otherwise it writes a visible
/// SKIP line and returns, and the caller returns from the test.
#[track_caller]
pub fn missing_prerequisite(test: &str, why: &str) {
    let line = skip_line(test, why);
    if in_ci() {
        panic!("{line}; CI=true: every prerequisite must be installed, so this is a failure");
    }
    // `std::io::stderr()` directly, not `eprintln!`: libtest captures the print
    // macros of a passing test and never shows them.
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = std::env::var_os(SKIP_FILE_ENV).filter(|p| !p.is_empty()) {
        // One short write in append mode: tests in other processes append beside it.
        let record = format!("{}\n", skip_record(test, why));
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(record.as_bytes()));
        if let Err(e) = appended {
            panic!(
                "{line}; and it could not be recorded in {} ({SKIP_FILE_ENV}): {e}",
                path.to_string_lossy()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Output};

    #[test]
    #[ignore = "run as a child process by a_missing_prerequisite_fails_under_ci_and_is_seen_otherwise"]
    fn child_with_a_missing_prerequisite() {
        missing_prerequisite("child", "nothing installed");
    }

    /// This test binary, running only the child test above, with `CI` as given.
    fn child(ci: Option<&str>) -> Output {
        child_recording(ci, None)
    }

    /// The same, with `CHUNKRT_SKIP_FILE` set to `record` when given (unset otherwise).
    fn child_recording(ci: Option<&str>, record: Option<&std::path::Path>) -> Output {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args([
            "--exact",
            "tests::child_with_a_missing_prerequisite",
            "--ignored",
            "--test-threads=1",
        ]);
        c.env_remove("CI");
        c.env_remove(SKIP_FILE_ENV);
        if let Some(p) = record {
            c.env(SKIP_FILE_ENV, p);
        }
        if let Some(v) = ci {
            c.env("CI", v);
        }
        c.output().unwrap()
    }

    #[test]
    fn a_missing_prerequisite_fails_under_ci_and_is_seen_otherwise() {
        let ci = child(Some("true"));
        assert!(
            !ci.status.success(),
            "CI=true: a missing prerequisite must fail the test"
        );
        // Without CI the test passes, and its SKIP line gets past the harness's
        // capture of a passing test's output.
        let local = child(None);
        let stderr = String::from_utf8_lossy(&local.stderr);
        assert!(local.status.success(), "{stderr}");
        assert!(
            stderr.contains("SKIP child: nothing installed"),
            "no visible SKIP line: {stderr}"
        );
        assert!(
            child(Some("false")).status.success(),
            "CI=false is not a CI run"
        );
    }

    /// The summary of scripts/test.sh counts the skips from the file: each skip is
    /// one line there, naming the test the harness ran; a failure under CI is not a
    /// skip.
    #[test]
    fn a_skip_is_appended_to_the_skip_file_with_the_test_name() {
        let dir =
            std::env::temp_dir().join(format!("chunkrt-testkit-skips-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("skipped.txt");
        std::fs::write(&file, "SKIP earlier: kept\n").unwrap();
        for _ in 0..2 {
            let out = child_recording(None, Some(&file));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ci = child_recording(Some("true"), Some(&file));
        assert!(
            !ci.status.success(),
            "CI=true: a missing prerequisite must fail"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        let want = "SKIP child (tests::child_with_a_missing_prerequisite): nothing installed";
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            ["SKIP earlier: kept", want, want],
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_skip_line_names_the_test_and_the_fix() {
        assert_eq!(
            skip_line("seams", "no ONNX Runtime; run ./scripts/bootstrap-ort.sh"),
            "SKIP seams: no ONNX Runtime; run ./scripts/bootstrap-ort.sh"
        );
    }
}
