//! Test support: network namespaces with a Drop guard, running `probe`
//! inside one (by re-executing this test binary under `ip netns exec`), and
//! parsers for the oracle's output (`ethtool`, `ip -j link`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::env;
use std::process::{Command, Output};

use nicoffload::NicCapabilities;

/// The environment variable that tells [`probe_child`] which interface to probe.
pub const CHILD_IFACE_VAR: &str = "NICOFFLOAD_TEST_PROBE_IFACE";
const BEGIN: &str = "<<<NICOFFLOAD-JSON>>>";
const ERR: &str = "<<<NICOFFLOAD-ERROR>>>";
const END: &str = "<<<NICOFFLOAD-END>>>";

/// Body of the `probe_child` test each test binary defines: when
/// [`CHILD_IFACE_VAR`] is set, probe that interface and print the result
/// between markers for the parent to read.
pub fn probe_child() {
    let Ok(iface) = env::var(CHILD_IFACE_VAR) else {
        eprintln!("probe_child only runs inside a namespace, started by the other tests");
        return;
    };
    match nicoffload::probe(&iface) {
        Ok(caps) => println!(
            "{BEGIN}{}{END}",
            serde_json::to_string(&caps).expect("NicCapabilities serializes")
        ),
        Err(e) => println!("{ERR}{e}{END}"),
    }
}

