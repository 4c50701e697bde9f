//! Checked text edits for the configs and manifests tests write.
//!
//! `str::replace` returns the text unchanged when the needle is absent: a test that
//! edits a config that way and whose needle no longer matches (a key renamed, a
//! comment moved) silently tests the default. These edits panic instead, naming the
//! needle and the text's first line.

/// Edits of a config or manifest text that must match.
pub trait Edit {
    /// Replaces every occurrence of `from` with `to`; panics when there is none.
    #[track_caller]
    fn edit(&self, from: &str, to: &str) -> String;

    /// Replaces `from` with `to` where `from` occurs exactly once; panics otherwise.
    #[track_caller]
    fn edit_once(&self, from: &str, to: &str) -> String;
}

impl Edit for str {
    #[track_caller]
    fn edit(&self, from: &str, to: &str) -> String {
        let n = occurrences(self, from);
        assert!(n > 0, "{}", miss(self, from, n, "at least once"));
        self.replace(from, to)
    }

    #[track_caller]
    fn edit_once(&self, from: &str, to: &str) -> String {
        let n = occurrences(self, from);
        assert!(n == 1, "{}", miss(self, from, n, "exactly once"));
        self.replacen(from, to, 1)
    }
}

/// [`Edit::edit`] as a function: `text` with every `from` replaced by `to`.
#[track_caller]
pub fn edit(text: &str, from: &str, to: &str) -> String {
    text.edit(from, to)
}

fn occurrences(text: &str, needle: &str) -> usize {
    assert!(!needle.is_empty(), "a config edit with an empty needle");
    text.matches(needle).count()
}

fn miss(text: &str, needle: &str, n: usize, wanted: &str) -> String {
    format!(
        "config edit: {needle:?} occurs {n} times (wanted {wanted}) in the text that begins {:?}",
        text.lines().next().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matching_edit_replaces() {
        assert_eq!("a = 1\nb = 1\n".edit("= 1", "= 2"), "a = 2\nb = 2\n");
        assert_eq!(
            "a = 1\nb = 2\n".edit_once("b = 2", "b = 3"),
            "a = 1\nb = 3\n"
        );
    }

    #[test]
    #[should_panic(expected = "\"cpu = 7\" occurs 0 times")]
    fn a_needle_that_matches_nothing_panics() {
        let _ = edit("[control]\ncpu = 1\n", "cpu = 7", "cpu = -1");
    }

    #[test]
    #[should_panic(expected = "occurs 2 times (wanted exactly once)")]
    fn a_needle_meant_once_that_matches_twice_panics() {
        let _ = "cpu = 1\ncpu = 1\n".edit_once("cpu = 1", "cpu = -1");
    }
}
