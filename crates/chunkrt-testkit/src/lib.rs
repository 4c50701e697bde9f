//! What chunkrt's tests share across crates.
//!
//! A test whose prerequisite is missing (the ONNX Runtime library, a Python with
//! onnxruntime) used to print to stderr and return: the test harness hides the
//! output of a passing test, so a skipped test read as a passed one. Here a
//! missing prerequisite fails the test under CI (`CI=true`, where every
//! prerequisite is installed) and, elsewhere, prints a SKIP line straight to
//! the process's stderr, past the harness's output capture.

use std::io::Write;

/// Whether this is a CI run (`CI` set to anything but empty, `0` or `false`, as
/// CI services set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// The line a skipped test prints.
pub fn skip_line(test: &str, why: &str) -> String {
    format!("SKIP {test}: {why}")
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
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args([
            "--exact",
            "tests::child_with_a_missing_prerequisite",
            "--ignored",
            "--test-threads=1",
        ]);
        c.env_remove("CI");
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

    #[test]
    fn the_skip_line_names_the_test_and_the_fix() {
        assert_eq!(
            skip_line("seams", "no ONNX Runtime; run ./scripts/bootstrap-ort.sh"),
            "SKIP seams: no ONNX Runtime; run ./scripts/bootstrap-ort.sh"
        );
    }
}
