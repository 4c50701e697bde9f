//! One checked item of `chunkrt check` and its verdict, as every check reports it.

/// An item's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Ready.
    Pass,
    /// Works, but latency will suffer; or the host does not say.
    Warn,
    /// The loop will not get what it asks for.
    Fail,
}

/// One checked item.
#[derive(Debug)]
pub struct Item {
    /// What was checked.
    pub name: &'static str,
    /// The verdict.
    pub level: Level,
    /// What was found.
    pub found: String,
    /// How to fix it (empty on PASS).
    pub fix: String,
}

pub fn item(
    name: &'static str,
    level: Level,
    found: impl Into<String>,
    fix: impl Into<String>,
) -> Item {
    Item {
        name,
        level,
        found: found.into(),
        fix: fix.into(),
    }
}
