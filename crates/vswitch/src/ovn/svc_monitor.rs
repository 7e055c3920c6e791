//! Load balancer health checks on this chassis, as ovn-controller's pinctrl runs them
//! (`svc_monitors_run`): for each `Service_Monitor` row whose backend's logical port is
//! here, a probe every `interval` seconds from the row's `src_mac`/`src_ip` into the
//! port, over IPv4 or IPv6 as the backend's address is: a TCP SYN to the backend's port
//! (a SYN-ACK is a success, answered with a reset; a reset or `timeout` seconds of
//! silence a failure), or a UDP datagram (an ICMP or ICMPv6 port unreachable is a
//! failure, `timeout` seconds of silence a success).
//! `success_count` successes in a row make the backend `online`, `failure_count`
//! failures `offline` (defaults 5 s, 20 s, 1, 1); the status is written to the row,
//! and ovn-northd leaves an offline backend out of its load balancer's flows.
//!
//! The answers reach the chassis through the pipeline's `handle_svc_check` (every
//! switch sends frames to the `svc_monitor_mac` there) as
//! [`Learned::SvcReply`](crate::model::lflow::Learned::SvcReply).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use etherparse::{
    IpHeaders, LaxNetSlice, LaxSlicedPacket, PacketBuilder, PacketBuilderStep, TransportSlice,
};
use ovsdb::{Client, Condition, Operation, Row, Uuid};

use super::sb::{PortBinding, ServiceMonitor};
use crate::config::MacAddr;
use crate::model::lflow::{Injected, SlowDest};
use crate::switch::Switch;

/// The probes' first source port (each probe takes the next, wrapping at 65535).
const FIRST_PORT: u16 = 32768;

/// One backend being checked.
#[derive(Debug)]
struct Probe {
    /// When the next probe goes.
    next_at: Instant,
    /// The probe in flight: when it went, and its source port.
    sent: Option<(Instant, u16)>,
    /// Consecutive successes and failures.
    successes: u32,
    failures: u32,
}

/// What an answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Success,
    Failure,
}

/// The health checks of the backends on this chassis.
#[derive(Debug, Default)]
pub struct Prober {
    probes: HashMap<Uuid, Probe>,
    next_port: u16,
}

/// A row's settings, with pinctrl's defaults.
struct Settings {
    interval: Duration,
    timeout: Duration,
    successes: u32,
    failures: u32,
    udp: bool,
}

fn settings(m: &ServiceMonitor) -> Settings {
    let num = |k: &str, d: u64| m.options.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    Settings {
        interval: Duration::from_secs(num("interval", 5).max(1)),
        timeout: Duration::from_secs(num("timeout", 20).max(1)),
        successes: num("success_count", 1).max(1) as u32,
        failures: num("failure_count", 1).max(1) as u32,
        udp: m.protocol.as_deref() == Some("udp"),
    }
}

impl Prober {
    /// Takes the `answers` the data path caught, sends the probes that are due, and
    /// writes the statuses that changed. Rows of backends not on this chassis are
    /// left to theirs.
    ///
    /// # Errors
    /// The status transaction failed (written again on the next change).
    pub async fn run(
        &mut self,
        client: &Client,
        sw: &Switch,
        answers: Vec<Vec<u8>>,
    ) -> Result<(), String> {
        let now = Instant::now();
        let (rows, macs): (Vec<(Uuid, ServiceMonitor)>, HashMap<String, String>) = {
            let r = client.replica();
            let rows: Vec<_> = r.rows::<ServiceMonitor>().collect();
            if rows.is_empty() && self.probes.is_empty() {
                // No health check anywhere (this runs every 100 ms).
                return Ok(());
            }
            let macs = r
                .rows::<PortBinding>()
                .filter_map(|(_, p)| Some((p.logical_port.clone(), mac_of(&p.mac)?)))
                .collect();
            (rows, macs)
        };
        let topo = sw.topo();
        let local: HashMap<&str, u16> = topo
            .iter()
            .filter_map(|tp| Some((tp.config.iface_id.as_deref()?, tp.port.id)))
            .collect();
        let mut frames = Vec::new();
        let mut updates = Vec::new();
        self.probes.retain(|u, _| {
            rows.iter()
                .any(|(r, m)| r == u && local.contains_key(m.logical_port.as_str()))
        });
        for (u, m) in &rows {
            let Some(&port) = local.get(m.logical_port.as_str()) else {
                continue;
            };
            let s = settings(m);
            let p = self.probes.entry(*u).or_insert(Probe {
                next_at: now,
                sent: None,
                successes: 0,
                failures: 0,
            });
            let mut verdict = None;
            if let Some((at, sport)) = p.sent {
                for a in &answers {
                    if let Some(v) = judge(a, m, sport, s.udp) {
                        verdict = Some(v);
                        if v == Verdict::Success && !s.udp {
                            frames.extend(reset(a, m).map(|f| (port, f)));
                        }
                    }
                }
                if verdict.is_none() && now >= at + s.timeout {
                    verdict = Some(if s.udp {
                        Verdict::Success
                    } else {
                        Verdict::Failure
                    });
                }
            }
            if let Some(v) = verdict {
                p.sent = None;
                match v {
                    Verdict::Success => (p.successes, p.failures) = (p.successes + 1, 0),
                    Verdict::Failure => (p.successes, p.failures) = (0, p.failures + 1),
                }
                let status = if p.successes >= s.successes {
                    Some("online")
                } else if p.failures >= s.failures {
                    Some("offline")
                } else {
                    None
                };
                if let Some(st) = status.filter(|st| m.status.as_deref() != Some(*st)) {
                    updates.push((*u, st));
                }
            }
            if p.sent.is_none() && now >= p.next_at {
                let dst_mac = macs.get(&m.logical_port).cloned().unwrap_or_default();
                self.next_port = self.next_port.wrapping_add(1).max(FIRST_PORT);
                if let Some(f) = probe(m, &dst_mac, self.next_port, s.udp) {
                    frames.push((port, f));
                    p.sent = Some((now, self.next_port));
                }
                p.next_at = now + s.interval;
            }
        }
        sw.inject(
            frames
                .into_iter()
                .map(|(port, frame)| Injected {
                    src: port,
                    dest: SlowDest::Port(port),
                    frame,
                })
                .collect(),
        );
        let ops = updates
            .into_iter()
            .map(|(u, st)| {
                Operation::update(
                    "Service_Monitor",
                    vec![Condition::uuid(u)],
                    Row::new().with("status", Some(st.to_string())),
                )
            })
            .collect();
        super::transact_ops(client, ops, "writing health check statuses")
            .await
            .map(|_| ())
    }
}

