//! Starting, running and stopping vswitchd.
//!
//! Threads: one PMD thread per `--pmd-cpus` CPU (pinned; one unpinned without it), and
//! one small tokio runtime for everything else ([`crate::control`]), whose threads
//! avoid the PMD CPUs. vhost-user protocol handling runs on `vhost-user-backend`'s own
//! threads, started from the runtime's blocking pool.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use crate::config::{Args, Config};
use crate::control::ops::Control;
use crate::control::{housekeeping, metrics, netlink, notify, overlay, server};
use crate::datapath::pmd::Pmd;
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
    /// The overlay does not fit the host: an endpoint's address is not on its uplink,
    /// or a VNI port's MTU plus the tunnel overhead exceeds the uplink's MTU.
    #[error("{0}")]
    Overlay(String),
    /// The Open vSwitch database remote (`--ovsdb`) does not read.
    #[error("{0}")]
    Ovsdb(String),
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
    /// The control plane.
    pub control: Arc<Control>,
    pmd_threads: Vec<std::thread::JoinHandle<()>>,
    control_path: std::path::PathBuf,
    /// SIGTERM, SIGINT and SIGHUP, caught from before readiness is announced: a
    /// supervisor may stop the daemon the moment it reads READY=1.
    signals: Option<Signals>,
}

/// The signals [`Daemon::run`] serves.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Option<Signals> {
        Some(Signals {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }
}

impl Daemon {
    /// Opens every port and binds every socket first (so a bad path fails before
    /// anything runs), then starts the PMD threads and, on the current tokio runtime, the
    /// port services, the control socket, metrics, rtnetlink watching and the
    /// housekeeping; tells systemd it is ready.
    ///
    /// # Errors
    /// What could not be opened, bound or started.
    pub async fn start(config: Config, args: Args) -> Result<Daemon, StartError> {
        crate::config::geneve::check_host(&config).map_err(StartError::Overlay)?;
        let c = config.clone();
        let switch = tokio::task::spawn_blocking(move || Switch::new(c))
            .await
            .map_err(|e| StartError::Ports(std::io::Error::other(e)))?
            .map_err(StartError::Ports)?;
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
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| StartError::Metrics { addr, source })?,
            ),
            None => None,
        };
        let control = server::bind(&config.control).map_err(|source| StartError::Control {
            path: config.control.display().to_string(),
            source,
        })?;

        let mut pmd_threads = Vec::new();
        for i in 0..switch.pmds.len() {
            let sw = switch.clone();
            let cpu = switch.pmds[i].cpu;
            let t = std::thread::Builder::new()
                .name(format!("pmd{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
                            warn!(pmd = i, cpu, "could not pin PMD thread");
                        }
                    }
                    // Naps of a few µs (adaptive polling) would otherwise last the
                    // default 50 µs of timer slack each.
                    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches no memory.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000_u64, 0, 0, 0) };
                    Pmd::new(sw, i).run();
                })
                .map_err(|source| StartError::Thread {
                    name: format!("pmd{i}"),
                    source,
                })?;
            pmd_threads.push(t);
        }
        if config.ovn.is_some() {
            // OVN's controller actions, off the PMDs (its own thread, unpinned).
            let sw = switch.clone();
            let t = std::thread::Builder::new()
                .name("slowpath".into())
                .spawn(move || crate::datapath::lflow::slow::run(sw))
                .map_err(|source| StartError::Thread {
                    name: "slowpath".into(),
                    source,
                })?;
            pmd_threads.push(t);
        }

        let ctl = Control::new(switch.clone(), args);
        for tp in topo.iter() {
            ctl.start_service(tp.port.clone());
        }
        tokio::spawn(netlink::watch(
            switch.clone(),
            ctl.net.clone(),
            ctl.net_changed.clone(),
        ));
        tokio::spawn(overlay::run(ctl.clone()));
        if let Some(o) = &config.ovn {
            let chassis: Arc<dyn crate::control::ops::OvnChassis> =
                crate::ovn::spawn(ctl.clone(), o.clone());
            let _ = ctl.ovn.set(chassis);
        }
        if let Some(remote) = &config.ovsdb {
            crate::ovsdb_config::spawn(ctl.clone(), remote).map_err(StartError::Ovsdb)?;
        }
        tokio::spawn(housekeeping::run(ctl.clone()));
        tokio::spawn(server::serve(control, ctl.clone()));
        if let Some(l) = metrics {
            tokio::spawn(metrics::serve(l, ctl.clone()));
        }
        let status = format!(
            "{} ports, {} PMD threads, poll {}",
            topo.iter().count(),
            switch.pmds.len(),
            config.poll
        );
        info!(
            ports = topo.iter().count(),
            pmds = switch.pmds.len(),
            poll = %config.poll,
            control = %config.control.display(),
            "vswitchd started"
        );
        let signals = Signals::install();
        notify::ready(&status);
        Ok(Daemon {
            signals,
            switch,
            control: ctl,
            pmd_threads,
            control_path: config.control,
        })
    }

    /// Serves until SIGINT or SIGTERM; SIGHUP reloads the configuration file.
    pub async fn run(mut self) {
        let Some(Signals {
            mut term,
            mut int,
            mut hup,
        }) = self.signals.take()
        else {
            warn!("cannot install signal handlers; stopping");
            return self.stop().await;
        };
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = hup.recv() => {
                    info!("SIGHUP: reloading the configuration");
                    notify::reloading();
                    match self.control.reload().await {
                        Ok(_) => notify::ready("reloaded"),
                        Err(e) => {
                            warn!(error = %e, "reload failed");
                            notify::ready(&format!("reload failed: {e}"));
                        }
                    }
                }
            }
        }
        info!("shutting down");
        self.stop().await;
    }

    /// Stops: PMDs finish their burst and exit, every port is closed (guests see their
    /// link go down, sockets are removed, XDP programs detached), the control socket is
    /// removed.
    pub async fn stop(self) {
        notify::stopping();
        if self.control.ovn.get().is_some() {
            // The chassis removes its rows first (as ovn-controller does on exit).
            let stopped = self.control.ovn_stopped.notified();
            self.control.ovn_stop.notify_one();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(3), stopped).await;
        }
        self.switch.shutdown.store(true, Ordering::SeqCst);
        self.switch.wakers.wake_all();
        let threads = self.pmd_threads;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        let topo = self.switch.topo();
        let _ = tokio::task::spawn_blocking(move || {
            for tp in topo.iter() {
                tp.port.close();
            }
        })
        .await;
        let _ = std::fs::remove_file(&self.control_path);
        info!("vswitchd stopped");
    }
}