fn output_text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A network namespace named `nicoff-PID-TAG`, deleted (with every virtual
/// interface in it) on drop, even when the test panics.
pub struct Netns {
    name: String,
    /// False for [`Netns::host`]: the test's own namespace, not deleted.
    owned: bool,
}

impl Netns {
    /// Creates the namespace. Panics with a clear message when that is not
    /// possible (the tests need root, `ip` from iproute2, and `ethtool`).
    pub fn new(tag: &str) -> Self {
        let name = format!("nicoff-{}-{tag}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .expect("running `ip` (Debian package iproute2)");
        assert!(
            out.status.success(),
            "creating network namespace {name} failed; these tests need root \
             (CAP_SYS_ADMIN) and iproute2:\n{}",
            output_text(&out)
        );
        Self { name, owned: true }
    }

    /// The test process's own network namespace; commands run directly.
    pub fn host() -> Self {
        Self {
            name: String::new(),
            owned: false,
        }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `cmd args...` inside the namespace.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Output {
        let mut c = if self.owned {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &self.name, cmd]);
            c
        } else {
            Command::new(cmd)
        };
        c.args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {cmd} in {}: {e}", self.name))
    }

    /// Runs `cmd args...` inside the namespace and panics unless it succeeds.
    pub fn must(&self, cmd: &str, args: &[&str]) -> String {
        let out = self.exec(cmd, args);
        assert!(
            out.status.success(),
            "`{cmd} {}` in {} failed:\n{}",
            args.join(" "),
            self.name,
            output_text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ip -n NS ARGS...`, which must succeed.
    pub fn ip(&self, args: &[&str]) {
        self.must("ip", args);
    }

    /// Runs `probe(iface)` inside the namespace, in a child process, as
    /// `user` (`None`: root). Returns the capabilities and their JSON, or
    /// the error's text.
    pub fn probe_as(
        &self,
        iface: &str,
        user: Option<u32>,
    ) -> Result<(NicCapabilities, serde_json::Value), String> {
        let exe = env::current_exe().expect("test binary path");
        let exe = exe.to_str().expect("utf-8 path");
        let uid = user.map(|u| u.to_string());
        let mut args: Vec<&str> = Vec::new();
        let cmd = match &uid {
            Some(uid) => {
                args.extend([
                    "--reuid",
                    uid,
                    "--regid",
                    uid,
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    exe,
                ]);
                "setpriv"
            }
            None => exe,
        };
        args.extend([
            "--exact",
            "probe_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]);
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, cmd])
            .args(&args)
            .env(CHILD_IFACE_VAR, iface)
            .output()
            .expect("running the probe child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some(json) = between(&stdout, BEGIN) {
            let value: serde_json::Value = serde_json::from_str(json).expect("child JSON");
            let caps =
                serde_json::from_value(value.clone()).expect("child JSON is NicCapabilities");
            Ok((caps, value))
        } else if let Some(err) = between(&stdout, ERR) {
            Err(err.to_owned())
        } else {
            panic!("probe child printed no result:\n{}", output_text(&out));
        }
    }

    /// `probe(iface)` inside the namespace as root.
    pub fn probe(&self, iface: &str) -> NicCapabilities {
        match self.probe_as(iface, None) {
            Ok((caps, _)) => caps,
            Err(e) => panic!("probe({iface}) in {} failed: {e}", self.name),
        }
    }

    /// Reads the oracle's view of `iface`.
    pub fn oracle(&self, iface: &str) -> Oracle {
        Oracle::read(self, iface)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // Deleting the namespace unregisters the veth, tun and dummy
        // devices in it.
        match Command::new("ip")
            .args(["netns", "del", &self.name])
            .output()
        {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!("warning: deleting netns {}: {}", self.name, output_text(&o)),
            Err(e) => eprintln!("warning: deleting netns {}: {e}", self.name),
        }
    }
}

fn between<'a>(s: &'a str, begin: &str) -> Option<&'a str> {
    let start = s.find(begin)? + begin.len();
    let len = s[start..].find(END)?;
    Some(&s[start..start + len])
}

/// One line of `ethtool -k`: state and whether it is fixed / requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OracleFeature {
    pub active: bool,
    pub fixed: bool,
    /// `Some(wanted)` for `[requested on|off]`.
    pub requested: Option<bool>,
}

/// What the system tools say about an interface.
#[derive(Debug)]
pub struct Oracle {
    /// `ethtool -k`, without the group lines (`tx-checksumming`,
    /// `scatter-gather`, `tcp-segmentation-offload`) whose sub-features
    /// follow them indented.
    pub features: BTreeMap<String, OracleFeature>,
    /// The group lines of `ethtool -k`.
    pub feature_groups: Vec<String>,
    /// `ethtool -l`: `None` when it fails (not supported).
    pub channels: Option<BTreeMap<String, Option<u32>>>,
    /// `ethtool -g`: `None` when it fails (not supported).
    pub rings: Option<BTreeMap<String, Option<u32>>>,
    /// `ethtool -i` driver; `None` when it fails.
    pub driver: Option<String>,
    /// `ethtool IFACE` `Speed:` in Mb/s; `None` if unknown or absent.
    pub speed: Option<u32>,
    /// `ethtool -x`: `(indirection table entries, key bytes, hash function
    /// bitmap)`; `None` when it fails.
    pub rss: Option<(usize, usize, Option<u32>)>,
    /// `ethtool -n IFACE rx-flow-hash udp4` as `RXH_*` bits; `None` when it fails.
    pub udp4_hash: Option<u64>,
    /// The same for `udp6`.
    pub udp6_hash: Option<u64>,
    /// `ip -d -j link show IFACE`, the object for the interface.
    pub link: serde_json::Value,
}

impl Oracle {
    fn read(ns: &Netns, iface: &str) -> Self {
        let k = ns.must("ethtool", &["-k", iface]);
        let (features, feature_groups) = parse_ethtool_k(&k);
        let ok = |args: &[&str]| {
            let out = ns.exec("ethtool", args);
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        };
        let channels =
            ok(&["-l", iface]).map(|s| parse_sections(&s, &["RX", "TX", "Other", "Combined"]));
        let rings =
            ok(&["-g", iface]).map(|s| parse_sections(&s, &["RX", "RX Mini", "RX Jumbo", "TX"]));
        let driver = ok(&["-i", iface]).and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("driver: ").map(str::to_owned))
        });
        let speed = ok(&[iface]).and_then(|s| {
            s.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("Speed: ")
                    .and_then(|v| v.strip_suffix("Mb/s"))
                    .and_then(|v| v.parse().ok())
            })
        });
        let rss = ok(&["-x", iface]).map(|s| parse_rss(&s));
        let udp4_hash = ok(&["-n", iface, "rx-flow-hash", "udp4"]).map(|s| parse_rx_flow_hash(&s));
        let udp6_hash = ok(&["-n", iface, "rx-flow-hash", "udp6"]).map(|s| parse_rx_flow_hash(&s));
        let link_json = ns.must("ip", &["-d", "-j", "link", "show", "dev", iface]);
        let link: serde_json::Value = serde_json::from_str(&link_json).expect("ip -j output");
        let link = link[0].clone();
        Self {
            features,
            feature_groups,
            channels,
            rings,
            driver,
            speed,
            rss,
            udp4_hash,
            udp6_hash,
            link,
        }
    }
}

