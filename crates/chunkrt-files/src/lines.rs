//! A line-oriented file (a wear ledger: JSON lines, appended to) read with a bound on
//! each line rather than on the file: a line at a time into one buffer that never
//! grows past the cap, so a ledger of any length is read in constant memory, and a file
//! that is no ledger (a sparse file of zeros, a binary) is refused at its first
//! over-long line. [`last_line`] reads the file's last line from its tail alone.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{hex, open_regular, FileError, RegularFile};

/// The longest line of a line-oriented file chunkrt reads (a wear ledger: chunkrt's own
/// lines are under 4 KiB).
pub const LINE_LIMIT_BYTES: usize = 64 << 10;

/// One line of a [`LineReader`], without its newline.
#[derive(Debug)]
pub struct Line<'a> {
    /// Its number, from 1.
    pub number: u64,
    /// Its bytes, without the newline.
    pub text: &'a [u8],
    /// Whether a newline ended it (only the file's last line can lack one: a write cut
    /// short, or a file that is not a ledger).
    pub terminated: bool,
}

/// Reads a regular file a line at a time, each line at most `max_line` bytes.
#[derive(Debug)]
pub struct LineReader {
    path: PathBuf,
    what: &'static str,
    reader: BufReader<File>,
    line: Vec<u8>,
    max_line: usize,
    number: u64,
    offset: u64,
    size: u64,
}

impl LineReader {
    /// Opens `path` (a regular file only, see [`open_regular`]).
    pub fn open(path: &Path, what: &'static str, max_line: usize) -> Result<Self, FileError> {
        Ok(Self::new(open_regular(path, what)?, path, what, max_line))
    }

    /// Reads `file`, opened from `path`, from its start.
    pub fn new(file: RegularFile, path: &Path, what: &'static str, max_line: usize) -> Self {
        LineReader {
            path: path.to_path_buf(),
            what,
            reader: BufReader::with_capacity(64 << 10, file.file),
            line: Vec::new(),
            max_line,
            number: 0,
            offset: 0,
            size: file.size,
        }
    }

    /// The file's size when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes read so far: the end of the last line returned, its newline included.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next line; `None` at the end of the file. A line longer than the cap is an
    /// error naming it, found before more than the cap is held.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, FileError> {
        self.line.clear();
        let terminated = loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(FileError::Read {
                        path: self.path.clone(),
                        what: self.what,
                        error,
                    })
                }
            };
            if buf.is_empty() {
                if self.line.is_empty() {
                    return Ok(None);
                }
                break false;
            }
            let (take, found) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if self.line.len() + take > self.max_line {
                return Err(FileError::LineTooLong {
                    path: self.path.clone(),
                    what: self.what,
                    line: self.number + 1,
                    limit: self.max_line as u64,
                });
            }
            self.line.extend_from_slice(&buf[..take]);
            let used = take + usize::from(found);
            self.reader.consume(used);
            self.offset += used as u64;
            if found {
                break true;
            }
        };
        self.number += 1;
        Ok(Some(Line {
            number: self.number,
            text: &self.line,
            terminated,
        }))
    }
}

/// The last line of `file` (of `size` bytes), newline-terminated, without its newline,
/// read from the file's tail: at most `max_line + 1` bytes, whatever the file's size.
/// `Ok(None)` when the file is empty, its last line has no newline, or that line is
/// longer than `max_line`: the caller treats the file as one it cannot vouch for from
/// its tail.
pub fn last_line(file: &mut File, size: u64, max_line: usize) -> std::io::Result<Option<Vec<u8>>> {
    if size == 0 {
        return Ok(None);
    }
    let window = size.min(max_line as u64 + 1);
    file.seek(SeekFrom::Start(size - window))?;
    let mut tail = Vec::with_capacity(window as usize);
    file.take(window).read_to_end(&mut tail)?;
    if tail.len() as u64 != window || tail.last() != Some(&b'\n') {
        return Ok(None);
    }
    let body = &tail[..tail.len() - 1];
    match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => Ok(Some(body[i + 1..].to_vec())),
        // The window holds the whole line only when it starts at the file's start.
        None if window == size => Ok(Some(body.to_vec())),
        None => Ok(None),
    }
}