/// The first MAC of a binding's addresses.
fn mac_of(addrs: &[String]) -> Option<String> {
    addrs
        .iter()
        .filter_map(|a| a.split_whitespace().next())
        .find(|m| m.parse::<MacAddr>().is_ok())
        .map(str::to_string)
}

fn mac(text: &str) -> Option<[u8; 6]> {
    text.parse::<MacAddr>().ok().map(|m| m.0)
}

/// A monitor's address: IPv4, or IPv6 with or without brackets (`ip_port_mappings`
/// writes them; ovn-northd strips them).
fn addr(text: &str) -> Option<IpAddr> {
    text.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Ethernet and IP headers from `(smac, src)` to `(dmac, dst)`, hop limit 63 as
/// pinctrl's probes have; `None` for addresses of two families.
fn headers(
    (smac, src): ([u8; 6], IpAddr),
    (dmac, dst): ([u8; 6], IpAddr),
) -> Option<PacketBuilderStep<IpHeaders>> {
    let b = PacketBuilder::ethernet2(smac, dmac);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some(b.ipv4(s.octets(), d.octets(), 63)),
        (IpAddr::V6(s), IpAddr::V6(d)) => Some(b.ipv6(s.octets(), d.octets(), 63)),
        _ => None,
    }
}

/// The probe of monitor `m` to the backend at `dst_mac`, from source port `sport`
/// (pinctrl's `svc_monitor_send_tcp_health_check`, `..._udp_health_check`).
fn probe(m: &ServiceMonitor, dst_mac: &str, sport: u16, udp: bool) -> Option<Vec<u8>> {
    let src = (mac(&m.src_mac)?, addr(&m.src_ip)?);
    let b = headers(src, (mac(dst_mac)?, addr(&m.ip)?))?;
    let dport = u16::try_from(m.port).ok()?;
    let mut out = Vec::new();
    if udp {
        let b = b.udp(sport, dport);
        b.write(&mut out, b"health check").ok()?;
    } else {
        let b = b.tcp(sport, dport, u32::from(sport) << 16, 65160).syn();
        b.write(&mut out, &[]).ok()?;
    }
    Some(out)
}

