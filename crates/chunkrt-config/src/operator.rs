//! `[operator]` against the host it will run on: the socket's path (its directory, the
//! file already there, its length) and the group named. Checked when a run
//! configuration is loaded (`chunkrt run`, `chunkrt validate`) and again by the runtime
//! as it creates the socket.

use crate::schema::Config;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

/// The longest path a UNIX socket's address holds (`sun_path`: 108 bytes, its NUL
/// included).
pub const SOCKET_PATH_MAX: usize = 107;

/// What the private directory the socket is bound in adds to the path of the socket's
/// directory: `/.op-<pid>/s` (a pid has at most 7 digits).
pub const PRIVATE_SUFFIX_MAX: usize = 14;

/// Whether a socket may be created at `path`: its directory exists, is not open to
/// every user's writes (without the sticky bit, anyone could put their own socket in
/// chunkrt's place), the path fits a socket's address, and nothing but a socket is
/// there already (a socket left by an earlier run is replaced; any other file is
/// refused, never removed). The message says what is wrong and what to do.
pub fn check_socket_path(path: &Path) -> Result<(), String> {
    if path.file_name().is_none() {
        return Err(format!("`{}` names no file", path.display()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let len = path.as_os_str().len();
    if len > SOCKET_PATH_MAX {
        return Err(format!(
            "`{}` is {len} bytes long: a UNIX socket's path holds at most {SOCKET_PATH_MAX}",
            path.display()
        ));
    }
    let dir_len = dir.as_os_str().len();
    if dir_len + PRIVATE_SUFFIX_MAX > SOCKET_PATH_MAX {
        return Err(format!(
            "its directory `{}` is {dir_len} bytes long: at most {} (the socket is first \
             bound in a private directory there, whose path must fit a socket's address)",
            dir.display(),
            SOCKET_PATH_MAX - PRIVATE_SUFFIX_MAX
        ));
    }
    check_dir(dir)?;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => Ok(()),
        Ok(m) => Err(format!(
            "`{}` is {}: only a socket (left by an earlier run) is replaced there; remove \
             it or choose another path",
            path.display(),
            file_kind(&m.file_type())
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("`{}`: {e}", path.display())),
    }
}

/// The socket's directory: there, a directory, not writable by every user unless sticky.
fn check_dir(dir: &Path) -> Result<(), String> {
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "the directory `{}` does not exist (it is not created)",
                dir.display()
            ))
        }
        Err(e) => return Err(format!("the directory `{}`: {e}", dir.display())),
    };
    if !m.is_dir() {
        return Err(format!("`{}` is not a directory", dir.display()));
    }
    let mode = m.permissions().mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "the directory `{}` (mode {:04o}) can be written by every user and has no sticky \
             bit: anyone could put their own socket in chunkrt's place; choose a directory \
             only chunkrt's user (and its group) can write",
            dir.display(),
            mode & 0o7777
        ));
    }
    Ok(())
}

/// What a file that is not a socket is, in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "a file that is not a socket"
    }
}

/// The id of the group named `name` on this host.
pub fn resolve_group(name: &str) -> Result<u32, String> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!(
            "no group named `{name}` on this host (`getent group {name}` lists it when there is)"
        )),
        Err(e) => Err(format!("cannot look up the group `{name}`: {e}")),
    }
}

impl Config {
    /// `[operator]` against this host (the file system, the group database), the socket's
    /// path resolved against the file's directory; `(key path, message)` on error.
    pub(crate) fn check_operator_host(&self) -> Result<(), (String, String)> {
        let Some(op) = &self.operator else {
            return Ok(());
        };
        if let Some(socket) = &op.socket {
            check_socket_path(&self.resolve(socket)).map_err(|m| ("operator.socket".into(), m))?;
        }
        if let Some(group) = &op.group {
            resolve_group(group).map_err(|m| ("operator.group".into(), m))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "chunkrt-config-operator-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    #[test]
    fn only_a_socket_or_nothing_may_be_where_the_socket_goes() {
        let d = dir("kinds");
        let free = d.join("free.sock");
        assert_eq!(check_socket_path(&free), Ok(()));
        let stale = d.join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert_eq!(check_socket_path(&stale), Ok(()));
        let victim = d.join("victim.txt");
        std::fs::write(&victim, "kept").unwrap();
        let link = d.join("link.sock");
        std::os::unix::fs::symlink(&stale, &link).unwrap();
        for (p, kind) in [
            (&victim, "a regular file"),
            (&d, "a directory"),
            (&link, "a symbolic link"),
        ] {
            let e = check_socket_path(p).unwrap_err();
            assert!(e.contains(kind) && e.contains("only a socket"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_directory_must_exist_and_be_closed_to_strangers_and_the_path_fit() {
        let d = dir("dir");
        let e = check_socket_path(&d.join("no/such/op.sock")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_socket_path(&d.join("op.sock")).unwrap_err();
        assert!(e.contains("every user"), "{e}");
        // Sticky, as /tmp: a stranger may not rename or remove what chunkrt put there.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check_socket_path(&d.join("op.sock")), Ok(()));
        let long = d.join("x".repeat(SOCKET_PATH_MAX));
        assert!(check_socket_path(&long)
            .unwrap_err()
            .contains("at most 107"));
        let deep = Path::new("/")
            .join("d".repeat(SOCKET_PATH_MAX - 10))
            .join("s");
        assert!(check_socket_path(&deep)
            .unwrap_err()
            .contains("private directory"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_group_is_looked_up_by_name() {
        assert_eq!(resolve_group("root"), Ok(0));
        let e = resolve_group("no-such-group-chunkrt").unwrap_err();
        assert!(e.contains("no group named"), "{e}");
    }
}
