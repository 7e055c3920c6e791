#!/usr/bin/env bash
# New connections per second through an OVN load balancer VIP and a floating IP (issue 41
# §3): vswitchd as the OVN chassis against Open vSwitch with DPDK + ovn-controller 23.03.
# Run as root.
#
# A DPDK testpmd "guest" on CPU 1 has three ports: net_pcap0 reading a file of N TCP SYNs
# (scripts/lib/syn-pcap.py: no two share a 5-tuple, sources counted up from a base
# address, 60,000 source ports each), and two virtio-user ports, a (the clients) and b (the
# server). Chained io forwarding moves the file's frames into a as fast as the switch takes
# them (tx retry: a full ring waits up to 200 µs rather than dropping) and counts what
# reaches b. The switch under test runs on CPU 0. Every SYN that reaches b is a connection
# the switch opened:
#   lb   logical switch cpslb, client port lb-a (no port security: the clients are many
#        addresses), server lb-b (198.18.0.2, .3 and .4: three backends on one port, port
#        security), Neutron's security groups (neutron_pg_drop; pg_cpslb admits what
#        members send and, to them, TCP port 80 from anywhere: a web server's group) and a
#        TCP load balancer VIP 198.18.0.100:80 -> the three backends' port 80. Each SYN
#        (10.0.0.1+ -> the VIP) is committed in a's zone with its DNAT to the backend its
#        5-tuple's hash picks (ct_lb_mark) and again in b's zone: two new connections in
#        the tracker
#   fip  scripts/lib/ovn-sg.sh fip_tenant: a gateway router bound to the chassis, client
#        port fip-a on the external switch (no port security), the VM fip-b 198.18.1.2
#        behind floating IP 10.253.0.0 (dnat_and_snat). Each SYN (10.254.0.1+ -> the
#        floating IP, to the router's MAC) is looked up in the router's SNAT zone (un-SNAT,
#        which creates nothing: CPS_DEBUG shows that zone empty) and DNAT'd in its DNAT
#        zone: one new connection, with its translation and alias
# Switches (--only, interleaved over ROUNDS rounds):
#   vswitchd-lb, vswitchd-fip  vswitchd as chassis hv-cps (its tunnel endpoint on a veth in
#        namespace cpsns, idle), --ct-max-connections 12000000 --ct-zone-max 0 (OVS
#        limits no zone by default), --poll busy
#   ovs-lb, ovs-fip            Open vSwitch with DPDK, ovn-controller, the same chassis name,
#        dpctl/ct-set-maxconns 12000000
#   limit                      testpmd's own vhost PMD forwarding a -> b (io mode, no
#        connection tracking; the guest sends a file of 65,536 SYNs over and over, held in
#        memory: net_pcap's infinite_rx): how fast the generator itself goes; a switch near
#        it is measured by the generator, not by itself
# The rate: b's received frames over SECS seconds, after WARM seconds of traffic (the file
# is sent once from the start; the run fails if it ran out before the window's end: raise
# --conns). "lost": the frames the guest sent into a during the window that did not reach b
# (the switch's drops, whatever their reason), as a share of them. After each vswitchd
# measurement its program cache counts (hits, wildcard hits, interpreter runs) go to
# stderr. CPS_DEBUG=1 adds vswitchd's pmd-stats, port stats and conntrack zones (and
# keeps its log as /tmp/cps-SWITCH.log), and OVS's megaflow hits and upcalls.
#
#   scripts/bench-cps.sh [--rounds N] [--secs S] [--warm S] [--conns N]
#                        [--only "vswitchd-lb ovs-lb vswitchd-fip ovs-fip limit"] [--json FILE]
#   --json FILE  appends one JSON object per measurement: scenario "cps-lb" or "cps-fip"
#                (limit: "cps-lb", whose SYNs it forwards), switch "vswitchd" | "ovs" |
#                "limit", round,
#                params {connections, secs}, metrics {cps, lost}
#   VSWITCHD=/path/to/vswitchd   another build; CARGO_TARGET_DIR is honoured
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3; secs=1.5; warm=0.5; conns=4000000
only="vswitchd-lb ovs-lb vswitchd-fip ovs-fip limit"; json=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --warm) warm=$2; shift 2 ;;
        --conns) conns=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "bench-cps.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for sw in $only; do
    case "$sw" in vswitchd-lb|ovs-lb|vswitchd-fip|ovs-fip|limit) ;;
    *) echo "bench-cps.sh: unknown switch $sw (see --help)" >&2; exit 2 ;;
    esac
