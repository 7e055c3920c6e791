//! Starting, running and stopping vswitchd.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::config::Config;
use crate::datapath::pmd::Pmd;
use crate::ports::{Port, PortKind};
use crate::switch::Switch;

/// Errors that stop vswitchd from starting. Nothing is left running when one occurs.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A server-mode socket could not be created.
    #[error("port {port}: cannot listen on {path}: {source}")]
    Listen {
        /// Port name.
        port: String,
        /// Socket path.
        path: String,
        /// Why.
        source: vhost::vhost_user::Error,
    },
    /// The control socket could not be created.
    #[error("--control {path}: {source}")]
    Control {
        /// Socket path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The metrics endpoint could not be bound.
    #[error("--metrics {addr}: {source}")]
    Metrics {
        /// Address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A port could not be opened (an AF_XDP uplink or tap; the message names the port
    /// and what failed), or the PMDs' eventfds could not be made.
    #[error("{0}")]
    Ports(std::io::Error),
    /// A thread could not be started.
    #[error("cannot start thread {name}: {source}")]
    Thread {
        /// Thread name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A running daemon.
pub struct Daemon {
    /// The switch.
    pub switch: Arc<Switch>,
    pmd_threads: Vec<std::thread::JoinHandle<()>>,
    control_path: std::path::PathBuf,
}

fn spawn<F: FnOnce() + Send + 'static>(
    name: String,
    f: F,
) -> Result<std::thread::JoinHandle<()>, StartError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|source| StartError::Thread { name, source })
}

impl Daemon {
    /// Binds every socket first (so a bad path fails before anything runs), then starts
    /// PMD threads, port threads, housekeeping and the control socket.
    pub fn start(config: Config) -> Result<Daemon, StartError> {
        let switch = Switch::new(config.clone()).map_err(StartError::Ports)?;
        let topo = switch.topo();
        for tp in topo.iter() {
            if let Some(v) = tp.port.vhost() {
                v.bind().map_err(|source| StartError::Listen {
                    port: tp.port.name.clone(),
                    path: v.path.display().to_string(),
                    source,
                })?;
            }
        }
        let metrics = match config.metrics {
            Some(addr) => Some(
                std::net::TcpListener::bind(addr)
                    .map_err(|source| StartError::Metrics { addr, source })?,
            ),
            None => None,
        };

        let control =
            crate::control::bind(&config.control).map_err(|source| StartError::Control {
                path: config.control.display().to_string(),
                source,
            })?;

        let mut pmd_threads = Vec::new();
        for i in 0..switch.pmds.len() {
            let sw = switch.clone();
            let cpu = switch.pmds[i].cpu;
            let mode = config.poll;
            pmd_threads.push(spawn(format!("pmd{i}"), move || {
                if let Some(cpu) = cpu {
                    if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
                        warn!(pmd = i, cpu, "could not pin PMD thread");
                    }
                }
                Pmd::new(sw, i).run(mode);
            })?);
        }

        for tp in topo.iter() {
            if tp.port.vhost().is_some() {
                let sw = switch.clone();
                let port = tp.port.clone();
                spawn(format!("port-{}", port.name), move || port_loop(sw, port))?;
            }
        }

        let sw = switch.clone();
        spawn("housekeeping".into(), move || housekeeping(sw))?;
        if topo
            .iter()
            .any(|p| matches!(p.port.kind, PortKind::Afxdp(_) | PortKind::Tap(_)))
        {
            let sw = switch.clone();
            spawn("links".into(), move || watch_links(sw))?;
        }
        let sw = switch.clone();
        spawn("control".into(), move || crate::control::serve(control, sw))?;
        if let Some(l) = metrics {
            let sw = switch.clone();
            spawn("metrics".into(), move || {
                crate::control::metrics::serve(l, sw)
            })?;
        }

        info!(
            ports = topo.iter().count(),
            pmds = switch.pmds.len(),
            poll = %config.poll,
            control = %config.control.display(),
            "vswitchd started"
        );
        Ok(Daemon {
            switch,
            pmd_threads,
            control_path: config.control,
        })
    }

    /// Stops: PMDs finish their burst and exit, every vhost-user connection is closed
    /// (guests see the link go down), and the sockets are removed.
    pub fn stop(self) {
        self.switch.shutdown.store(true, Ordering::SeqCst);
        self.switch.wakers.wake_all();
        for t in self.pmd_threads {
            let _ = t.join();
        }
        for tp in self.switch.topo().iter() {
            tp.port.close();
        }
        let _ = std::fs::remove_file(&self.control_path);
        info!("vswitchd stopped");
    }
}