/// Parses `ethtool -k` output.
pub fn parse_ethtool_k(text: &str) -> (BTreeMap<String, OracleFeature>, Vec<String>) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("Features for") && !l.trim().is_empty())
        .collect();
    let mut features = BTreeMap::new();
    let mut groups = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let (name, rest) = line
            .trim()
            .split_once(": ")
            .unwrap_or_else(|| panic!("unexpected ethtool -k line {line:?}"));
        let is_group =
            !line.starts_with('\t') && lines.get(i + 1).is_some_and(|next| next.starts_with('\t'));
        if is_group {
            groups.push(name.to_owned());
            continue;
        }
        let active = match rest.split_whitespace().next() {
            Some("on") => true,
            Some("off") => false,
            other => panic!("unexpected state {other:?} in {line:?}"),
        };
        let requested = if rest.contains("[requested on]") {
            Some(true)
        } else if rest.contains("[requested off]") {
            Some(false)
        } else {
            None
        };
        features.insert(
            name.to_owned(),
            OracleFeature {
                active,
                fixed: rest.contains("[fixed]"),
                requested,
            },
        );
    }
    (features, groups)
}

/// Parses the two sections of `ethtool -l` / `-g` into
/// `max KEY` / `cur KEY` → value (`None` for `n/a`).
pub fn parse_sections(text: &str, keys: &[&str]) -> BTreeMap<String, Option<u32>> {
    let mut out = BTreeMap::new();
    let mut section = "";
    for line in text.lines() {
        match line.trim() {
            "Pre-set maximums:" => section = "max",
            "Current hardware settings:" => section = "cur",
            l => {
                if let Some((k, v)) = l.split_once(':') {
                    if !section.is_empty() && keys.contains(&k.trim()) {
                        out.insert(format!("{section} {}", k.trim()), v.trim().parse().ok());
                    }
                }
            }
        }
    }
    out
}

/// The `RXH_*` bits `ethtool -n IFACE rx-flow-hash FLOW` lists, one field a line.
pub fn parse_rx_flow_hash(text: &str) -> u64 {
    let mut bits = 0;
    for line in text.lines().skip(1) {
        bits |= match line.trim() {
            "L2DA" => 1 << 1,
            "VLAN tag" => 1 << 2,
            "L3 proto" => 1 << 3,
            "IP SA" => 1 << 4,
            "IP DA" => 1 << 5,
            "L4 bytes 0 & 1 [TCP/UDP src port]" => 1 << 6,
            "L4 bytes 2 & 3 [TCP/UDP dst port]" => 1 << 7,
            "None" | "" => 0,
            other => panic!("unexpected rx-flow-hash line {other:?}"),
        };
    }
    bits
}

/// `(indirection table entries, key bytes, hash function bitmap)` from
/// `ethtool -x` (`ETH_RSS_HASH_TOP` 1, `_XOR` 2, `_CRC32` 4).
pub fn parse_rss(text: &str) -> (usize, usize, Option<u32>) {
    let mut entries = 0;
    let mut key = 0;
    let mut in_key = false;
    let mut hfunc = None;
    for line in text.lines() {
        let l = line.trim();
        for (name, bit) in [("toeplitz", 1), ("xor", 2), ("crc32", 4)] {
            if let Some(state) = l.strip_prefix(name).and_then(|r| r.strip_prefix(": ")) {
                let h = hfunc.get_or_insert(0);
                if state == "on" {
                    *h |= bit;
                }
            }
        }
        if l.starts_with("RSS hash key:") {
            in_key = true;
            continue;
        }
        if in_key {
            if l.is_empty() || l.starts_with("RSS hash function") {
                in_key = false;
            } else if l != "Operation not supported" {
                key += l.split(':').filter(|b| !b.is_empty()).count();
            }
            continue;
        }
        if let Some((idx, rest)) = l.split_once(':') {
            if idx.trim().parse::<u32>().is_ok() {
                entries += rest.split_whitespace().count();
            }
        }
    }
    (entries, key, hfunc.filter(|&h| h != 0))
}

