//! An OpenStack-shaped tenant built with `ovn-nbctl` only, as Neutron builds one: two
//! networks (`sw0` 10.0.0.0/24 + 2001:db8::/64, `sw1` 10.0.1.0/24 + 2001:db8:1::/64)
//! joined by router `lr0`; every VM port in `neutron_pg_drop` (drop all IP both ways);
//! security group `pg_web` (TCP 80 and ICMP in, everything out) and `pg_db` (TCP 5432
//! from `pg_web`'s addresses and ICMP in, IPv4 out), both `allow-related`; DHCP on
//! `sw0`.

use super::ovn::OvnCentral;

/// A VM port of the tenant.
#[derive(Debug, Clone, Copy)]
pub struct Vm {
    /// Logical port name.
    pub name: &'static str,
    /// Its switch.
    pub switch: &'static str,
    /// MAC.
    pub mac: &'static str,
    /// IPv4 address.
    pub ip4: &'static str,
    /// IPv6 address.
    pub ip6: &'static str,
    /// Its security group.
    pub group: &'static str,
}

/// The tenant's VMs.
pub const VMS: [Vm; 6] = [
    Vm {
        name: "vm1",
        switch: "sw0",
        mac: "50:54:00:00:00:01",
        ip4: "10.0.0.11",
        ip6: "2001:db8::11",
        group: "pg_web",
    },
    Vm {
        name: "vm2",
        switch: "sw0",
        mac: "50:54:00:00:00:02",
        ip4: "10.0.0.12",
        ip6: "2001:db8::12",
        group: "pg_web",
    },
    Vm {
        name: "vm3",
        switch: "sw0",
        mac: "50:54:00:00:00:03",
        ip4: "10.0.0.13",
        ip6: "2001:db8::13",
        group: "pg_db",
    },
    Vm {
        name: "vm4",
        switch: "sw1",
        mac: "50:54:00:00:01:04",
        ip4: "10.0.1.14",
        ip6: "2001:db8:1::14",
        group: "pg_web",
    },
    Vm {
        name: "vm5",
        switch: "sw1",
        mac: "50:54:00:00:01:05",
        ip4: "10.0.1.15",
        ip6: "2001:db8:1::15",
        group: "pg_db",
    },
    Vm {
        name: "vm6",
        switch: "sw0",
        mac: "50:54:00:00:00:06",
        ip4: "10.0.0.16",
        ip6: "2001:db8::16",
        group: "pg_web",
    },
];

/// The router's ports: (switch, router port MAC, IPv4, IPv6).
pub const ROUTER: [(&str, &str, &str, &str); 2] = [
    ("sw0", "00:00:00:00:ff:01", "10.0.0.1", "2001:db8::1"),
    ("sw1", "00:00:00:00:ff:02", "10.0.1.1", "2001:db8:1::1"),
];

/// Builds the tenant in `c`'s Northbound database and waits until northd has
/// written its logical flows.
pub fn build(c: &OvnCentral) {
    c.nbctl(&[
        "ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0",
    ]);
    for (sw, mac, ip4, ip6) in ROUTER {
        let lrp = format!("lr0-{sw}");
        let lsp = format!("{sw}-lr0");
        c.nbctl(&[
            "lrp-add",
            "lr0",
            &lrp,
            mac,
            &format!("{ip4}/24"),
            &format!("{ip6}/64"),
        ]);
        c.attach_router(sw, &lsp, &lrp);
    }
    for vm in VMS {
        let addrs = format!("{} {} {}", vm.mac, vm.ip4, vm.ip6);
        c.nbctl(&[
            "lsp-add",
            vm.switch,
            vm.name,
            "--",
            "lsp-set-addresses",
            vm.name,
            &addrs,
            "--",
            "lsp-set-port-security",
            vm.name,
            &addrs,
        ]);
    }
    let names: Vec<&str> = VMS.iter().map(|v| v.name).collect();
    let mut pg = vec!["pg-add", "neutron_pg_drop"];
    pg.extend(&names);
    c.nbctl(&pg);
    for g in ["pg_web", "pg_db"] {
        let mut pg = vec!["pg-add", g];
        pg.extend(VMS.iter().filter(|v| v.group == g).map(|v| v.name));
        c.nbctl(&pg);
    }
    let acl = |g: &str, dir: &str, m: &str, action: &str| {
        c.nbctl(&[
            "acl-add",
            g,
            dir,
            if action == "drop" { "1001" } else { "1002" },
            m,
            action,
        ]);
    };
    acl(
        "neutron_pg_drop",
        "to-lport",
        "outport == @neutron_pg_drop && ip",
        "drop",
    );
    acl(
        "neutron_pg_drop",
        "from-lport",
        "inport == @neutron_pg_drop && ip",
        "drop",
    );
    acl(
        "pg_web",
        "from-lport",
        "inport == @pg_web && ip4",
        "allow-related",
    );
    acl(
        "pg_web",
        "from-lport",
        "inport == @pg_web && ip6",
        "allow-related",
    );
    acl(
        "pg_web",
        "to-lport",
        "outport == @pg_web && ip4 && ip4.src == 0.0.0.0/0 && tcp.dst == 80",
        "allow-related",
    );
    acl(
        "pg_web",
        "to-lport",
        "outport == @pg_web && ip4 && ip4.src == 0.0.0.0/0 && icmp4",
        "allow-related",
    );
    acl(
        "pg_web",
        "to-lport",
        "outport == @pg_web && ip6 && icmp6",
        "allow-related",
    );
    acl(
        "pg_db",
        "from-lport",
        "inport == @pg_db && ip4",
        "allow-related",
    );
    acl(
        "pg_db",
        "to-lport",
        "outport == @pg_db && ip4 && ip4.src == $pg_web_ip4 && tcp.dst == 5432",
        "allow-related",
    );
    acl(
        "pg_db",
        "to-lport",
        "outport == @pg_db && ip4 && icmp4",
        "allow-related",
    );
    let dhcp = c.nbctl(&[
        "create", "DHCP_Options", "cidr=10.0.0.0/24",
        "options=\"lease_time\"=\"3600\" \"router\"=\"10.0.0.1\" \"server_id\"=\"10.0.0.1\" \"server_mac\"=\"00:00:00:00:ff:01\" \"mtu\"=\"1442\" \"dns_server\"=\"{8.8.8.8}\"",
    ]);
    for vm in VMS.iter().filter(|v| v.switch == "sw0") {
        c.nbctl(&["lsp-set-dhcpv4-options", vm.name, dhcp.trim()]);
    }
    c.nbctl(&["--wait=sb", "sync"]);
}
