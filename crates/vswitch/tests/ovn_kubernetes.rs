//! An ovn-kubernetes-shaped node on a vswitchd chassis (issue 41 §2), built as
//! ovn-kubernetes builds one in shared-gateway mode: the node's switch `node1` with its
//! pods behind the distributed `ovn_cluster_router`, the `join` switch, and the node's
//! gateway router `GR_node1` bound to the chassis (`options:chassis`) with
//! `lb_force_snat_ip=router_ip`, SNAT of the cluster network to the node's address,
//! and the node's external switch. A Service is a load balancer on the node switch
//! and the gateway router (ClusterIP 10.96.0.10:80), a NodePort one on the gateway
//! router (the node's address, port 30080).
//!
//! - pod to Service: every connection answered, spread over both endpoints, which see
//!   the pod's own address;
//! - outside to NodePort: every connection answered from the node's address; the
//!   endpoints see the gateway router's join address (`lb_force_snat_ip=router_ip`),
//!   so their answers come back through it;
//! - pod to outside: SNATed to the node's address.

mod common;

use std::collections::HashMap;

use common::chassis::*;
use common::hosts::*;
use common::ovn::OvnCentral;
use common::*;

/// (port, MAC, IPv4): two Service endpoints, a client pod, the upstream host.
const PODS: [(&str, &str, &str); 3] = [
    ("pod1", "0a:58:0a:f4:00:0b", "10.244.0.11"),
    ("pod2", "0a:58:0a:f4:00:0c", "10.244.0.12"),
    ("pod3", "0a:58:0a:f4:00:0d", "10.244.0.13"),
];
const UPSTREAM: (&str, &str, &str) = ("upstream", "50:54:00:00:05:fe", "172.16.0.254");
/// The node's address (the gateway router's external port), the Service's ClusterIP
/// and the gateway router's join address.
const NODE_IP: &str = "172.16.0.10";
const CLUSTER_IP: &str = "10.96.0.10";
const GR_JOIN_IP: &str = "100.64.0.2";
const NODE_PORT: u16 = 30080;

/// The node's logical topology.
fn build(c: &OvnCentral) {
    for ls in ["node1", "join", "ext_node1"] {
        c.nbctl(&["ls-add", ls]);
    }
    for (name, mac, ip) in PODS {
        let addrs = format!("{mac} {ip}");
        c.add_vif("node1", name, &addrs);
    }
    let up = format!("{} {}", UPSTREAM.1, UPSTREAM.2);
    c.add_vif("ext_node1", UPSTREAM.0, &up);
    c.nbctl(&["lr-add", "ovn_cluster_router"]);
    c.nbctl(&[
        "lr-add",
        "GR_node1",
        "--",
        "set",
        "logical_router",
        "GR_node1",
        "options:chassis=hv1",
    ]);
    c.nbctl(&[
        "set",
        "logical_router",
        "GR_node1",
        "options:lb_force_snat_ip=router_ip",
    ]);
    for (lr, sw, lrp, mac, net) in [
        (
            "ovn_cluster_router",
            "node1",
            "rtos-node1",
            "0a:58:0a:f4:00:01",
            "10.244.0.1/24",
        ),
        (
            "ovn_cluster_router",
            "join",
            "rtoj-ovn_cluster_router",
            "0a:58:64:40:00:01",
            "100.64.0.1/16",
        ),
        (
            "GR_node1",
            "join",
            "rtoj-GR_node1",
            "0a:58:64:40:00:02",
            "100.64.0.2/16",
        ),
        (
            "GR_node1",
            "ext_node1",
            "rtoe-GR_node1",
            "0a:58:ac:10:00:0a",
            "172.16.0.10/24",
        ),
    ] {
        c.nbctl(&["lrp-add", lr, lrp, mac, net]);
        c.attach_router(sw, &format!("{sw}-{lrp}"), lrp);
    }
    c.nbctl(&[
        "lr-route-add",
        "ovn_cluster_router",
        "0.0.0.0/0",
        GR_JOIN_IP,
    ]);
    c.nbctl(&["lr-route-add", "GR_node1", "10.244.0.0/16", "100.64.0.1"]);
    c.nbctl(&["lr-route-add", "GR_node1", "0.0.0.0/0", UPSTREAM.2]);
    c.nbctl(&["lr-nat-add", "GR_node1", "snat", NODE_IP, "10.244.0.0/16"]);
    let endpoints = format!("{}:8080,{}:8080", PODS[0].2, PODS[1].2);
    c.nbctl(&[
        "lb-add",
        "svc",
        &format!("{CLUSTER_IP}:80"),
        &endpoints,
        "tcp",
    ]);
    c.nbctl(&[
        "lb-add",
        "nodeport",
        &format!("{NODE_IP}:{NODE_PORT}"),
        &endpoints,
        "tcp",
    ]);
    c.nbctl(&["ls-lb-add", "node1", "svc"]);
    c.nbctl(&["lr-lb-add", "GR_node1", "svc"]);
    c.nbctl(&["lr-lb-add", "GR_node1", "nodeport"]);
}