/// SHA-256 (lowercase hex) of the first `lines` lines of an append-only file (a wear
/// ledger), newlines included: what a manifest cites of it, unchanged by lines appended
/// later. Streamed a line at a time (at most `max_line_bytes` each) and stopped at the
/// last line cited: the memory is one line whatever the file's size. `Ok(None)` when the
/// file holds fewer (newline-terminated) lines.
pub fn lines_prefix_sha256(
    path: &Path,
    lines: u64,
    max_line_bytes: usize,
    what: &'static str,
) -> Result<Option<String>, FileError> {
    let mut reader = LineReader::open(path, what, max_line_bytes)?;
    let mut hasher = Sha256::new();
    for _ in 0..lines {
        match reader.next_line()? {
            Some(line) if line.terminated => {
                hasher.update(line.text);
                hasher.update(b"\n");
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(hex(&hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-files-lines-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn all(p: &Path, cap: usize) -> Result<Vec<(u64, String, bool)>, FileError> {
        let mut r = LineReader::open(p, "wear ledger", cap)?;
        let mut out = vec![];
        while let Some(l) = r.next_line()? {
            out.push((
                l.number,
                String::from_utf8(l.text.to_vec()).unwrap(),
                l.terminated,
            ));
        }
        assert_eq!(r.offset(), r.size());
        Ok(out)
    }

    #[test]
    fn lines_are_read_one_at_a_time_and_an_over_long_one_is_named() {
        let p = temp("a.jsonl", b"one\n\ntwo\nthree");
        assert_eq!(
            all(&p, 5).unwrap(),
            vec![
                (1, "one".into(), true),
                (2, "".into(), true),
                (3, "two".into(), true),
                (4, "three".into(), false)
            ]
        );
        let e = all(&p, 4).unwrap_err().to_string();
        assert!(
            e.contains(
                "a.jsonl: line 4 is longer than the 4 bytes a line of a wear ledger may have"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_sparse_file_is_refused_at_its_first_line_without_reading_it() {
        let p = temp("sparse.jsonl", b"");
        std::fs::File::create(&p).unwrap().set_len(2 << 30).unwrap();
        let mut r = LineReader::open(&p, "wear ledger", 64 << 10).unwrap();
        let e = r.next_line().unwrap_err().to_string();
        assert!(e.contains("line 1 is longer than the 64.0 KiB"), "{e}");
        assert!(r.offset() < 1 << 20, "read {} bytes", r.offset());
        let mut f = std::fs::File::open(&p).unwrap();
        assert_eq!(last_line(&mut f, 2 << 30, 64 << 10).unwrap(), None);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn the_last_line_comes_from_the_tail() {
        let cases: [(&[u8], Option<&[u8]>); 5] = [
            (b"", None),
            (b"solo\n", Some(b"solo")),
            (b"first\nsecond\n", Some(b"second")),
            (b"first\nsecond", None),
            (b"a\nthis line is too long\n", None),
        ];
        for (i, (bytes, want)) in cases.into_iter().enumerate() {
            let p = temp(&format!("tail{i}"), bytes);
            let mut f = std::fs::File::open(&p).unwrap();
            let got = last_line(&mut f, bytes.len() as u64, 8).unwrap();
            assert_eq!(got.as_deref(), want, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    /// The first lines' digest stops reading at the last line cited: the lines before a
    /// gigabyte of zeros are digested without reading them; a prefix running into an
    /// over-long line is refused at the cap, not read to its end.
    #[test]
    fn a_prefix_of_lines_is_digested_without_reading_the_rest() {
        let p = temp("prefix.jsonl", b"a\nbc\n");
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(1 << 30).unwrap();
        assert_eq!(
            lines_prefix_sha256(&p, 2, 64, "wear ledger").unwrap(),
            Some(hex(&Sha256::digest(b"a\nbc\n")))
        );
        let e = lines_prefix_sha256(&p, 3, 64, "wear ledger").unwrap_err();
        assert!(
            e.to_string().contains("line 3 is longer than the 64 bytes"),
            "{e}"
        );
        std::fs::write(&p, b"a\nbc").unwrap();
        assert_eq!(lines_prefix_sha256(&p, 2, 64, "wear ledger").unwrap(), None);
        std::fs::remove_file(&p).unwrap();
    }
}