/// Asserts `caps` agrees with `oracle` on every field both report.
pub fn assert_matches_oracle(caps: &NicCapabilities, oracle: &Oracle) {
    let who = &caps.ifname;
    // ethtool -k: the same feature names, each with the same state.
    let ours: Vec<&String> = caps.features.keys().collect();
    let theirs: Vec<&String> = oracle.features.keys().collect();
    assert_eq!(ours, theirs, "{who}: feature names differ from ethtool -k");
    for (name, o) in &oracle.features {
        let f = &caps.features[name];
        assert_eq!(f.active, o.active, "{who}: {name} active");
        assert_eq!(f.fixed, o.fixed, "{who}: {name} fixed");
        // ethtool prints `[requested ...]` only for features that are not fixed.
        if !o.fixed {
            assert_eq!(
                f.requested,
                o.requested.unwrap_or(f.active),
                "{who}: {name} requested"
            );
        }
    }
    for g in &oracle.feature_groups {
        assert!(
            [
                "tx-checksumming",
                "scatter-gather",
                "tcp-segmentation-offload"
            ]
            .contains(&g.as_str()),
            "{who}: unexpected ethtool -k group {g}"
        );
    }

    // ethtool -l.
    match (&caps.channels, &oracle.channels) {
        (None, None) => {}
        (Some(c), Some(o)) => {
            for (key, ours) in [
                ("max RX", c.rx_max),
                ("max TX", c.tx_max),
                ("max Other", c.other_max),
                ("max Combined", c.combined_max),
                ("cur RX", c.rx),
                ("cur TX", c.tx),
                ("cur Other", c.other),
                ("cur Combined", c.combined),
            ] {
                assert_eq!(ours, o[key], "{who}: channels {key}");
            }
        }
        (ours, theirs) => panic!("{who}: channels {ours:?} but ethtool -l gives {theirs:?}"),
    }

    // ethtool -g.
    match (&caps.rings, &oracle.rings) {
        (None, None) => {}
        (Some(r), Some(o)) => {
            for (key, ours) in [
                ("max RX", r.rx_max),
                ("max RX Mini", r.rx_mini_max),
                ("max RX Jumbo", r.rx_jumbo_max),
                ("max TX", r.tx_max),
                ("cur RX", r.rx),
                ("cur RX Mini", r.rx_mini),
                ("cur RX Jumbo", r.rx_jumbo),
                ("cur TX", r.tx),
            ] {
                assert_eq!(ours, o[key], "{who}: rings {key}");
            }
        }
        (ours, theirs) => panic!("{who}: rings {ours:?} but ethtool -g gives {theirs:?}"),
    }

    // ethtool -i, ethtool (speed), ethtool -x.
    assert_eq!(caps.driver, oracle.driver, "{who}: driver (ethtool -i)");
    assert_eq!(caps.speed_mbps, oracle.speed, "{who}: speed (ethtool)");
    assert_eq!(
        caps.rss
            .as_ref()
            .map(|r| (r.indirection_table.len(), r.hash_key.len(), r.hfunc)),
        oracle.rss,
        "{who}: RSS (ethtool -x)"
    );

    // ethtool -n IFACE rx-flow-hash udp4|udp6.
    assert_eq!(
        caps.udp4_rx_flow_hash.map(|h| h.bits),
        oracle.udp4_hash,
        "{who}: udp4 rx-flow-hash"
    );
    assert_eq!(
        caps.udp6_rx_flow_hash.map(|h| h.bits),
        oracle.udp6_hash,
        "{who}: udp6 rx-flow-hash"
    );

    // ip -d -j link.
    let l = &oracle.link;
    assert_eq!(
        u64::from(caps.ifindex),
        l["ifindex"].as_u64().unwrap(),
        "{who}: ifindex"
    );
    assert_eq!(
        u64::from(caps.mtu),
        l["mtu"].as_u64().unwrap(),
        "{who}: mtu"
    );
    assert_eq!(
        caps.max_mtu.map(u64::from),
        l["max_mtu"].as_u64().filter(|&m| m != 0),
        "{who}: max_mtu"
    );
    assert_eq!(
        caps.num_tx_queues.map(u64::from),
        l["num_tx_queues"].as_u64(),
        "{who}: num_tx_queues"
    );
    assert_eq!(
        caps.num_rx_queues.map(u64::from),
        l["num_rx_queues"].as_u64(),
        "{who}: num_rx_queues"
    );
    assert_eq!(
        caps.link_kind.as_deref(),
        l["linkinfo"]["info_kind"].as_str(),
        "{who}: link kind"
    );
}