/// The router the hosts of `ip`'s network route through.
fn gateway_of(ip: &str) -> &'static str {
    if ip.starts_with("172.16.0.") {
        NODE_IP
    } else {
        "10.244.0.1"
    }
}

/// `n` TCP connections from `ns` to `ip`:`port`: each answer's first line ("podN
/// ADDR": the endpoint and the client address it saw) and the address it came from,
/// or "fail".
fn connections(ns: &str, ip: &str, port: u16, n: u32) -> Vec<String> {
    let script = format!(
        "import socket\n\
         for i in range({n}):\n\
         \x20try:\n\
         \x20 s=socket.create_connection(('{ip}',{port}),timeout=5)\n\
         \x20 d=s.makefile().readline().strip(); p=s.getpeername()[0]; s.close()\n\
         \x20 print(d,p,flush=True)\n\
         \x20except OSError as e:\n\
         \x20 print('fail',e,flush=True)\n"
    );
    py(ns, &script).lines().map(str::to_string).collect()
}

/// Answers by endpoint, failing on a missing answer, one not from `from` or one whose
/// endpoint saw another client than `client`.
fn by_endpoint(answers: &[String], client: &str, from: &str) -> HashMap<String, u32> {
    let mut by = HashMap::new();
    for a in answers {
        let w: Vec<&str> = a.split_whitespace().collect();
        assert!(
            w.len() == 3 && w[0] != "fail",
            "an answer went missing: {a}"
        );
        assert_eq!(
            (w[1], w[2]),
            (client, from),
            "client seen, answered from: {a}"
        );
        *by.entry(w[0].to_string()).or_insert(0) += 1;
    }
    by
}

#[test]
fn an_ovn_kubernetes_node_serves_cluster_ip_node_port_and_egress() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-k8s");
    let c = OvnCentral::start(&dir);
    build(&c);
    let hosts = [PODS[0], PODS[1], PODS[2], UPSTREAM];
    let (_f, sw, nss) = one_chassis("ok8", &dir, &c, &hosts, gateway_of);
    let (pod3, up) = (&nss[2].0, &nss[3].0);
    // The upstream host has no route to the cluster: only translated packets return.
    run(&["ip", "netns", "exec", up, "ip", "route", "del", "default"]);
    let _endpoints: Vec<KillOnDrop> = nss[..2]
        .iter()
        .zip(&PODS)
        .map(|(ns, pod)| backend(&ns.0, pod.0))
        .collect();

    let svc = by_endpoint(
        &connections(pod3, CLUSTER_IP, 80, 40),
        PODS[2].2,
        CLUSTER_IP,
    );
    eprintln!("ClusterIP: {svc:?}");
    assert_eq!(svc.len(), 2, "both endpoints serve the Service: {svc:?}");

    let np = by_endpoint(
        &connections(up, NODE_IP, NODE_PORT, 40),
        GR_JOIN_IP,
        NODE_IP,
    );
    eprintln!("NodePort: {np:?}");
    assert_eq!(np.len(), 2, "both endpoints serve the NodePort: {np:?}");

    assert_eq!(seen_from(pod3, up, UPSTREAM.2, 7301), NODE_IP);
    for reason in ["nat_exhausted", "ovn_pipeline"] {
        assert_eq!(drops(&sw, "pod3", reason), 0, "pod3: {reason}");
    }
    drop(nss);
}
