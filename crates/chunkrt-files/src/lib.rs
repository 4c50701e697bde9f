//! chunkrt-files: every file a user names is read with a bound.
//!
//! A path in a config or on the command line can name anything: a directory, a FIFO
//! nobody writes to (`open` blocks forever), `/dev/zero` (a read never ends), a sparse
//! file of 10 GB. [`open_regular`] opens with `O_NONBLOCK` (so a FIFO cannot block the
//! open) and refuses, by `fstat` on the descriptor it opened, whatever is not a regular
//! file. [`read_bounded`] then refuses a file above a limit before reading a byte, and
//! reads at most the limit even if the file grows meanwhile; [`read_with_sha256`] takes
//! the SHA-256 of the very bytes it returns, in the same pass.
//!
//! Every error names the path, what the file was read as (`what`: "policy model",
//! "run configuration", ...) and what to do.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Default cap of a TOML file chunkrt reads (run configuration, budget, ecsim
/// configuration, policy manifest): the largest committed one is under 20 KiB.
pub const TOML_LIMIT_BYTES: u64 = 4 << 20;

/// Default cap of an ONNX model: protobuf cannot hold more than 2 GiB in one file
/// (larger models keep their weights in external data files, which chunkrt does not load).
pub const MODEL_LIMIT_BYTES: u64 = 2 << 30;

/// Bytes read per call when streaming.
const BLOCK_BYTES: usize = 1 << 20;

/// A file a user named could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// `open` or `fstat` failed (missing file, no permission, ...).
    #[error("{}: cannot open the {what}: {error}", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// What the file was to be read as.
        what: &'static str,
        /// The OS error (in the message; not a `source`, so that a report of the
        /// error's chain does not say it twice).
        error: std::io::Error,
    },
    /// The path names something other than a regular file.
    #[error(
        "{}: is {kind}, not a regular file: the {what} is read from a regular file; name the file itself",
        path.display()
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What the file was to be read as.
        what: &'static str,
        /// What it is ("a directory", "a FIFO (named pipe)", ...).
        kind: &'static str,
    },
    /// The file is larger than a limit (found by `fstat` before reading, or while
    /// reading a file that grew).
    #[error(
        "{}: {} is more than the {} a {what} may have{}; is this the right file?",
        path.display(),
        bytes_text(*size),
        bytes_text(*limit),
        if *grew { " (it grew while being read)" } else { "" }
    )]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// What the file was to be read as.
        what: &'static str,
        /// Its size (at least this much when it grew).
        size: u64,
        /// The limit.
        limit: u64,
        /// Whether the size was found while reading, past what `fstat` said.
        grew: bool,
    },
    /// The file's size differs from the size declared for it (a manifest's
    /// `model_bytes`).
    #[error(
        "{}: {size} bytes, but its {declared_by} declares {declared} bytes: the file was \
         changed, truncated or replaced",
        path.display()
    )]
    SizeMismatch {
        /// The path.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The declared size.
        declared: u64,
        /// Where the size is declared (`manifest m.toml (model_bytes)`).
        declared_by: String,
    },
    /// A read failed midway.
    #[error("{}: reading the {what} failed: {error}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// What the file was read as.
        what: &'static str,
        /// The OS error (in the message; not a `source`, so that a report of the
        /// error's chain does not say it twice).
        error: std::io::Error,
    },
}

impl FileError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileError::Open { path, .. }
            | FileError::NotRegular { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::SizeMismatch { path, .. }
            | FileError::Read { path, .. } => path,
        }
    }
}

/// `1234 bytes`, `3.2 MiB`, `10.0 GiB`.
pub fn bytes_text(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    if n < 1 << 10 {
        format!("{n} bytes")
    } else if n < 1 << 20 {
        format!("{:.1} KiB", f / KIB)
    } else if n < 1 << 30 {
        format!("{:.1} MiB", f / (KIB * KIB))
    } else {
        format!("{:.1} GiB", f / (KIB * KIB * KIB))
    }
}

/// A regular file opened for reading, and its size when it was opened.
#[derive(Debug)]
pub struct RegularFile {
    /// The open file.
    pub file: File,
    /// Its size from `fstat`.
    pub size: u64,
}

/// Opens `path` for reading if it is a regular file; anything else (directory, FIFO,
/// socket, character or block device) is refused without blocking and without reading.
///
/// The open uses `O_NONBLOCK`, so that a FIFO without a writer does not block it;
/// the kind is judged by `fstat` on the descriptor opened, not by a `stat` of the path
/// before (no window in which the path could be swapped). For a regular file
/// `O_NONBLOCK` changes nothing.
pub fn open_regular(path: &Path, what: &'static str) -> Result<RegularFile, FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|error| FileError::Open {
            path: path.to_path_buf(),
            what,
            error,
        })?;
    let meta = file.metadata().map_err(|error| FileError::Open {
        path: path.to_path_buf(),
        what,
        error,
    })?;
    let t = meta.file_type();
    if !t.is_file() {
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO (named pipe)"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            what,
            kind,
        });
    }
    Ok(RegularFile {
        file,
        size: meta.len(),
    })
}

/// Reads a regular file of at most `limit` bytes: refused before reading when `fstat`
/// says it is larger, and never more than `limit` bytes read when it grows meanwhile.
pub fn read_bounded(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    read_streaming(path, limit, what, None, |_| {})
}

