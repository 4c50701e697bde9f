//! Command lines cut from a byte stream with a bound: a line longer than [`LINE_MAX`]
//! is discarded whole, through its newline, and told once as [`Line::TooLong`]; no
//! part of it (its tail least of all) is ever taken for a command. Nothing is held
//! beyond one line's bytes, however long the input.

/// The longest command line taken (bytes, the newline excluded).
pub const LINE_MAX: usize = 1024;

/// What the reader found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A whole line, without its newline (and without a carriage return before it).
    Text(&'a [u8]),
    /// A line longer than [`LINE_MAX`], now discarded through its newline.
    TooLong,
}

/// Cuts lines from the pieces of a stream, in the order they were read.
pub struct LineReader {
    buf: Box<[u8; LINE_MAX]>,
    len: usize,
    /// The line under way has passed the bound: its bytes are dropped until its end.
    discarding: bool,
}

impl Default for LineReader {
    fn default() -> Self {
        LineReader {
            buf: Box::new([0; LINE_MAX]),
            len: 0,
            discarding: false,
        }
    }
}

impl LineReader {
    /// Takes the next piece of the stream; `each` is called with every line it ends.
    pub fn feed(&mut self, mut piece: &[u8], mut each: impl FnMut(Line<'_>)) {
        while !piece.is_empty() {
            let end = piece.iter().position(|&b| b == b'\n');
            let (part, rest) = match end {
                Some(i) => (&piece[..i], Some(&piece[i + 1..])),
                None => (piece, None),
            };
            if !self.discarding {
                if self.len + part.len() > LINE_MAX {
                    self.discarding = true;
                    self.len = 0;
                } else {
                    self.buf[self.len..self.len + part.len()].copy_from_slice(part);
                    self.len += part.len();
                }
            }
            let Some(rest) = rest else {
                return;
            };
            if self.discarding {
                each(Line::TooLong);
            } else {
                let mut line = &self.buf[..self.len];
                if let [head @ .., b'\r'] = line {
                    line = head;
                }
                each(Line::Text(line));
            }
            self.len = 0;
            self.discarding = false;
            piece = rest;
        }
    }

    /// Whether part of a line has been read and not yet ended.
    #[cfg(test)]
    pub fn pending(&self) -> bool {
        self.len > 0 || self.discarding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line `pieces` gives, in order (`None` for a refused one).
    fn lines(pieces: &[&[u8]]) -> Vec<Option<String>> {
        let mut r = LineReader::default();
        let mut out = vec![];
        for p in pieces {
            r.feed(p, |l| {
                out.push(match l {
                    Line::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                    Line::TooLong => None,
                })
            });
        }
        out
    }

    #[test]
    fn lines_are_cut_at_newlines_across_pieces() {
        assert_eq!(
            lines(&[b"st", b"op\nr\r\n", b"i", b"\n\n"]),
            [Some("stop"), Some("r"), Some("i"), Some("")].map(|s| s.map(String::from))
        );
    }

    /// The defect of issue 56: 1024 bytes and then `r` (or `stop`) on the same line ran
    /// the tail as a command. The whole line is refused, once; the next line is read.
    #[test]
    fn the_tail_of_an_over_long_line_is_never_a_command() {
        for tail in [&b"r"[..], b"stop", b"\nr"] {
            let mut line = vec![b'x'; LINE_MAX];
            line.extend_from_slice(tail);
            line.extend_from_slice(b"\nrearm\n");
            let got = lines(&[&line]);
            let want: Vec<Option<String>> = if tail.starts_with(b"\n") {
                // 1024 bytes exactly is a line; `r` after it is its own line.
                vec![
                    Some("x".repeat(LINE_MAX)),
                    Some("r".into()),
                    Some("rearm".into()),
                ]
            } else {
                vec![None, Some("rearm".into())]
            };
            assert_eq!(got, want, "tail {:?}", String::from_utf8_lossy(tail));
        }
        // The same line in pieces of every size.
        let mut line = vec![b'a'; 3000];
        line.extend_from_slice(b"stop\ni\n");
        for size in [1, 7, 1023, 1024, 1025, 4096] {
            let pieces: Vec<&[u8]> = line.chunks(size).collect();
            assert_eq!(lines(&pieces), [None, Some("i".into())], "pieces of {size}");
        }
    }

    #[test]
    fn an_endless_line_is_never_held_and_never_answered_before_its_end() {
        let mut r = LineReader::default();
        let mut seen = 0;
        for _ in 0..1000 {
            r.feed(&[b'z'; 4096], |_| seen += 1);
        }
        assert_eq!(seen, 0);
        assert!(r.pending());
        r.feed(b"\n", |l| {
            assert_eq!(l, Line::TooLong);
            seen += 1
        });
        assert_eq!(seen, 1);
        assert!(!r.pending());
    }
}
