//! The control socket on the tokio runtime: any number of clients at once, each served
//! by its own task; requests bounded in size ([`MAX_REQUEST_BYTES`]) and in idle time
//! ([`IDLE_TIMEOUT`]), so no client can stall the others or hold memory.
//!
//! The socket is created with mode 0660 (owner root, group `vswitch` when that group
//! exists): root and the members of `vswitch` may use `vswitchctl`, nobody else. It is
//! bound under a temporary name and renamed into place once its mode is set, so it is
//! never reachable with looser permissions. Of those who can connect, only root and the
//! daemon's own user may change the switch ([`Request::is_change`]): the kernel's
//! credentials of the peer (`SO_PEERCRED`) decide, so the group can watch but not edit.

use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, warn};

use super::ops::Control;
use super::protocol::{parse_request_line, ReplyLine, Request, IDLE_TIMEOUT, MAX_REQUEST_BYTES};

/// The group allowed to use the control socket besides root.
pub const CONTROL_GROUP: &str = "vswitch";

/// The socket's permissions: read and write for owner and group.
const SOCKET_MODE: u32 = 0o660;

/// Binds the control socket at `path`: creates its directory if needed, refuses a path
/// a live daemon serves, replaces a stale socket file, and sets mode 0660 (group
/// `vswitch` if it exists) before the socket appears under its name.
///
/// # Errors
/// The directory cannot be made, another vswitchd answers there, or binding fails.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    if path.exists() {
        // A live daemon answers; a stale file from a crashed run does not.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("another vswitchd is serving {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let access = crate::sys::SocketAccess {
        gid: crate::sys::group_id(CONTROL_GROUP),
        mode: Some(SOCKET_MODE),
    };
    let listener = crate::sys::bind_unix(path, access)?;
    listener.set_nonblocking(true)?;
    UnixListener::from_std(listener)
}

/// Serves the control socket until the runtime stops.
pub async fn serve(listener: UnixListener, ctl: Arc<Control>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(client(stream, ctl.clone()));
            }
            Err(e) => {
                // EMFILE and the like: wait a moment rather than spin.
                warn!(error = %e, "control socket accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves one client: request lines in, reply lines out, until it closes, sends
/// nothing for [`IDLE_TIMEOUT`], or sends a line longer than [`MAX_REQUEST_BYTES`].
async fn client(stream: UnixStream, ctl: Arc<Control>) {
    // SAFETY: geteuid cannot fail and touches no memory.
    let own = unsafe { libc::geteuid() };
    // The peer's uid as the kernel saw it at connect (SO_PEERCRED); unknown: read-only.
    let peer = stream.peer_cred().ok().map(|c| c.uid());
    let may_change = peer.is_some_and(|u| u == 0 || u == own);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = (MAX_REQUEST_BYTES + 1) as u64;
        let read = tokio::time::timeout(
            IDLE_TIMEOUT,
            (&mut rd).take(limit).read_until(b'\n', &mut line),
        )
        .await;
        let n = match read {
            Err(_) => {
                debug!("control client idle; disconnected");
                let _ = reply(&mut wr, Err("idle for 10 s; disconnected".into())).await;
                return;
            }
            Ok(Err(_)) | Ok(Ok(0)) => return,
            Ok(Ok(n)) => n,
        };
        if n > MAX_REQUEST_BYTES || !line.ends_with(b"\n") && n as u64 == limit {
            let _ = reply(
                &mut wr,
                Err(format!(
                    "request line longer than {MAX_REQUEST_BYTES} bytes; connection closed"
                )),
            )
            .await;
            return;
        }
        let answer = match parse_request_line(&line) {
            Ok(r) if r.is_change() && !may_change => Err(refused(peer, &r)),
            Ok(r) => super::handlers::dispatch(&ctl, r).await,
            Err(e) => Err(e),
        };
        if reply(&mut wr, answer).await.is_err() {
            return;
        }
    }
}

/// The refusal of a change from a client that may only read.
fn refused(uid: Option<u32>, req: &Request) -> String {
    let who = uid.map_or("a client of unknown uid".to_string(), |u| {
        format!("uid {u}")
    });
    // The request's `cmd` tag, as the client wrote it.
    let what = serde_json::to_value(req)
        .ok()
        .and_then(|v| v.get("cmd")?.as_str().map(str::to_string))
        .unwrap_or_default();
    format!(
        "permission denied: {who} may read but not change the switch ({what}); changes need root or vswitchd's own user"
    )
}

async fn reply(
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    r: Result<super::protocol::Response, String>,
) -> std::io::Result<()> {
    let mut s = serde_json::to_vec(&ReplyLine::new(r)).map_err(std::io::Error::other)?;
    s.push(b'\n');
    // A client that does not read its reply is dropped like an idle one.
    tokio::time::timeout(IDLE_TIMEOUT, wr.write_all(&s))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}