/// Reads a regular file of at most `limit` bytes as UTF-8 text. `Ok(Err(bytes))` when
/// it is not UTF-8 (the caller says what the file looks like instead).
pub fn read_text_bounded(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Result<String, Vec<u8>>, FileError> {
    let bytes = read_bounded(path, limit, what)?;
    Ok(String::from_utf8(bytes).map_err(|e| e.into_bytes()))
}

/// The size a file is declared to have, and where it is declared (for the message).
#[derive(Clone, Debug)]
pub struct DeclaredSize {
    /// The size in bytes.
    pub bytes: u64,
    /// Where it is declared (`manifest m.toml (model_bytes)`).
    pub by: String,
}

/// Reads a regular file of at most `limit` bytes (of exactly `declared` bytes when
/// given, refused before reading otherwise) and returns its bytes with their SHA-256
/// in lowercase hex, taken while reading: the digest is of the very bytes returned.
pub fn read_with_sha256(
    path: &Path,
    limit: u64,
    what: &'static str,
    declared: Option<&DeclaredSize>,
) -> Result<(Vec<u8>, String), FileError> {
    let mut hasher = Sha256::new();
    let bytes = read_streaming(path, limit, what, declared, |block| hasher.update(block))?;
    let digest = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((bytes, digest))
}

/// The common reader: open, check kind and size, read in blocks handed to `each`.
fn read_streaming(
    path: &Path,
    limit: u64,
    what: &'static str,
    declared: Option<&DeclaredSize>,
    mut each: impl FnMut(&[u8]),
) -> Result<Vec<u8>, FileError> {
    let RegularFile { mut file, size } = open_regular(path, what)?;
    let too_large = |size: u64, grew: bool| FileError::TooLarge {
        path: path.to_path_buf(),
        what,
        size,
        limit,
        grew,
    };
    if size > limit {
        return Err(too_large(size, false));
    }
    if let Some(d) = declared {
        if size != d.bytes {
            return Err(FileError::SizeMismatch {
                path: path.to_path_buf(),
                size,
                declared: d.bytes,
                declared_by: d.by.clone(),
            });
        }
    }
    let mut out = Vec::with_capacity(size as usize);
    let mut block = vec![0u8; BLOCK_BYTES];
    loop {
        let room = (limit - out.len() as u64).saturating_add(1);
        let want = BLOCK_BYTES.min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = match file.read(&mut block[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                return Err(FileError::Read {
                    path: path.to_path_buf(),
                    what,
                    error,
                })
            }
        };
        if out.len() as u64 + n as u64 > limit {
            return Err(too_large(out.len() as u64 + n as u64, true));
        }
        each(&block[..n]);
        out.extend_from_slice(&block[..n]);
    }
    if let Some(d) = declared {
        if out.len() as u64 != d.bytes {
            return Err(FileError::SizeMismatch {
                path: path.to_path_buf(),
                size: out.len() as u64,
                declared: d.bytes,
                declared_by: d.by.clone(),
            });
        }
    }
    Ok(out)
}

/// SHA-256 (lowercase hex) of the first `lines` lines of an append-only file (a wear
/// ledger), newlines included, read as [`read_with_sha256`] reads (at most `limit`
/// bytes): what a manifest cites of it, unchanged by lines appended later. `Ok(None)`
/// when the file holds fewer lines.
pub fn lines_prefix_sha256(
    path: &Path,
    lines: u64,
    limit: u64,
    what: &'static str,
) -> Result<Option<String>, FileError> {
    let bytes = read_bounded(path, limit, what)?;
    let mut end = 0;
    for _ in 0..lines {
        match bytes[end..].iter().position(|&b| b == b'\n') {
            Some(i) => end += i + 1,
            None => return Ok(None),
        }
    }
    Ok(Some(
        Sha256::digest(&bytes[..end])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-files-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    #[test]
    fn a_regular_file_is_read_with_its_digest() {
        let p = temp("abc.txt");
        std::fs::write(&p, b"abc").unwrap();
        let (bytes, sha) = read_with_sha256(&p, 3, "test file", None).unwrap();
        assert_eq!(bytes, b"abc");
        // FIPS 180-2's example.
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let e = read_bounded(&p, 2, "test file").unwrap_err().to_string();
        assert!(
            e.contains("3 bytes is more than the 2 bytes a test file may have"),
            "{e}"
        );
        let declared = DeclaredSize {
            bytes: 4,
            by: "manifest x.toml (model_bytes)".into(),
        };
        let e = read_with_sha256(&p, 10, "test file", Some(&declared))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("3 bytes, but its manifest x.toml (model_bytes) declares 4 bytes"),
            "{e}"
        );
    }

    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() {
        let e = read_bounded(Path::new("/dev/zero"), 10, "policy model").unwrap_err();
        assert!(
            e.to_string()
                .contains("/dev/zero: is a character device, not a regular file"),
            "{e}"
        );
        let e = read_bounded(&std::env::temp_dir(), 10, "policy model").unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let fifo = temp("fifo");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_bounded(&fifo, 10, "policy model").unwrap_err();
        assert!(e.to_string().contains("is a FIFO (named pipe)"), "{e}");
        let e = read_bounded(&temp("missing"), 10, "policy model").unwrap_err();
        assert!(
            e.to_string().contains("cannot open the policy model"),
            "{e}"
        );
    }

    #[test]
    fn a_sparse_file_above_the_limit_is_refused_before_reading() {
        let p = temp("sparse");
        let f = File::create(&p).unwrap();
        f.set_len(10 << 30).unwrap();
        let e = read_bounded(&p, MODEL_LIMIT_BYTES, "policy model").unwrap_err();
        assert!(
            e.to_string()
                .contains("10.0 GiB is more than the 2.0 GiB a policy model may have"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
    }
}