done
if [ -n "$json" ]; then json=$(realpath -m "$json"); touch "$json"; fi
scripts/setup.sh --bench
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p vswitch --bins
bin="${CARGO_TARGET_DIR:-target}/release"

# shellcheck source=scripts/lib/ovn-sg.sh
. scripts/lib/ovn-sg.sh
work=$(mktemp -d /tmp/vswitch-cps.XXXXXX)
central="$work/central"
maxconns=12000000
pids=()
stop_all() {
    exec 3>&- 4>&- || true
    stop_pids_and_ovs
    sleep 0.5
    if [ -S "$central/sb.sock" ]; then sbctl --if-exists chassis-del hv-cps || true; fi
    rm -rf "$work/ovs" /var/run/dpdk/cps* 2>/dev/null || true
    rm -f /dev/hugepages/cps*map_* "$work"/*.sock "$work/guest.in" "$work/sw.in" 2>/dev/null || true
}
trap 'stop_all; ovn_central_stop; ip netns del cpsns 2>/dev/null || true; rm -rf "$work"' EXIT INT TERM

# The tenants (see the header) and the namespace of vswitchd's idle tunnel endpoint.
cps_central() {
    ovn_central
    local b="02:00:00:00:00:02 198.18.0.2 198.18.0.3 198.18.0.4"
    two_ports cpslb lb-a "02:00:00:00:00:01 198.18.0.1" "02:00:00:00:00:01" lb-b "$b" "$b"
    nbctl lsp-set-port-security lb-a
    nbctl pg-add neutron_pg_drop lb-a lb-b -- pg-add pg_cpslb lb-a lb-b
    nbctl acl-add neutron_pg_drop to-lport 1001 "outport == @neutron_pg_drop && ip" drop \
        -- acl-add neutron_pg_drop from-lport 1001 "inport == @neutron_pg_drop && ip" drop \
        -- acl-add pg_cpslb from-lport 1002 "inport == @pg_cpslb && ip4" allow-related \
        -- acl-add pg_cpslb to-lport 1002 "outport == @pg_cpslb && ip4 && tcp.dst == 80" allow-related
    nbctl lb-add cpslb-lb 198.18.0.100:80 198.18.0.2:80,198.18.0.3:80,198.18.0.4:80 tcp \
        -- ls-lb-add cpslb cpslb-lb
    fip_tenant hv-cps fip-a "02:00:00:00:00:01 10.254.0.1" fip-b "02:00:00:00:00:02 198.18.1.2" \
        10.253.0.0 "00:00:00:00:f0:01 10.255.255.254/14"
    nbctl lsp-set-port-security fip-a
    nbctl --wait=sb sync
    sg_netns cpsns
}

# The SYN files, one per scenario, written once.
pcap_of() { # scenario -> path
    local out="$work/syn-$1.pcap"
    if [ ! -f "$out" ]; then
        case "$1" in
        lb) /usr/bin/python3 scripts/lib/syn-pcap.py "$out" "$conns" 02:00:00:00:00:01 \
                02:00:00:00:00:02 10.0.0.1 198.18.0.100 80 ;;
        limit) /usr/bin/python3 scripts/lib/syn-pcap.py "$out" 65536 02:00:00:00:00:01 \
                02:00:00:00:00:02 10.0.0.1 198.18.0.100 80 ;;
        fip) /usr/bin/python3 scripts/lib/syn-pcap.py "$out" "$conns" 02:00:00:00:00:01 \
                00:00:00:00:f0:01 10.254.0.1 10.253.0.0 80 ;;
        esac
    fi
    echo "$out"
}

start_guest() { # pcap [pcap devargs]
    mkfifo "$work/guest.in"
    stdbuf -o0 dpdk-testpmd -l 0,1 --main-lcore 0 -m 512 --no-pci --file-prefix=cpsguest \
        --single-file-segments \
        --vdev "net_pcap0,rx_pcap=$1,tx_pcap=/dev/null${2:-}" \
        --vdev "net_virtio_user0,path=$work/a.sock,queues=1,server=1,mac=02:00:00:00:00:01,queue_size=1024" \
        --vdev "net_virtio_user1,path=$work/b.sock,queues=1,server=1,mac=02:00:00:00:00:02,queue_size=1024" \
        -- -i --nb-cores=1 --total-num-mbufs=131072 --forward-mode=io --port-topology=chained \
        --rxd=1024 --txd=1024 --no-flush-rx \
        <"$work/guest.in" >"$work/guest.log" 2>&1 &
    pids+=($!)
    exec 3>"$work/guest.in"
}

start_switch() { # switch
    case "$1" in
    limit)
        mkfifo "$work/sw.in"
        stdbuf -o0 dpdk-testpmd -l 1,0 --main-lcore 1 -m 512 --no-pci --file-prefix=cpssw \
            --single-file-segments \
            --vdev "net_vhost0,iface=$work/a.sock,client=1,queues=1" \
            --vdev "net_vhost1,iface=$work/b.sock,client=1,queues=1" \
            -- -i --nb-cores=1 --forward-mode=io --total-num-mbufs=32768 \
            <"$work/sw.in" >"$work/sw.log" 2>&1 &
        pids+=($!)
        exec 4>"$work/sw.in"
        echo "start" >&4
        ;;
    ovs-*)
        local d="$work/ovs" i
        ovs_dpdk "$d" br-int cpsovs
        export OVN_RUNDIR=$d OVN_LOGDIR=$d
        local vsctl="ovs-vsctl --timeout=60 --db=unix:$d/db.sock"
        for i in a b; do
            $vsctl add-port br-int "vhu$i" -- set Interface "vhu$i" type=dpdkvhostuserclient \
                "options:vhost-server-path=$work/$i.sock" "external_ids:iface-id=${1#ovs-}-$i"
        done
        ovs_ovn_chassis "$vsctl" "$d" hv-cps
        ;;
    vswitchd-*)
        ip netns exec cpsns "${VSWITCHD:-$bin/vswitchd}" \
            --vhost-user-client "a=$work/a.sock,iface_id=${1#vswitchd-}-a" \
            --vhost-user-client "b=$work/b.sock,iface_id=${1#vswitchd-}-b" \
            --uplink u=cpsns0 --geneve "t=198.51.100.1,uplink=u" \
            --ovn-remote "unix:$central/sb.sock" --chassis hv-cps \
            --ct-max-connections "$maxconns" --ct-zone-max 0 \
            --pmd-cpus 0 --poll busy --control "$work/ctl.sock" 2>"$work/vswitchd.log" &
        pids+=($!)
        ;;
    esac
}

ovs_appctl() { ovs-appctl -t "$(ls "$work"/ovs/ovs-vswitchd*.ctl 2>/dev/null | head -1)" "$@"; }

port_stat() { # port field -> number (testpmd `show port stats`)
    : >"$work/guest.log"
    echo "show port stats $1" >&3
    for _ in $(seq 50); do
        grep -aq "$2" "$work/guest.log" && break; sleep 0.02
    done
    grep -ao "$2 *[0-9]*" "$work/guest.log" | head -1 | awk '{print $2}'
}

measure() { # switch round
    local sw=$1 round=$2 scen=${1#*-}
    if [ "$sw" = limit ]; then
        # No connection tracking: a file of 65,536 SYNs sent over and over (held in
        # memory, infinite_rx) measures the generator.
        scen=limit
        start_guest "$(pcap_of limit)" ",infinite_rx=1"
    else
        start_guest "$(pcap_of "$scen")"
    fi
    start_switch "$sw"
    for _ in $(seq 300); do grep -aq "testpmd> " "$work/guest.log" 2>/dev/null && break; sleep 0.1; done
    for _ in $(seq 100); do
        echo "show port info all" >&3; sleep 0.2
        [ "$(grep -ac 'Link status: up' "$work/guest.log")" -ge 3 ] && break
        : > "$work/guest.log"
    done
    case "$sw" in
    *-lb) sg_ready lb-a lb-b ;;
    *-fip) sg_ready fip-a fip-b ;;
    esac
    case "$sw" in ovs-*) ovs_appctl dpctl/ct-set-maxconns "$maxconns" >/dev/null ;; esac
    sleep 1
    echo "set fwd io retry" >&3
    echo "set burst tx delay 1 retry 200" >&3
    echo "start" >&3
    sleep "$warm"
    local t0 t1 b0 b1 a0 a1 f1
    b0=$(port_stat 2 RX-packets:); a0=$(port_stat 1 TX-packets:); t0=$(date +%s.%N)
    sleep "$secs"
    b1=$(port_stat 2 RX-packets:); a1=$(port_stat 1 TX-packets:); t1=$(date +%s.%N)
    f1=$(port_stat 0 RX-packets:)
    echo "stop" >&3
    # What the switch's caches did with the new connections (to stderr).
    case "$sw" in
    vswitchd-*) "$bin/vswitchctl" --socket "$work/ctl.sock" pmd-stats 2>/dev/null |
        tee "$work/pmd-stats.txt" |
        grep -E "OVN pipeline" | sed "s/^ */    $sw: /" >&2 || true
        if [ -n "${CPS_DEBUG:-}" ]; then
            cat "$work/pmd-stats.txt" >&2
            "$bin/vswitchctl" --socket "$work/ctl.sock" stats >&2 || true
            "$bin/vswitchctl" --socket "$work/ctl.sock" conntrack >&2 || true
            cp "$work/vswitchd.log" "/tmp/cps-$sw.log"
        fi ;;
    ovs-*) [ -z "${CPS_DEBUG:-}" ] || ovs_appctl dpif-netdev/pmd-stats-show 2>/dev/null |
        grep -E "megaflow hits|upcall" | sed "s/^ */    $sw: /" >&2 || true ;;
    esac
    stop_all
    if [ "$sw" != limit ] && [ "${f1:-0}" -ge "$conns" ]; then
        echo "bench-cps.sh: $sw sent the whole file ($conns SYNs) before the window ended; raise --conns" >&2
        return 1
    fi
    /usr/bin/python3 - "$sw" "$round" "$t0" "$t1" "$b0" "$b1" "$a0" "$a1" "$conns" "$secs" "$json" <<'PY'