fn port_loop(switch: Arc<Switch>, port: Arc<Port>) {
    let Some(v) = port.vhost() else { return };
    let changed = |up: bool| {
        if !up {
            let n = switch.fdb.flush_port(port.id, false);
            info!(port = %port.name, flushed_macs = n, "port disconnected");
        }
        switch.wakers.wake_all();
    };
    let path = v.path.display().to_string();
    let mut logged_absent = false;
    while !switch.stopping() && !v.is_closed() {
        match v.serve_once(&port.name, &switch.wakers, &changed) {
            Ok(()) => logged_absent = false,
            Err(_) if v.is_closed() || switch.stopping() => break,
            Err(e) => {
                if v.mode == crate::config::PortType::VhostUser {
                    warn!(port = %port.name, error = %e, "vhost-user accept failed");
                } else if !logged_absent {
                    info!(port = %port.name, path, error = %e, "peer socket not available; retrying every second");
                    logged_absent = true;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// Keeps each AF_XDP uplink's link state and MTU, and each tap's up/down state, current
/// from rtnetlink notifications (nicoffload's [`nicoffload::link::LinkWatch`]): a down
/// port is skipped by floods and frames sent to it are counted as `port_down`; an
/// uplink's MTU bounds what it transmits.
fn watch_links(switch: Arc<Switch>) {
    use std::os::fd::AsRawFd;
    let mut w = match nicoffload::link::LinkWatch::new() {
        Ok(w) => w,
        Err(e) => {
            warn!(error = %e, "cannot watch link state (rtnetlink); uplinks stay as found at start");
            return;
        }
    };
    // Wake up once a second to notice shutdown.
    let tv = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: SO_RCVTIMEO with a valid timeval on the watch's own socket.
    unsafe {
        libc::setsockopt(
            w.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let mut resync = true;
    while !switch.stopping() {
        if resync && w.dump().is_ok() {
            resync = false;
        }
        let events = match w.recv() {
            Ok(ev) => ev,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => {
                // ENOBUFS: notifications were lost; read the whole state again.
                warn!(error = %e, "link notifications lost; re-reading link state");
                resync = true;
                continue;
            }
        };
        let topo = switch.topo();
        for ev in events {
            for p in topo.iter().map(|tp| &tp.port) {
                if let PortKind::Tap(t) = &p.kind {
                    // The tap has carrier while vswitchd holds it: only IFF_UP matters.
                    let up = ev.admin_up && !ev.removed;
                    if t.ifindex == ev.ifindex && up != t.link_up() {
                        info!(port = %p.name, iface = %t.ifname, link = if up { "up" } else { "down" }, "tap link state");
                        t.set_link(up);
                        switch.wakers.wake_all();
                    }
                    continue;
                }
                let PortKind::Afxdp(x) = &p.kind else {
                    continue;
                };
                if x.ifindex != ev.ifindex {
                    continue;
                }
                let up = ev.usable();
                let mtu = if ev.mtu == 0 { x.mtu() } else { ev.mtu };
                if up != x.link_up() || mtu != x.mtu() {
                    info!(port = %p.name, iface = %x.iface, link = if up { "up" } else { "down" }, mtu, "uplink link state");
                    x.set_link(up, mtu);
                    switch.wakers.wake_all();
                }
            }
        }
    }
}

fn housekeeping(switch: Arc<Switch>) {
    let mut was_up = std::collections::HashMap::new();
    while !switch.stopping() {
        std::thread::sleep(Duration::from_secs(1));
        let aged = switch.fdb.age();
        if aged > 0 {
            tracing::debug!(aged, "FDB entries aged out");
        }
        let topo = switch.topo();
        for p in topo.iter().map(|tp| &tp.port) {
            let up = p.link_up();
            if up != was_up.insert(p.id, up).unwrap_or(false) {
                info!(port = %p.name, link = if up { "up" } else { "down" }, "link state");
                if !up {
                    switch.fdb.flush_port(p.id, false);
                }
            }
        }
    }
}
