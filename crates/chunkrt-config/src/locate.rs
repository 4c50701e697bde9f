//! Where in a file a key is, and messages kept to a readable size.
//!
//! Range and cross-field checks run on the typed config, after the text is gone
//! from serde's view; to give them a line number the key path is looked up again in
//! the text's syntax tree (`toml_edit`, which keeps spans).

use toml_edit::{ImDocument, Item, Table, Value};

/// Longest message (and key path) an error carries, in bytes: a 100 MB string value
/// must not become a 100 MB message.
pub const MAX_MESSAGE_BYTES: usize = 240;

/// `s` cut to [`MAX_MESSAGE_BYTES`] (at a character boundary) with a note of how
/// long it was; control characters (a CR would move the cursor back over the
/// message on a terminal) are shown escaped.
pub fn clip(s: &str) -> String {
    let mut out = String::new();
    let mut cut = None;
    for (i, c) in s.char_indices() {
        if out.len() >= MAX_MESSAGE_BYTES {
            cut = Some(i);
            break;
        }
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    if let Some(i) = cut {
        out.push_str(&format!(
            "... ({} more bytes not shown)",
            s.len().saturating_sub(i)
        ));
    }
    out
}

/// 1-based line of byte `offset`: lines end at LF, CRLF, or a lone CR.
pub fn line_at(text: &str, offset: usize) -> usize {
    let b = text.as_bytes();
    let end = offset.min(b.len());
    let mut line = 1;
    for i in 0..end {
        match b[i] {
            b'\n' => line += 1,
            b'\r' if b.get(i + 1) != Some(&b'\n') => line += 1,
            _ => {}
        }
    }
    line
}

/// Byte offset of the first carriage return not followed by a line feed: TOML
/// ends lines with LF or CRLF only, and a parser that meets a lone CR reports an
/// error at "line 1" with a message a terminal overwrites.
pub fn lone_cr(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    (0..b.len()).find(|&i| b[i] == b'\r' && b.get(i + 1) != Some(&b'\n'))
}

/// Line of the key at `path` (`executor.max_chunk_age_ms`, `ethercat.drive[2].joint`,
/// `policy.goals_rad[1]`) in `text`; when the key is not written (a default), the
/// line of the deepest table on the path that is; 0 when nothing is found or the
/// text does not parse.
pub fn line_of(text: &str, path: &str) -> usize {
    let Ok(doc) = ImDocument::parse(text) else {
        return 0;
    };
    let mut node = Node::Table(doc.as_table());
    let mut best: Option<usize> = None;
    for seg in path.split('.') {
        let (name, indices) = split_indices(seg);
        match node.child(name) {
            Some((span, child)) => {
                best = span.or(best);
                node = child;
            }
            None => break,
        }
        let mut found = true;
        for i in indices {
            match node.index(i) {
                Some((span, child)) => {
                    best = span.or(best);
                    node = child;
                }
                None => {
                    found = false;
                    break;
                }
            }
        }
        if !found {
            break;
        }
    }
    best.map(|o| line_at(text, o)).unwrap_or(0)
}

/// `goals_rad[1][2]` -> (`goals_rad`, [1, 2]).
fn split_indices(seg: &str) -> (&str, Vec<usize>) {
    let name_end = seg.find('[').unwrap_or(seg.len());
    let indices = seg[name_end..]
        .split(['[', ']'])
        .filter_map(|s| s.parse().ok())
        .collect();
    (&seg[..name_end], indices)
}

#[derive(Clone, Copy)]
enum Node<'a> {
    Table(&'a Table),
    Item(&'a Item),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    /// The child `key`, with the offset of its key in the text.
    fn child(self, key: &str) -> Option<(Option<usize>, Node<'a>)> {
        let (k, item) = match self {
            Node::Table(t) => t.get_key_value(key)?,
            Node::Item(Item::Table(t)) => t.get_key_value(key)?,
            Node::Item(Item::Value(Value::InlineTable(t))) | Node::Value(Value::InlineTable(t)) => {
                t.get_key_value(key)?
            }
            _ => return None,
        };
        let span = k.span().or_else(|| item.span()).or_else(|| match item {
            Item::Table(t) => t.span(),
            _ => None,
        });
        Some((span.map(|s| s.start), Node::Item(item)))
    }

    /// Element `i` of an array or array of tables, with its offset.
    fn index(self, i: usize) -> Option<(Option<usize>, Node<'a>)> {
        match self {
            Node::Item(Item::ArrayOfTables(a)) => {
                let t = a.get(i)?;
                Some((t.span().map(|s| s.start), Node::Table(t)))
            }
            Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)) => {
                let v = a.get(i)?;
                Some((v.span().map(|s| s.start), Node::Value(v)))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# comment\n[control]\nperiod_ms = 0.05\njoints = 7\n\n\
        [policy]\ngoals_rad = [\n  [0, 1],\n  [2, 3],\n]\n\n[[ethercat.drive]]\njoint = 0\n\
        [[ethercat.drive]]\njoint = 1\n";

    #[test]
    fn keys_tables_and_array_elements_are_found_on_their_line() {
        assert_eq!(line_of(TEXT, "control.period_ms"), 3);
        assert_eq!(line_of(TEXT, "control.joints"), 4);
        assert_eq!(line_of(TEXT, "policy.goals_rad[1]"), 9);
        assert_eq!(line_of(TEXT, "ethercat.drive[1].joint"), 15);
        // A defaulted key: the line of its table.
        assert_eq!(line_of(TEXT, "control.priority"), 2);
        assert_eq!(line_of(TEXT, "nothing.here"), 0);
        assert_eq!(line_of("not = toml = at all", "control"), 0);
    }

    #[test]
    fn lone_carriage_returns_end_lines() {
        assert_eq!(line_at("a\rb\r\nc\nd", 8), 4);
        assert_eq!(lone_cr("a\r\nb\n"), None);
        assert_eq!(lone_cr("a\r\nb\rc"), Some(4));
    }

    #[test]
    fn long_messages_are_clipped_with_their_length() {
        let long = "x".repeat(10_000_000);
        let c = clip(&long);
        assert!(c.len() < MAX_MESSAGE_BYTES + 64, "{}", c.len());
        assert!(c.contains("more bytes not shown"), "{c}");
        assert_eq!(clip("short"), "short");
        assert_eq!(clip("a\rb"), "a\\rb");
        // Multi-byte characters are cut at a boundary.
        let _ = clip(&"é".repeat(1000));
    }
}
