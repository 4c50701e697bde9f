//! The operator's socket: created private, and who may use it.
//!
//! The socket is bound inside a directory chunkrt creates for it (mode 0700, beside
//! the configured path), given its mode (0600, or 0660 and the configured group) there,
//! and only then renamed to its path: at no moment can anyone else reach it with a wider
//! mode, whatever the process's umask. Only a socket already at the path is replaced
//! (`chunkrt_config::check_socket_path`), and only when no process answers on it.
//! Every connection's peer is then checked by its credentials (`SO_PEERCRED`, and
//! `SO_PEERGROUPS` for a configured group): a second lock behind the file's mode.

use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Who may use the socket: chunkrt's own (effective) user, root, and the members of
/// `group` when one is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// chunkrt's effective user id.
    pub uid: u32,
    /// The configured group's id.
    pub group: Option<u32>,
}

/// A connected peer, as the kernel saw it at `connect`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its process id.
    pub pid: i32,
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
    /// Its supplementary groups (empty where the kernel does not say).
    pub groups: Vec<u32>,
}

impl Access {
    /// This process's user, and `group`.
    pub fn this_user(group: Option<u32>) -> Access {
        Access {
            uid: nix::unistd::geteuid().as_raw(),
            group,
        }
    }

    /// Whether `peer` may send commands.
    pub fn permits(&self, peer: &Peer) -> bool {
        peer.uid == 0
            || peer.uid == self.uid
            || self
                .group
                .is_some_and(|g| peer.gid == g || peer.groups.contains(&g))
    }

    /// The socket's mode.
    pub fn mode(&self) -> u32 {
        if self.group.is_some() {
            0o660
        } else {
            0o600
        }
    }
}

/// The credentials of the peer of `conn`.
pub fn peer(conn: &UnixStream) -> std::io::Result<Peer> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(conn, PeerCredentials).map_err(std::io::Error::from)?;
    Ok(Peer {
        pid: cred.pid(),
        uid: cred.uid(),
        gid: cred.gid(),
        groups: peer_groups(conn),
    })
}

/// The peer's supplementary groups (`SO_PEERGROUPS`, Linux 4.13); none where the kernel
/// does not answer (then only the primary group counts).
fn peer_groups(conn: &UnixStream) -> Vec<u32> {
    use std::os::fd::AsRawFd;
    let mut groups = vec![0 as libc::gid_t; 64];
    for _ in 0..2 {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: the buffer is `len` bytes of gid_t the kernel may write; `len` is
        // updated to the bytes written (or, with ERANGE, the bytes needed).
        let rc = unsafe {
            libc::getsockopt(
                conn.as_fd().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return groups;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            break;
        }
        groups.resize(n.max(groups.len() + 1), 0);
    }
    Vec::new()
}

/// The socket chunkrt serves, as found on the file system (device and inode): a later
/// run of the same process finds its own socket still there by them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketId {
    dev: u64,
    ino: u64,
}

impl SocketId {
    /// The socket at `path` (the link itself, not followed), if it is one.
    pub fn at(path: &Path) -> Option<SocketId> {
        use std::os::unix::fs::FileTypeExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        m.file_type().is_socket().then(|| SocketId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Creates the socket at `path` for `access` (see the module's documentation); the
/// listener and the socket's id. The error says what went wrong in words.
pub fn bind_private(path: &Path, access: Access) -> Result<(UnixListener, SocketId), String> {
    chunkrt_config::check_socket_path(path)?;
    if SocketId::at(path).is_some() && UnixStream::connect(path).is_ok() {
        return Err(format!(
            "`{}`: another process answers on this socket (another chunkrt run?); stop it \
             or choose another path",
            path.display()
        ));
    }
    let dir = private_dir(path);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("creating the private directory `{}`: {e}", dir.display()))?;
    let result = bind_in(&dir, path, access);
    // The socket has left it (or failed to be made): the directory goes either way.
    let _ = std::fs::remove_file(dir.join("s"));
    let _ = std::fs::remove_dir(&dir);
    result
}

/// `<directory of path>/.op-<pid>`: beside the socket's path, so the rename stays on one
/// file system; within `chunkrt_config::PRIVATE_SUFFIX_MAX` of the directory's path.
fn private_dir(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    parent.join(format!(".op-{}", std::process::id()))
}

fn bind_in(dir: &Path, path: &Path, access: Access) -> Result<(UnixListener, SocketId), String> {
    let private = dir.join("s");
    let listener = UnixListener::bind(&private)
        .map_err(|e| format!("binding `{}`: {e}", private.display()))?;
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(access.mode()))
        .map_err(|e| format!("setting the socket's mode: {e}"))?;
    if let Some(gid) = access.group {
        std::os::unix::fs::chown(&private, None, Some(gid)).map_err(|e| {
            format!(
                "giving the socket to group {gid}: {e} (chunkrt's user must be root or a member)"
            )
        })?;
    }
    // Checked again just before: what may have appeared at the path since.
    chunkrt_config::check_socket_path(path)?;
    std::fs::rename(&private, path)
        .map_err(|e| format!("moving the socket to `{}`: {e}", path.display()))?;
    let id = SocketId::at(path).ok_or_else(|| format!("`{}` vanished", path.display()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("the listener: {e}"))?;
    Ok((listener, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn the_same_user_root_and_the_configured_group_only() {
        let alone = Access {
            uid: 1000,
            group: None,
        };
        assert!(alone.permits(&peer(1000, 1000, &[])));
        assert!(alone.permits(&peer(0, 0, &[])));
        assert!(!alone.permits(&peer(65534, 65534, &[])));
        assert!(!alone.permits(&peer(1001, 1000, &[1000])));
        let group = Access {
            uid: 1000,
            group: Some(50),
        };
        assert!(group.permits(&peer(1001, 50, &[])));
        assert!(group.permits(&peer(1001, 1001, &[7, 50])));
        assert!(!group.permits(&peer(1001, 1001, &[7, 51])));
        assert_eq!((alone.mode(), group.mode()), (0o600, 0o660));
    }

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("chunkrt-rt-operator-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Under umask 000 (the review's case: the old socket was 0777), 0600; the private
    /// directory is gone; this process is its own peer.
    #[test]
    fn the_socket_is_created_0600_whatever_the_umask_and_replaces_only_a_dead_socket() {
        let d = dir("bind");
        let path = d.join("op.sock");
        // SAFETY: umask has no preconditions (process-wide, and this test's process is
        // its own under nextest).
        let old = unsafe { libc::umask(0) };
        let made = bind_private(&path, Access::this_user(None));
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let (listener, id) = made.unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o600);
        assert_eq!(SocketId::at(&path), Some(id));
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "only the socket");
        let conn = UnixStream::connect(&path).unwrap();
        let me = super::peer(&conn).unwrap();
        assert_eq!(me.uid, nix::unistd::geteuid().as_raw());
        assert!(Access::this_user(None).permits(&me));
        // A live socket is not taken over; a dead one is replaced.
        let e = bind_private(&path, Access::this_user(None)).unwrap_err();
        assert!(e.contains("another process answers"), "{e}");
        drop((listener, conn));
        let (_l, id2) = bind_private(&path, Access::this_user(Some(0))).unwrap();
        assert_ne!(id, id2);
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!((m.permissions().mode() & 0o7777, m.gid()), (0o660, 0));
        let _ = std::fs::remove_dir_all(&d);
    }
}
