//! systemd service notifications (`Type=notify`, sd_notify(3)): `READY=1` once every
//! port is listening, `STATUS=` lines, `RELOADING=1` around a reload, `STOPPING=1`.
//! Nothing is sent when `NOTIFY_SOCKET` is unset (not started by systemd).

use sd_notify::NotifyState;

/// Start-up is done: every port exists, the sockets listen.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A new status line.
pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// A reload begins (systemd ≥ 253 wants the monotonic time beside it).
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(t) => send(&[NotifyState::Reloading, t]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// Shutdown begins.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify the service manager (NOTIFY_SOCKET)");
    }
}
