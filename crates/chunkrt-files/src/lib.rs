//! chunkrt-files: every file a user names is read with a bound.
//!
//! A path in a config or on the command line can name anything: a directory, a FIFO
//! nobody writes to (`open` blocks forever), `/dev/zero` (a read never ends), a sparse
//! file of 10 GB. [`open_regular`] opens with `O_NONBLOCK` (so a FIFO cannot block the
//! open) and refuses, by `fstat` on the descriptor it opened, whatever is not a regular
//! file. [`read_bounded`] then refuses a file above a limit before reading a byte, and
//! reads at most the limit even if the file grows meanwhile; [`read_with_sha256`] takes
//! the SHA-256 of the very bytes it returns, in the same pass; [`sha256_streaming`]
//! takes it without holding the file (constant memory, a file cited by a manifest).
//! [`lines::LineReader`] reads a JSON-lines file a line at a time with a cap on a line
//! (constant memory, a wear ledger), [`lines::lines_prefix_sha256`] digests its first
//! lines that way, and [`open_append`] opens a file to append to only if it is a
//! regular one.
//!
//! Every error names the path, what the file was read as (`what`: "policy model",
//! "run configuration", ...) and what to do.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub mod lines;

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
    /// A line of a line-oriented file (a wear ledger) is longer than its cap: the
    /// file is not what it was named as (a sparse file, a binary), or it was damaged.
    #[error(
        "{}: line {line} is longer than the {} a line of a {what} may have; is this the right file?",
        path.display(),
        bytes_text(*limit)
    )]
    LineTooLong {
        /// The path.
        path: PathBuf,
        /// What the file was read as.
        what: &'static str,
        /// The line's number (from 1).
        line: u64,
        /// The cap.
        limit: u64,
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
            | FileError::LineTooLong { path, .. }
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
    regular(file, path, what)
}

/// Opens `path` to append to and read (its tail; created, mode 0644 before the umask,
/// when it does not exist) if it is a regular file; anything else is refused without
/// blocking and without a byte written: `/dev/zero` or `/dev/null` would swallow the
/// appends, a FIFO is judged by `fstat` after an open that does not wait for a peer.
/// The size is the file's before the append.
pub fn open_append(path: &Path, what: &'static str) -> Result<RegularFile, FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|error| FileError::Open {
            path: path.to_path_buf(),
            what,
            error,
        })?;
    regular(file, path, what)
}

/// `file` (opened from `path`) if `fstat` says it is a regular file.
fn regular(file: File, path: &Path, what: &'static str) -> Result<RegularFile, FileError> {
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
    Ok((bytes, hex(&hasher.finalize())))
}

/// The SHA-256 (lowercase hex) and size of a regular file of at most `limit` bytes,
/// streamed: the file is never held, so the memory is one block whatever its size
/// (a checkpoint a manifest cites). Refused before reading when `fstat` says it is
/// larger than `limit`, and when it grows past it while being read.
pub fn sha256_streaming(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<(u64, String), FileError> {
    let mut hasher = Sha256::new();
    let size = stream(path, limit, what, None, |block, _| hasher.update(block))?;
    Ok((size, hex(&hasher.finalize())))
}

/// Bytes as lowercase hex (a digest as chunkrt writes it).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The common reader: the file's bytes, collected from [`stream`].
fn read_streaming(
    path: &Path,
    limit: u64,
    what: &'static str,
    declared: Option<&DeclaredSize>,
    mut each: impl FnMut(&[u8]),
) -> Result<Vec<u8>, FileError> {
    let mut out = Vec::new();
    stream(path, limit, what, declared, |block, size| {
        if out.is_empty() {
            // The size fstat said, within `limit`.
            out.reserve(usize::try_from(size).unwrap_or(0));
        }
        each(block);
        out.extend_from_slice(block);
    })?;
    Ok(out)
}

/// Opens, checks kind and size, and hands the file to `each` in blocks of at most
/// [`BLOCK_BYTES`] (with the size `fstat` said); returns the bytes read. Never more
/// than `limit + 1` bytes are read.
fn stream(
    path: &Path,
    limit: u64,
    what: &'static str,
    declared: Option<&DeclaredSize>,
    mut each: impl FnMut(&[u8], u64),
) -> Result<u64, FileError> {
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
    let mismatch = |size: u64, d: &DeclaredSize| FileError::SizeMismatch {
        path: path.to_path_buf(),
        size,
        declared: d.bytes,
        declared_by: d.by.clone(),
    };
    if let Some(d) = declared.filter(|d| d.bytes != size) {
        return Err(mismatch(size, d));
    }
    let mut block =
        vec![0u8; usize::try_from(size).map_or(BLOCK_BYTES, |s| s.clamp(4096, BLOCK_BYTES))];
    let mut read = 0u64;
    loop {
        let room = (limit - read).saturating_add(1);
        let want = block.len().min(usize::try_from(room).unwrap_or(usize::MAX));
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
        if read + n as u64 > limit {
            return Err(too_large(read + n as u64, true));
        }
        each(&block[..n], size);
        read += n as u64;
    }
    if let Some(d) = declared.filter(|d| d.bytes != read) {
        return Err(mismatch(read, d));
    }
    Ok(read)
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

    /// The streamed digest is the digest of the bytes; the limit holds as for a read.
    #[test]
    fn a_streamed_digest_is_the_files_digest() {
        let p = temp("stream.bin");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let (size, sha) = sha256_streaming(&p, 3_000_000, "test file").unwrap();
        assert_eq!(size, 3_000_000);
        assert_eq!(sha, hex(&Sha256::digest(&bytes)));
        let e = sha256_streaming(&p, 2_999_999, "test file").unwrap_err();
        assert!(matches!(e, FileError::TooLarge { grew: false, .. }), "{e}");
        let e = sha256_streaming(Path::new("/dev/zero"), 10, "test file").unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
    }
}