import json, sys
sw, rnd, t0, t1, b0, b1, a0, a1, conns, secs, out = sys.argv[1:]
dt = float(t1) - float(t0)
got, sent = int(b1) - int(b0), int(a1) - int(a0)
cps = got / dt
lost = 0.0 if sent == 0 else max(0, sent - got) / sent
print(f"{sw:14s} round {rnd}: {cps / 1e6:6.3f} M connections/s  (lost {lost * 100:.2f} %)")
if out:
    # limit forwards the load balancer's SYNs: its ceiling goes in that table.
    scen = "cps-lb" if sw == "limit" else "cps-" + sw.split("-")[1]
    rec = {"scenario": scen, "switch": sw.split("-")[0], "round": int(rnd),
           "params": {"connections": int(conns), "secs": float(secs)},
           "metrics": {"cps": cps, "lost": lost}}
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
PY
}

cps_central
for round in $(seq "$rounds"); do
    for sw in $only; do
        measure "$sw" "$round" | tee -a "$work/results.txt"
    done
done
/usr/bin/python3 - "$work/results.txt" <<'PY'
import re, statistics, sys
med = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+round \d+:\s+([\d.]+) M", line)
    if m:
        med.setdefault(m.group(1), []).append(float(m.group(2)))
print("\nmedians (M new connections/s):")
for sw, v in med.items():
    print(f"  {sw:14s} {statistics.median(v):.3f}")
for scen in ("lb", "fip"):
    v, o = med.get(f"vswitchd-{scen}"), med.get(f"ovs-{scen}")
    if v and o:
        print(f"  {scen}: vswitchd / ovs = {statistics.median(v) / statistics.median(o):.2f} (target >= 2)")
PY
