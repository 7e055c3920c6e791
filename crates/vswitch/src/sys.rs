//! Small operating-system helpers the control socket and the vhost-user ports share:
//! group lookup and unix sockets whose file has its owner group and mode before anyone
//! can reach it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// Who may open a socket file: its group and mode, applied before the file appears
/// under its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SocketAccess {
    /// The owning group (`None`: the daemon's).
    pub gid: Option<u32>,
    /// The mode (`None`: what the umask leaves).
    pub mode: Option<u32>,
}

/// The id of group `name` (or `name` itself when it is a number), if it exists.
pub fn group_id(name: &str) -> Option<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Some(gid);
    }
    let c = CString::new(name).ok()?;
    // SAFETY: `struct group` is plain data (pointers and integers); all-zero is a valid
    // value that getgrnam_r overwrites.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16 * 1024];
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: getgrnam_r with a NUL-terminated name, a group struct and a buffer we own
    // (their sizes given), and an out pointer; reentrant.
    let r = unsafe {
        libc::getgrnam_r(
            c.as_ptr(),
            &mut grp,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        )
    };
    (r == 0 && !out.is_null()).then_some(grp.gr_gid)
}

/// Sets `access`'s mode and group on `path`.
///
/// # Errors
/// chmod or chown failed.
pub fn restrict(path: &Path, access: SocketAccess) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(mode) = access.mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    if let Some(gid) = access.gid {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: chown(2) with a NUL-terminated path; -1 keeps the owner.
        if unsafe { libc::chown(c.as_ptr(), u32::MAX, gid) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Binds a unix stream socket at `path` with `access`: bound under a temporary name in
/// the same directory, given its group and mode, then renamed into place, so it is never
/// reachable under `path` with other permissions. A file already at `path` is replaced
/// (the caller decides whether a live server there must be refused first).
///
/// # Errors
/// Binding, chmod/chown or the rename failed; nothing is left behind.
pub fn bind_unix(path: &Path, access: SocketAccess) -> std::io::Result<UnixListener> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    let r = restrict(&tmp, access).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn bound_socket_has_its_mode_and_group() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.sock");
        std::fs::write(&p, b"stale").unwrap();
        let gid = group_id("root").unwrap();
        let access = SocketAccess {
            gid: Some(gid),
            mode: Some(0o660),
        };
        let _l = bind_unix(&p, access).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o660);
        assert_eq!(m.gid(), gid);
        assert!(std::os::unix::net::UnixStream::connect(&p).is_ok());
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }

    #[test]
    fn groups_by_name_and_number() {
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_id("4242"), Some(4242));
        assert_eq!(group_id("no-such-group-here"), None);
    }
}