/// What answer `frame` says of the probe of `m` from source port `sport`, if it is
/// one: a SYN-ACK (success) or reset (failure) from the backend's port, or an ICMP
/// or ICMPv6 port unreachable about the UDP probe (failure).
fn judge(frame: &[u8], m: &ServiceMonitor, sport: u16, udp: bool) -> Option<Verdict> {
    let p = LaxSlicedPacket::from_ethernet(frame).ok()?;
    let (src, dst): (IpAddr, IpAddr) = match &p.net {
        Some(LaxNetSlice::Ipv4(ip)) => {
            let h = ip.header();
            (h.source_addr().into(), h.destination_addr().into())
        }
        Some(LaxNetSlice::Ipv6(ip)) => {
            let h = ip.header();
            (h.source_addr().into(), h.destination_addr().into())
        }
        None => return None,
    };
    let backend = addr(&m.ip)?;
    if dst != addr(&m.src_ip)? {
        return None;
    }
    match &p.transport {
        Some(TransportSlice::Tcp(t)) if !udp => {
            let ours = src == backend
                && i64::from(t.source_port()) == m.port
                && t.destination_port() == sport;
            if !ours {
                None
            } else if t.rst() {
                Some(Verdict::Failure)
            } else if t.syn() && t.ack() {
                Some(Verdict::Success)
            } else {
                None
            }
        }
        // Destination unreachable, port unreachable (ICMP 3/3, ICMPv6 1/4), about our
        // datagram: its IP header (IPv4 without options) and UDP ports follow.
        Some(TransportSlice::Icmpv4(i)) if udp => {
            let unreachable = (i.type_u8(), i.code_u8()) == (3, 3);
            (unreachable && about(i.payload(), backend, sport, m.port)).then_some(Verdict::Failure)
        }
        Some(TransportSlice::Icmpv6(i)) if udp => {
            let unreachable = (i.type_u8(), i.code_u8()) == (1, 4);
            (unreachable && about(i.payload(), backend, sport, m.port)).then_some(Verdict::Failure)
        }
        _ => None,
    }
}