/// Below this size (glibc's largest), a block comes from malloc's arenas and, once
/// freed, serves the next request of its size; above, it is mapped and unmapped.
pub const MMAP_THRESHOLD: usize = 32 << 20;
/// How much free memory malloc keeps at the top of an arena before returning it.
pub const TRIM_THRESHOLD: usize = 1 << 30;

/// Has malloc keep freed memory for reuse, as switches that own their memory do (DPDK's
/// and VPP's heaps are never returned): glibc maps large blocks on their own above a
/// threshold that starts at 128 KiB, unmaps them when freed, and returns an arena's free
/// top above 128 KiB, so a growing table (a connection-tracker shard doubling, every
/// few thousand new connections under load) faulted in and zeroed fresh pages while
/// the blocks its neighbours had just outgrown went back to the kernel. Blocks up to
/// [`MMAP_THRESHOLD`] now come from the arenas and are reused, and an arena keeps up to
/// [`TRIM_THRESHOLD`] free at its top (the OVN chassis still trims after each pass of
/// its database replica, `malloc_trim`). An operator's own `GLIBC_TUNABLES` setting of
/// either threshold is left as it is. Call first, before other threads start. Nothing
/// outside glibc.
pub fn keep_freed_memory() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if tunables.contains("glibc.malloc.mmap_threshold")
        || tunables.contains("glibc.malloc.trim_threshold")
    {
        return;
    }
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes malloc's tunables; called before other threads run.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD as libc::c_int);
    }
}

/// The control plane's runtime: two worker threads (and the blocking pool) on the CPUs
/// the PMDs do not use, when there are such CPUs.
///
/// # Errors
/// The runtime could not be built.
pub fn runtime(pmd_cpus: Option<&[usize]>) -> std::io::Result<tokio::runtime::Runtime> {
    let avoid: Vec<usize> = pmd_cpus.map(<[usize]>::to_vec).unwrap_or_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("control")
        .enable_all()
        .on_thread_start(move || avoid_cpus(&avoid))
        .build()
}

/// Restricts the calling thread to the CPUs it may run on minus `avoid` (if any remain).
fn avoid_cpus(avoid: &[usize]) {
    if avoid.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; zeroed is an empty set that sched_getaffinity
    // fills (its size given).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: reads this thread's affinity into `set`, of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return;
    }
    let mut left = 0;
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: `cpu` < CPU_SETSIZE, inside the set.
        if unsafe { libc::CPU_ISSET(cpu, &set) } {
            if avoid.contains(&cpu) {
                // SAFETY: as above.
                unsafe { libc::CPU_CLR(cpu, &mut set) };
            } else {
                left += 1;
            }
        }
    }
    if left > 0 {
        // SAFETY: sets this thread's affinity from a valid set of the size given.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    }
}

#[cfg(all(test, target_env = "gnu"))]
mod tests {
    use super::*;

    /// Bytes malloc holds in blocks mapped on their own.
    fn mapped_bytes() -> usize {
        // SAFETY: mallinfo2 only reads malloc's statistics.
        unsafe { libc::mallinfo2() }.hblkhd
    }

    #[test]
    fn a_table_s_array_comes_from_the_arenas() {
        keep_freed_memory();
        let before = mapped_bytes();
        let array = vec![1u8; 8 << 20];
        let during = mapped_bytes();
        drop(std::hint::black_box(array));
        assert!(
            during < before + (8 << 20),
            "an 8 MiB block was mapped on its own ({before} -> {during} bytes mapped)"
        );
    }
}