/// Whether the datagram an ICMP error quotes (`inner`: its IP header on) went from
/// port `sport` to `backend`:`port`.
fn about(inner: &[u8], backend: IpAddr, sport: u16, port: i64) -> bool {
    let (dst, udp) = match backend {
        IpAddr::V4(b) => (inner.get(16..20).map(|d| d == b.octets()), 20),
        IpAddr::V6(b) => (inner.get(24..40).map(|d| d == b.octets()), 40),
    };
    let be16 = |at: usize| {
        inner
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    dst == Some(true) && be16(udp) == Some(sport) && be16(udp + 2).map(i64::from) == Some(port)
}

/// A reset answering the SYN-ACK `frame` (the backend's half-open connection closed,
/// as pinctrl closes it).
fn reset(frame: &[u8], m: &ServiceMonitor) -> Option<Vec<u8>> {
    let p = LaxSlicedPacket::from_ethernet(frame).ok()?;
    let eth = p.link.as_ref()?;
    let etherparse::LinkSlice::Ethernet2(e) = eth else {
        return None;
    };
    let Some(TransportSlice::Tcp(t)) = &p.transport else {
        return None;
    };
    let src = (mac(&m.src_mac)?, addr(&m.src_ip)?);
    let b = headers(src, (e.source(), addr(&m.ip)?))?
        .tcp(
            t.destination_port(),
            t.source_port(),
            t.acknowledgment_number(),
            0,
        )
        .rst();
    let mut out = Vec::new();
    b.write(&mut out, &[]).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monitor(proto: &str) -> ServiceMonitor {
        ServiceMonitor {
            uuid: Uuid::from_u128(1),
            ip: "10.0.0.12".into(),
            protocol: Some(proto.into()),
            port: 8080,
            logical_port: "vm2".into(),
            src_mac: "0a:00:00:00:00:01".into(),
            src_ip: "10.0.0.1".into(),
            status: None,
            options: Default::default(),
        }
    }

    /// A TCP probe is a SYN; the backend's SYN-ACK is a success, answered by a reset
    /// whose sequence number is the SYN-ACK's acknowledgement; its reset a failure.
    #[test]
    fn tcp_probe_answers() {
        let m = monitor("tcp");
        let syn = probe(&m, "50:54:00:00:02:02", 40000, false).unwrap();
        let p = LaxSlicedPacket::from_ethernet(&syn).unwrap();
        let Some(TransportSlice::Tcp(t)) = p.transport else {
            panic!()
        };
        assert!(t.syn() && !t.ack() && t.destination_port() == 8080);
        let answer = |syn: bool, rst: bool| {
            let b = PacketBuilder::ethernet2([0x50, 0x54, 0, 0, 2, 2], [0x0a, 0, 0, 0, 0, 1])
                .ipv4([10, 0, 0, 12], [10, 0, 0, 1], 64)
                .tcp(8080, 40000, 7, 100);
            let b = if syn { b.syn().ack(0x9c40_0001) } else { b };
            let b = if rst { b.rst() } else { b };
            let mut f = Vec::new();
            b.write(&mut f, &[]).unwrap();
            f
        };
        let synack = answer(true, false);
        assert_eq!(judge(&synack, &m, 40000, false), Some(Verdict::Success));
        assert_eq!(judge(&synack, &m, 40001, false), None, "another probe's");
        assert_eq!(
            judge(&answer(false, true), &m, 40000, false),
            Some(Verdict::Failure)
        );
        let rst = reset(&synack, &m).unwrap();
        let p = LaxSlicedPacket::from_ethernet(&rst).unwrap();
        let Some(TransportSlice::Tcp(t)) = p.transport else {
            panic!()
        };
        assert!(t.rst() && t.sequence_number() == 0x9c40_0001);
    }

    /// A UDP probe's port unreachable is a failure.
    #[test]
    fn udp_port_unreachable_is_a_failure() {
        let m = monitor("udp");
        let probe = probe(&m, "50:54:00:00:02:02", 40000, true).unwrap();
        let datagram = &probe[14..];
        let b = PacketBuilder::ethernet2([0x50, 0x54, 0, 0, 2, 2], [0x0a, 0, 0, 0, 0, 1])
            .ipv4([10, 0, 0, 12], [10, 0, 0, 1], 64)
            .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::Port,
            ));
        let mut f = Vec::new();
        b.write(&mut f, &datagram[..28]).unwrap();
        assert_eq!(judge(&f, &m, 40000, true), Some(Verdict::Failure));
        assert_eq!(judge(&f, &m, 40001, true), None);
    }

    fn monitor6(proto: &str) -> ServiceMonitor {
        ServiceMonitor {
            ip: "fd00::12".into(),
            src_ip: "fd00::250".into(),
            ..monitor(proto)
        }
    }

    const BACKEND6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12];
    const SOURCE6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x50];

    /// Over IPv6 (a backend at an IPv6 address, `ip_port_mappings:"[fd00::12]"`): the
    /// SYN goes from the monitor's IPv6 source with hop limit 63 and a valid checksum,
    /// the SYN-ACK is a success, the reset goes back over IPv6.
    #[test]
    fn ipv6_tcp_probe_answers() {
        let m = monitor6("tcp");
        let syn = probe(&m, "50:54:00:00:02:02", 40000, false).unwrap();
        let p = etherparse::SlicedPacket::from_ethernet(&syn).unwrap();
        let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else {
            panic!("{p:?}")
        };
        assert_eq!(ip.header().source(), SOURCE6);
        assert_eq!(ip.header().destination(), BACKEND6);
        assert_eq!(ip.header().hop_limit(), 63);
        let Some(TransportSlice::Tcp(t)) = &p.transport else {
            panic!()
        };
        let sum = t
            .to_header()
            .calc_checksum_ipv6_raw(SOURCE6, BACKEND6, t.payload());
        assert_eq!(sum.unwrap(), t.checksum());
        assert!(t.syn() && t.destination_port() == 8080);
        let mut synack = Vec::new();
        PacketBuilder::ethernet2([0x50, 0x54, 0, 0, 2, 2], [0x0a, 0, 0, 0, 0, 1])
            .ipv6(BACKEND6, SOURCE6, 64)
            .tcp(8080, 40000, 7, 100)
            .syn()
            .ack(0x9c40_0001)
            .write(&mut synack, &[])
            .unwrap();
        assert_eq!(judge(&synack, &m, 40000, false), Some(Verdict::Success));
        assert_eq!(
            judge(&synack, &monitor("tcp"), 40000, false),
            None,
            "IPv4's"
        );
        let rst = reset(&synack, &m).unwrap();
        let p = LaxSlicedPacket::from_ethernet(&rst).unwrap();
        assert!(matches!(p.net, Some(LaxNetSlice::Ipv6(_))));
        let Some(TransportSlice::Tcp(t)) = p.transport else {
            panic!()
        };
        assert!(t.rst() && t.sequence_number() == 0x9c40_0001);
    }

    /// A UDP probe's ICMPv6 port unreachable (type 1, code 4) is a failure; another
    /// code is not.
    #[test]
    fn ipv6_udp_port_unreachable_is_a_failure() {
        let m = monitor6("udp");
        let probe = probe(&m, "50:54:00:00:02:02", 40000, true).unwrap();
        let datagram = &probe[14..];
        let error = |code| {
            let mut f = Vec::new();
            PacketBuilder::ethernet2([0x50, 0x54, 0, 0, 2, 2], [0x0a, 0, 0, 0, 0, 1])
                .ipv6(BACKEND6, SOURCE6, 64)
                .icmpv6(etherparse::Icmpv6Type::DestinationUnreachable(code))
                .write(&mut f, &datagram[..48])
                .unwrap();
            f
        };
        use etherparse::icmpv6::DestUnreachableCode;
        let port = error(DestUnreachableCode::Port);
        assert_eq!(judge(&port, &m, 40000, true), Some(Verdict::Failure));
        assert_eq!(judge(&port, &m, 40001, true), None, "another probe's");
        let prohibited = error(DestUnreachableCode::Prohibited);
        assert_eq!(judge(&prohibited, &m, 40000, true), None);
    }
}
