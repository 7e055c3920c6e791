#!/usr/bin/env bash
# PVP-style VM-to-VM loopback benchmark (the field's standard vhost test), run as root.
#
# One DPDK testpmd "guest" with two virtio-user ports (server=1, MACs ..:01/..:02, each
# --eth-peer set to the other) forwards in io mode; 64 bursts are injected with
# `start tx_first 64`, and the guest's received frames are counted over SECS seconds
# after `clear port stats all`. Every frame crosses the switch under test once per
# guest forward. The switch runs on CPU 0, the guest's forwarding core on CPU 1.
#
# Switches, interleaved over ROUNDS rounds in one invocation:
#   limit     testpmd's own vhost PMD forwarding between the two sockets (io mode)
#   ovs       Open vSwitch 3.1 with DPDK, two dpdkvhostuserclient ports, NORMAL action
#   vswitchd  this project, two --vhost-user-client ports, --poll busy
#   vswitchd-nocache  the same with --flow-cache off (not in the default list)
#   ovs-sg    Open vSwitch with DPDK as an OVN chassis: ovn-controller 23.03 programs br-int
#             (netdev datapath, two dpdkvhostuserclient ports with external_ids:iface-id)
#             from an OVN central this script starts (NB, SB, ovn-northd)
#   vswitchd-sg  vswitchd as the same OVN chassis (--ovn-remote, --chassis, its two ports
#             iface_id=), which needs a Geneve endpoint: an AF_XDP uplink on a veth in
#             namespace pvpsg carries it (idle: both ports are on this chassis)
#   The -sg switches run OVN's logical pipeline with security groups, Neutron's shape: one
#   logical switch, ports pvp-a and pvp-b ("02:00:00:00:00:01 198.18.0.1", "...:02
#   198.18.0.2"), port security on MAC and IPv4 (each port also lists the other's address,
#   an allowed address pair: the io-forwarding guest sends the frames it receives on one
#   port out of the other unchanged, and testpmd's frames are all 198.18.0.1 -> .2), port
#   group neutron_pg_drop (both ports; drop all IP both ways, priority 1001) and pg_pvp
#   (both ports; allow-related all IPv4 from them and IPv4 UDP from $pg_pvp_ip4 to them,
#   1002). Every frame passes conntrack twice (the sender's zone for from-lport ACLs, the
#   receiver's for to-lport) and is an established connection's. Each chassis run starts
#   from no Chassis row (deleted after the previous run) and measures once both logical
#   ports are up and `ovn-nbctl --wait=hv sync` returned. E.g. --sizes 64 --only
#   "vswitchd vswitchd-sg ovs-sg" (the issue's two targets: vswitchd-sg/ovs-sg and
#   vswitchd-sg/vswitchd). With --json, a run with -sg switches writes scenario "sg"
#   records: switches "vswitchd" and "ovs" for the -sg ones, "vswitchd-l2" for plain
#   vswitchd
#   ovs-lb, vswitchd-lb  the same two chassis with a load balancer: logical switch pvplb,
#             ports lb-a and lb-b (198.18.0.1, .2; port security on each one's own MAC and
#             IP only), security groups of the -sg shape, and a UDP load balancer from
#             VIP 198.18.0.100:9 to 198.18.0.2:9. The guest runs in 5tswap mode on a loop
#             topology (each port answers what it receives, addresses and ports swapped)
#             and port a's frames go to the VIP (--tx-ip 198.18.0.1,198.18.0.100): each a
#             -> VIP frame is DNAT'd to b (in a's zone) and each answer un-DNAT'd back from
#             the VIP (in a's zone on the way out), every frame through conntrack twice.
#             Port b's own tx_first frames (source 198.18.0.1) fail its port security and
#             are dropped before the measured window. With --json: scenario "lb",
#             switches "vswitchd" and "ovs"
#   ovs-fip, vswitchd-fip  the same two chassis with a floating IP on a gateway router
#             bound to them (scripts/lib/ovn-sg.sh fip_tenant). A router decrements the
#             TTL, so a loop through it dies out: here the guest generates frames (testpmd
#             flowgen, one flow; it also takes what it receives off its rings), whose
#             addresses testpmd fixes (10.254.0.0 -> 10.253.0.0, UDP 1000 -> 1001; older
#             testpmds also fix the MACs, 00:01:02:03:04:00 -> :01), so the tenant is built
#             around them: port a (MAC 00:01:02:03:04:00) is the external client 10.254.0.0
#             on switch fipout (10.252.0.0/14, the router at 10.255.255.254 with MAC
#             00:01:02:03:04:01), port b a VM
#             198.18.1.2 on switch fipin, dnat_and_snat 10.253.0.0 -> 198.18.1.2. Both ports
#             send to the floating IP through the router's MAC; the guest counts what
#             reaches b: each crosses fipout, the router (its DNAT and SNAT
#             zones) and fipin, DNAT'd. Port b's own frames fail its port security and are
#             dropped at once (the switch still reads them: its cycles per packet count
#             them). With --json: scenario "fip"
#
#   scripts/bench-pvp.sh [--rounds N] [--secs S] [--sizes "64 512 1518"] [--only "vswitchd ovs limit"]
#   VSWITCHD=/path/to/vswitchd scripts/bench-pvp.sh ...   (run another build as "vswitchd")
#   VSWITCHD_ALT=DIR   a second build (DIR/vswitchd, DIR/vswitchctl) as switch "vswitchd-alt",
#                      interleaved with the others: --only "vswitchd-alt vswitchd" compares the
#                      two builds in one run (e.g. the build before a change and after it)
#   --sizes imix       (alone or among the sizes) the IMIX of the seeds' methodology: frames
#                      of 64, 570 and 1518 B in 7:4:1, injected by the guest in three rounds
#                      of tx_first (7, 4 and 1 bursts of 32 per port, `set txpkts` before
#                      each, `set flush_rx off` so the loop keeps what it holds between
#                      them) into 1024-entry rings (PVP_QUEUE_SIZE), which hold all 768
#                      frames: every switch loops the same mix. Gbit/s counts the mix's
#                      mean frame of 353.8 B
#   --multi-flow       inject frames of 256 flows (testpmd --txonly-multi-flow: 198.18.X.3)
#   --flows N          instead of tx_first, inject F frames of N distinct IPv4/UDP flows (src
#                      10.0.x.y, src port 1024+i; half a->b, half b->a) from a scapy-written
#                      pcap: a second testpmd (net_pcap -> virtio-user, io forwarding with tx
#                      retry) on a third switch port "c" sends the file once and quits, then
#                      the guest loops them. a/b MACs are static in vswitchd; only the vswitchd
#                      switches can take part. Cached flows in steady state: N (the key has
#                      in_port). E.g. --flows 1280 --only "vswitchd vswitchd-nocache"
#   --frames F         frames injected with --flows (default N: every flow once). The guest's
#                      rings get 1024 entries (PVP_QUEUE_SIZE) so that the loop holds them all
#                      (with 256 only about 512 frames survive the injection)
#   --acl-rules R      R ingress ACL rules on a and b that match nothing (drop ip_src=172.16.x.0/24),
#                      all scanned by the slow path; default 100 with --flows, else 0
#   --vswitchd-args A  extra vswitchd flags, e.g. "--flow-cache off"
#   --flowgen N        instead of looping, the guest generates N IPv4/UDP flows on both ports
#                      (testpmd flowgen, --flowgen-flows=N) and counts what comes back; every
#                      switch can take part. E.g. --flowgen 1280 --sizes 64
#   --packed           the guest's virtio-user ports use packed virtqueues (packed_vq=1,
#                      virtio 1.2 §2.8) instead of split ones; every switch serves them (DPDK's
#                      vhost library, hence OVS and testpmd's vhost PMD, and vswitchd). The JSON
#                      records carry params.ring "packed" (else "split")
#   --json FILE        also append one JSON object per measurement to FILE (the raw figures
#                      scripts/bench-report.sh collects): scenario "pvp" (loop), "flows"
#                      (--flowgen) or "acl" (--flows), switch, round, params {frame_size,
#                      flows[, flow_cache, acl_rules]}, metrics {mpps, gbps, drops,
#                      cycles_per_packet}
#   --stages           vswitchd built with the stage-cycles feature (in target/stages/):
#                      prints, per measurement, its cycles per packet in each pipeline stage
#                      (rx, classify, group, deliver, complete; datapath/stages.rs) and adds
#                      them to the JSON record as metrics stage_<name>; the stamps cost a few
#                      cycles per stage and burst, so compare its totals with each other
#   PVP_PMD_STATS=1    print vswitchd's pmd-stats after each measurement
#   Every measurement also records the switch's own TSC cycles per packet over the measured
#   window: vswitchd's pmd-stats busy_cycles / packets (read at its start and end), OVS's
#   dpif-netdev/pmd-stats-show processing cycles / packets received (cleared at the start),
#   testpmd's --record-core-cycles cycles / io packets (fwd stats cleared at the start).
#   drops: the guest ports' RX-missed + RX-errors + TX-errors over the window.
#   CARGO_TARGET_DIR   honoured: vswitchd and vswitchctl are taken from its release/
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3; secs=10; sizes="64 512 1518"; only="limit ovs vswitchd"; multiflow=""; vsargs=""
flows=""; frames=""; aclrules=""; qsize=${PVP_QUEUE_SIZE:-1024}; flowgen=""; json=""; ring=split
stages=""

while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --multi-flow) multiflow="--txonly-multi-flow"; shift ;;
        --flows) flows=$2; shift 2 ;;
        --frames) frames=$2; shift 2 ;;
        --acl-rules) aclrules=$2; shift 2 ;;
        --vswitchd-args) vsargs=$2; shift 2 ;;
        --flowgen) flowgen=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        --packed) ring=packed; shift ;;
        --stages) stages=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "bench-pvp.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -n "$flows" ]; then
    for sw in $only; do
        case "$sw" in vswitchd|vswitchd-nocache|vswitchd-alt) ;;
        *) echo "bench-pvp.sh: --flows injects through a third switch port; only vswitchd and vswitchd-nocache have one (not $sw)" >&2; exit 2 ;;
        esac
    done
    [ -n "$multiflow" ] && { echo "bench-pvp.sh: --flows and --multi-flow exclude each other" >&2; exit 2; }
fi
if [[ " $sizes " == *" imix "* ]] && { [ -n "$flows" ] || [ -n "$flowgen" ]; }; then
    echo "bench-pvp.sh: --sizes imix is the looped mix; it excludes --flows and --flowgen" >&2; exit 2
fi
if [ -n "$flowgen" ] && { [ -n "$flows" ] || [ -n "$multiflow" ]; }; then
    echo "bench-pvp.sh: --flowgen excludes --flows and --multi-flow" >&2; exit 2
fi
sg=""
for sw in $only; do case "$sw" in *-sg|*-lb|*-fip) sg=1 ;; esac; done
if [ -n "$sg" ] && { [ -n "$flows" ] || [ -n "$flowgen" ] || [ -n "$multiflow" ]; }; then
    echo "bench-pvp.sh: the -sg and -lb switches take testpmd's one flow (198.18.0.1 -> .2 or the VIP): their port security drops --flows, --flowgen and --multi-flow frames" >&2; exit 2
fi
if [ -n "$json" ]; then json=$(realpath -m "$json"); touch "$json"; fi
aclrules=${aclrules:-$([ -n "$flows" ] && echo 100 || echo 0)}
frames=${frames:-${flows:-0}}
scripts/setup.sh --bench
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if [ -n "$stages" ]; then
    # A profiling build of its own, so the usual release build stays as it is.
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/stages" \
        cargo build --release -q -p vswitch --bins --features stage-cycles
    bin="${CARGO_TARGET_DIR:-target}/stages/release"
else
    cargo build --release -q -p vswitch --bins
    bin="${CARGO_TARGET_DIR:-target}/release"
fi

# shellcheck source=scripts/lib/ovn-sg.sh
. scripts/lib/ovn-sg.sh
work=$(mktemp -d /tmp/vswitch-pvp.XXXXXX)
results="$work/results.tsv"
pids=()
stop_all() {
    # (No 2>/dev/null here: on exec it would silence the script's stderr for good.)
    exec 3>&- 4>&- || true
    stop_pids_and_ovs
    sleep 0.5
    # The next chassis run starts from no Chassis row (and no binding to it).
    if [ -S "$central/sb.sock" ]; then sbctl --if-exists chassis-del hv-pvp || true; fi
    rm -rf "$work/ovs" /var/run/dpdk/pvp* 2>/dev/null || true
    rm -f /dev/hugepages/pvp*map_* "$work"/*.sock "$work/guest.in" "$work/sw.in" "$work/inj.in" 2>/dev/null || true
}
central="$work/central"
stop_central() {
    ovn_central_stop
    ip netns del pvpsg 2>/dev/null || true
}
trap 'stop_all; stop_central; rm -rf "$work"' EXIT INT TERM

start_guest() { # size switch
    mkfifo "$work/guest.in"
    # With --flows or IMIX, 1024-entry rings: the loop must hold every injected frame (with
    # the default 256 entries only about 512 frames, i.e. 512 flows, survive the injection).
    local q="" d="" mode="--forward-mode=io"
    if [ -n "$flows" ] || [ "$1" = imix ]; then q=",queue_size=$qsize"; d="--rxd=$qsize --txd=$qsize"; fi
    [ "$ring" = packed ] && q="$q,packed_vq=1"
    [ -n "$flowgen" ] && mode="--forward-mode=flowgen --flowgen-flows=$flowgen"
    # A load balancer's client and backend: each port answers what it gets (see the header).
    local peers="--eth-peer=0,02:00:00:00:00:02 --eth-peer=1,02:00:00:00:00:01" mac_a=02:00:00:00:00:01
    case "$2" in
    *-lb) mode="--forward-mode=5tswap --port-topology=loop --tx-ip=198.18.0.1,$lb_vip" ;;
    *-fip)
        mode="--forward-mode=flowgen --flowgen-flows=1"
        mac_a=00:01:02:03:04:00
        peers="--eth-peer=0,00:01:02:03:04:01 --eth-peer=1,00:00:00:00:f1:01" ;;
    esac
    stdbuf -o0 dpdk-testpmd -l 0,1 --main-lcore 0 -m 512 --no-pci --file-prefix=pvpguest \
        --single-file-segments \
        --vdev "net_virtio_user0,path=$work/a.sock,queues=1,server=1,mac=$mac_a$q" \
        --vdev "net_virtio_user1,path=$work/b.sock,queues=1,server=1,mac=02:00:00:00:00:02$q" \
        -- -i --nb-cores=1 --total-num-mbufs=32768 $mode $d \
        $peers $multiflow \
        <"$work/guest.in" >"$work/guest.log" 2>&1 &
    pids+=($!)
    exec 3>"$work/guest.in"
}

# virtio-user in server mode waits for the switch before testpmd reaches its prompt.
wait_guest() {
    for _ in $(seq 300); do grep -aq "testpmd> " "$work/guest.log" 2>/dev/null && return 0; sleep 0.1; done
    echo "guest did not start; see $work/guest.log" >&2; tail -20 "$work/guest.log" >&2; return 1
}

start_switch() {
    case "$1" in
    limit)
        mkfifo "$work/sw.in"
        stdbuf -o0 dpdk-testpmd -l 1,0 --main-lcore 1 -m 512 --no-pci --file-prefix=pvpsw \
            --single-file-segments \
            --vdev "net_vhost0,iface=$work/a.sock,client=1,queues=1" \
            --vdev "net_vhost1,iface=$work/b.sock,client=1,queues=1" \
            -- -i --nb-cores=1 --forward-mode=io --total-num-mbufs=32768 --record-core-cycles \
            <"$work/sw.in" >"$work/sw.log" 2>&1 &
        pids+=($!)
        exec 4>"$work/sw.in"
        echo "start" >&4
        ;;
    ovs) start_ovs br0 ;;
    ovs-sg) start_ovs br-int pvp ;;
    ovs-lb) start_ovs br-int lb ;;
    ovs-fip) start_ovs br-int fip ;;
    vswitchd-sg|vswitchd-lb|vswitchd-fip)
        local lsp=${1#vswitchd-}; [ "$lsp" = sg ] && lsp=pvp
        # shellcheck disable=SC2086 # vsargs: extra flags, split on purpose
        ip netns exec pvpsg "${VSWITCHD:-$bin/vswitchd}" \
            --vhost-user-client "a=$work/a.sock,iface_id=$lsp-a" \
            --vhost-user-client "b=$work/b.sock,iface_id=$lsp-b" \
            --uplink u=pvpsg0 --geneve "t=198.51.100.1,uplink=u" \
            --ovn-remote "unix:$central/sb.sock" --chassis hv-pvp \
            --pmd-cpus 0 --poll busy --control "$work/ctl.sock" $vsargs 2>"$work/vswitchd.log" &
        pids+=($!)
        ;;
    vswitchd|vswitchd-nocache|vswitchd-alt)
        local extra=()
        [ "$1" = vswitchd-nocache ] && extra+=(--flow-cache off)
        if [ -n "$flows" ]; then
            extra+=(--vhost-user-client "c=$work/c.sock"
                    --static-mac a=02:00:00:00:00:01 --static-mac b=02:00:00:00:00:02)
        fi
        for i in $(seq 0 $((aclrules - 1))); do
            local net="172.$((16 + i / 256)).$((i % 256)).0/24"
            extra+=(--acl "a:drop ip_src=$net" --acl "b:drop ip_src=$net")
        done
        local exe="${VSWITCHD:-$bin/vswitchd}"
        [ "$1" = vswitchd-alt ] && exe="$VSWITCHD_ALT/vswitchd"
        "$exe" --vhost-user-client "a=$work/a.sock" \
            --vhost-user-client "b=$work/b.sock" --pmd-cpus 0 --poll busy \
            --control "$work/ctl.sock" "${extra[@]}" $vsargs 2>"$work/vswitchd.log" &
        pids+=($!)
        ;;
    esac
}

# start_ovs BRIDGE [LSP]: OVS with DPDK, the guest's two sockets dpdkvhostuserclient ports
# vhu0 and vhu1 of BRIDGE. br0 gets the NORMAL action; br-int is OVN's (system-id hv-pvp,
# the ports' iface-ids LSP-a and LSP-b) and ovn-controller programs it.
start_ovs() {
    local br=$1 d="$work/ovs" lsp=${2:-pvp}
    ovs_dpdk "$d" "$br" pvpovs
    export OVN_RUNDIR=$d OVN_LOGDIR=$d
    local vsctl="ovs-vsctl --timeout=60 --db=unix:$d/db.sock"
    local i
    for i in 0 1; do
        local id=$lsp-a sock=a.sock; [ $i = 1 ] && { id=$lsp-b; sock=b.sock; }
        $vsctl add-port "$br" vhu$i -- set Interface vhu$i type=dpdkvhostuserclient \
            "options:vhost-server-path=$work/$sock" "external_ids:iface-id=$id"
    done
    if [ "$br" = br-int ]; then ovs_ovn_chassis "$vsctl" "$d" hv-pvp; fi
}

# sg_central: the OVN central of the -sg and -lb switches, the logical switch pvp with its
# security groups (see the header; members admit UDP from each other), pvplb with its load
# balancer, and namespace pvpsg with the veth vswitchd-sg's and vswitchd-lb's uplink is on.
lb_vip=198.18.0.100
sg_central() {
    ovn_central
    sg_tenant pvp pvp-a "02:00:00:00:00:01 198.18.0.1" pvp-b "02:00:00:00:00:02 198.18.0.2" udp
    lb_tenant pvplb lb-a "02:00:00:00:00:01 198.18.0.1" lb-b "02:00:00:00:00:02 198.18.0.2" "$lb_vip"
    # testpmd flowgen's addresses (see the header).
    fip_tenant hv-pvp fip-a "00:01:02:03:04:00 10.254.0.0" fip-b "02:00:00:00:00:02 198.18.1.2" \
        10.253.0.0 "00:01:02:03:04:01 10.255.255.254/14"
    sg_netns pvpsg
}

# Writes $work/flows-SIZE.pcap: $frames frames of SIZE bytes (with FCS) cycling through
# $flows IPv4/UDP flows; even flows a->b (02:..:01 -> 02:..:02), odd flows b->a.
make_pcap() {
    local size=$1 out="$work/flows-$1.pcap"
    # Debian's python3 (python3-scapy), not whatever python3 comes first on PATH.
    [ -f "$out" ] || /usr/bin/python3 - "$out" "$size" "$flows" "$frames" <<'PY'
import sys
from scapy.all import Ether, IP, UDP, Raw, wrpcap
out, size, flows, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
a, b = "02:00:00:00:00:01", "02:00:00:00:00:02"
pkts = []
for i in range(flows):
    src, dst = (a, b) if i % 2 == 0 else (b, a)
    p = (Ether(src=src, dst=dst) / IP(src=f"10.0.{i >> 8}.{i & 255}", dst="10.1.0.1")
         / UDP(sport=1024 + i, dport=5001))
    pkts.append(p / Raw(b"\x5a" * max(0, size - 4 - len(p))))
wrpcap(out, [pkts[k % flows] for k in range(frames)])
PY
}

inject() { # size: sends $work/flows-SIZE.pcap once through switch port c
    make_pcap "$1"
    mkfifo "$work/inj.in"
    stdbuf -o0 dpdk-testpmd -l 0,1 --main-lcore 0 -m 256 --no-pci --file-prefix=pvpinj \
        --single-file-segments \
        --vdev "net_pcap0,rx_pcap=$work/flows-$1.pcap" \
        --vdev "net_virtio_user2,path=$work/c.sock,queues=1,server=1,mac=02:00:00:00:00:03,queue_size=1024" \
        -- -i --nb-cores=1 --total-num-mbufs=16384 --forward-mode=io --txd=1024 --rxd=1024 \
        --no-flush-rx \
        <"$work/inj.in" >"$work/inj.log" 2>&1 &
    local inj=$!
    pids+=($inj)
    exec 5>"$work/inj.in"
    for _ in $(seq 300); do grep -aq "testpmd> " "$work/inj.log" 2>/dev/null && break; sleep 0.1; done
    for _ in $(seq 100); do
        echo "show port info 1" >&5; sleep 0.2
        grep -aq 'Link status: up' "$work/inj.log" && break
    done
    # The switch may still be setting the queue up when the link shows up; and a full
    # ring is retried for up to 100 ms per burst rather than dropped.
    sleep 1
    echo "set fwd io retry" >&5
    echo "set burst tx delay 100 retry 1000" >&5
    echo "start" >&5
    sleep 1
    echo "stop" >&5
    sleep 0.5
    echo "quit" >&5
    exec 5>&-
    for _ in $(seq 50); do kill -0 "$inj" 2>/dev/null || break; sleep 0.1; done
    kill "$inj" 2>/dev/null || true
    rm -f "$work/inj.in"
    local sent
    sent=$(grep -ao "TX-packets: *[0-9]*" "$work/inj.log" | tail -1 | awk '{print $2}')
    echo "injected ${sent:-?} of $frames frames ($flows flows)" >&2
    if [ "${sent:-0}" = 0 ]; then tail -30 "$work/inj.log" >&2; fi
}

# The IMIX loop: 7, 4 and 1 tx_first rounds of 64, 570 and 1518 B frames (txpkts leaves
# out the 4-byte CRC). Between rounds the guest stops; what the loop holds waits in its
# receive rings (flush_rx off keeps it there on the next start).
inject_imix() {
    echo "set flush_rx off" >&3
    local round
    for round in "60 7" "566 4" "1514 1"; do
        set -- $round
        echo "set txpkts $1" >&3
        echo "start tx_first $2" >&3
        sleep 0.5
        [ "$1" = 1514 ] || echo "stop" >&3
        sleep 0.2
    done
}

measure() { # switch size -> prints Mpps
    local sw=$1 size=$2
    start_guest "$size" "$sw"
    start_switch "$sw"
    wait_guest
    # Wait until both virtio-user ports report link up.
    for _ in $(seq 100); do
        echo "show port info all" >&3; sleep 0.2
        [ "$(grep -ac 'Link status: up' "$work/guest.log")" -ge 2 ] && break
        : > "$work/guest.log"
    done
    case "$sw" in
    *-sg) sg_ready pvp-a pvp-b ;;
    *-lb) sg_ready lb-a lb-b ;;
    *-fip) sg_ready fip-a fip-b ;;
    esac
    if [ -n "$flows" ]; then
        # The loop runs first (start flushes the guest's rx queues, so never again after
        # the injection); the injector then sends the file once through port c and quits.
        echo "start" >&3
        inject "$size"
    elif [ "$size" = imix ]; then
        inject_imix
    elif [ -n "$flowgen" ] || [[ "$sw" == *-fip ]]; then
        echo "set txpkts $((size - 4))" >&3
        echo "start" >&3
    else
        echo "set txpkts $((size - 4))" >&3
        echo "start tx_first 64" >&3
    fi
    sleep 2
    local ctl=""
    case "$sw" in
    vswitchd|vswitchd-nocache|vswitchd-sg|vswitchd-lb|vswitchd-fip) ctl="$bin/vswitchctl" ;;
    vswitchd-alt) ctl="$VSWITCHD_ALT/vswitchctl" ;;
    esac
    local c0="" c1=""
    [ -n "$ctl" ] && c0=$(pmd_counters "$ctl")
    local s0=""
    [ -n "$ctl" ] && [ -n "$stages" ] && s0=$(stage_counters "$ctl")
    case "$sw" in
    ovs|ovs-sg|ovs-lb|ovs-fip) ovs_appctl dpif-netdev/pmd-stats-clear >/dev/null 2>&1 || true ;;
    limit) echo "clear fwd stats all" >&4 ;;
    esac
    echo "clear port stats all" >&3
    sleep "$secs"
    : > "$work/guest.log"
    echo "show port stats all" >&3
    [ -n "$ctl" ] && c1=$(pmd_counters "$ctl")
    if [ -n "$s0" ]; then
        # Per-stage cycles per packet over the window, to stderr (and the JSON record).
        stage_line=$(/usr/bin/python3 -c "
import json
s0, s1 = json.loads('$s0'), json.loads('$(stage_counters "$ctl")')
p = max(1, s1['packets'] - s0['packets'])
print(json.dumps({k: round((s1[k] - s0[k]) / p, 1) for k in s1 if k != 'packets'}))")
        echo "    stages of $sw, $size B, cycles/packet: $stage_line" >&2
        echo "$stage_line" > "$work/stages.json"
    fi
    case "$sw" in
    ovs|ovs-sg|ovs-lb|ovs-fip) c0="0 0"; c1=$(ovs_appctl dpif-netdev/pmd-stats-show 2>/dev/null | awk '
            /packets received:/ { p += $3 } /processing cycles:/ { c += $3 }
            END { printf "%.0f %.0f\n", c, p }') || c1="" ;;
    limit)
        : > "$work/sw.log"; echo "show fwd stats all" >&4; sleep 0.3
        c0="0 0"
        c1=$(grep -ao "total cycles=[0-9]* / total io packets=[0-9]*" "$work/sw.log" | tail -1 |
             sed 's/total cycles=\([0-9]*\) \/ total io packets=\([0-9]*\)/\1 \2/') ;;
    esac
    sleep 0.5
    local rx drops
    rx=$(grep -ao "RX-packets: *[0-9]*" "$work/guest.log" | awk '{s+=$2} END {print s+0}')
    drops=$(grep -aoE "(RX-missed|RX-errors|TX-errors): *[0-9]*" "$work/guest.log" |
            awk '{s+=$2} END {print s+0}')
    if [ "$size" = imix ]; then
        # The mix the loop carried: the guest's mean received frame (without CRC), 349.8 B
        # for 7:4:1 of 60/566/1514.
        grep -ao "RX-bytes: *[0-9]*" "$work/guest.log" | awk -v p="$rx" '{b+=$2}
            END {printf "    IMIX through %s: mean frame %.1f B (7:4:1 is 349.8)\n", "'"$sw"'", b / (p > 0 ? p : 1)}' >&2
    fi
    if [ -n "$ctl" ] && [ -n "${PVP_PMD_STATS:-}" ]; then
        "$ctl" --socket "$work/ctl.sock" pmd-stats >&2 || true
        echo "cached flows: $("$ctl" --socket "$work/ctl.sock" flows | grep -c current || true)" >&2
    fi
    echo "stop" >&3
    stop_all
    python3 -c "
c0, c1 = '$c0'.split(), '$c1'.split()
cpp = (int(c1[0]) - int(c0[0])) / max(1, int(c1[1]) - int(c0[1])) if len(c0) == 2 and len(c1) == 2 else float('nan')
print(f'{$rx / $secs / 1e6:.3f}\t{cpp:.1f}\t$drops')"
}

ovs_appctl() { ovs-appctl -t "$(ls "$work"/ovs/ovs-vswitchd*.ctl 2>/dev/null | head -1)" "$@"; }

# json_line ROUND SWITCH SIZE MPPS CPP DROPS: one raw record for --json.
json_line() {
    /usr/bin/python3 - "$@" "$flowgen" "$flows" "$aclrules" "$ring" "$work/stages.json" "$sg" >>"$json" <<'PY'
import json, math, os, sys
r, sw, size, mpps, cpp, drops, flowgen, flows, acl, ring, stages, sg = sys.argv[1:13]
cpp = float(cpp)
params = {"frame_size": int(size) if size.isdigit() else size, "ring": ring}
# IMIX: 7:4:1 of 64/570/1518 B, a mean frame of 353.8 B.
mean = (7 * 64 + 4 * 570 + 1518) / 12 if size == "imix" else int(size)
if flowgen:
    scenario = "flows"; params["flows"] = int(flowgen)
elif flows:
    scenario = "acl"; params["flows"] = int(flows); params["acl_rules"] = int(acl)
    params["flow_cache"] = "off" if sw == "vswitchd-nocache" else "on"
    sw = "vswitchd" if sw == "vswitchd-nocache" else sw
elif sw.endswith("-lb") or sw.endswith("-fip"):
    # OVN's pipeline with a load balancer (DNAT one way, un-DNAT the other) and security
    # groups, or a floating IP on a gateway router: bench-pvp.sh's header.
    scenario = sw.rsplit("-", 1)[1]; params["flows"] = 1
    sw = sw.rsplit("-", 1)[0]
elif sg:
    # OVN's pipeline with two security groups (conntrack both ways), bench-pvp.sh's
    # header; the plain vswitchd of the same run is the reference "vswitchd-l2".
    scenario = "sg"; params["flows"] = 1
    sw = sw[:-3] if sw.endswith("-sg") else sw + "-l2"
else:
    scenario = "pvp"; params["flows"] = 1
metrics = {"mpps": float(mpps), "gbps": float(mpps) * mean * 8 / 1e3,
           "drops": int(drops), "cycles_per_packet": None if math.isnan(cpp) else cpp}
if os.path.exists(stages):
    metrics.update({f"stage_{k}": v for k, v in json.load(open(stages)).items()})
    os.remove(stages)
print(json.dumps({"scenario": scenario, "switch": sw, "round": int(r), "params": params,
                  "metrics": metrics}))
PY
}

stage_counters() { # vswitchctl -> prints {"packets": N, STAGE: cycles, ...} over the PMDs
    "$1" --socket "$work/ctl.sock" --json pmd-stats 2>/dev/null | /usr/bin/python3 -c '
import json, sys
rows = json.load(sys.stdin)
out = {"packets": sum(r["packets"] for r in rows)}
for r in rows:
    for k, v in r.get("stage_cycles", {}).items():
        out[k] = out.get(k, 0) + v
print(json.dumps(out))' || true
}

pmd_counters() { # vswitchctl -> prints "busy_cycles packets" summed over the PMDs
    "$1" --socket "$work/ctl.sock" --json pmd-stats 2>/dev/null | /usr/bin/python3 -c '
import json, sys
rows = json.load(sys.stdin)
print(sum(r["busy_cycles"] for r in rows), sum(r["packets"] for r in rows))' || true
}

[ -z "$sg" ] || sg_central
printf "round\tswitch\tsize\tmpps\tcycles_per_packet\tdrops\n" > "$results"
for r in $(seq "$rounds"); do
    for size in $sizes; do
        for sw in $only; do
            m=$(measure "$sw" "$size")
            printf "%s\t%s\t%s\t%s\n" "$r" "$sw" "$size" "$m" | tee -a "$results"
            # shellcheck disable=SC2086 # m is "mpps cpp drops"
            [ -z "$json" ] || json_line "$r" "$sw" "$size" $m
        done
    done
done

python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med, cpp = {}, {}
for r in rows:
    size = int(r["size"]) if r["size"].isdigit() else r["size"]
    med.setdefault((r["switch"], size), []).append(float(r["mpps"]))
    cpp.setdefault((r["switch"], size), []).append(float(r["cycles_per_packet"]))
# IMIX (7:4:1 of 64/570/1518 B) after the fixed sizes, at its mean frame size.
mean = {"imix": (7 * 64 + 4 * 570 + 1518) / 12}
sizes = sorted({s for _, s in med}, key=lambda s: (isinstance(s, str), s if isinstance(s, int) else 0))
order = ("limit", "ovs", "vswitchd-alt", "vswitchd", "vswitchd-nocache", "ovs-sg", "vswitchd-sg",
         "ovs-lb", "vswitchd-lb", "ovs-fip", "vswitchd-fip")
switches = [s for s in order if any(k[0] == s for k in med)]
print("\nmedian over rounds (Mpps / Gbit/s of frames, guest RX):")
print("size  " + "".join(f"{s:>22}" for s in switches) + "   vswitchd/ovs  vswitchd/limit  cache on/off")
for size in sizes:
    line = f"{size:<6}"
    m = {}
    for s in switches:
        v = statistics.median(med.get((s, size), [0.0]))
        m[s] = v
        line += f"{v:>10.3f} Mpps {v * mean.get(size, size) * 8 / 1e3:>6.2f} G"
    ro = m.get("vswitchd", 0) / m["ovs"] if m.get("ovs") else float("nan")
    rl = m.get("vswitchd", 0) / m["limit"] if m.get("limit") else float("nan")
    rc = m.get("vswitchd", 0) / m["vswitchd-nocache"] if m.get("vswitchd-nocache") else float("nan")
    print(line + f"   {ro:>12.2f}  {rl:>14.2f}  {rc:>12.2f}")
if "vswitchd-sg" in switches:
    print("\nsecurity groups (OVN pipeline, conntrack): vswitchd-sg / ovs-sg (target >= 2), vswitchd-sg / vswitchd (target >= 0.7)")
    for size in sizes:
        v = statistics.median(med.get(("vswitchd-sg", size), [0.0]))
        o = statistics.median(med.get(("ovs-sg", size), [float("nan")]))
        p = statistics.median(med.get(("vswitchd", size), [float("nan")]))
        print(f"{size:<6}{v / o if o else float('nan'):>12.2f}{v / p if p else float('nan'):>12.2f}")
if "vswitchd-lb" in switches:
    print("\nload balancer (OVN pipeline, DNAT and un-DNAT, conntrack): vswitchd-lb / ovs-lb (target >= 2), vswitchd-lb / vswitchd-sg")
    for size in sizes:
        v = statistics.median(med.get(("vswitchd-lb", size), [0.0]))
        o = statistics.median(med.get(("ovs-lb", size), [float("nan")]))
        g = statistics.median(med.get(("vswitchd-sg", size), [float("nan")]))
        print(f"{size:<6}{v / o if o else float('nan'):>12.2f}{v / g if g else float('nan'):>12.2f}")
if "vswitchd-fip" in switches:
    print("\nfloating IP (OVN gateway router, DNAT'd, conntrack; frames generated, not looped): vswitchd-fip / ovs-fip (target >= 2)")
    for size in sizes:
        v = statistics.median(med.get(("vswitchd-fip", size), [0.0]))
        o = statistics.median(med.get(("ovs-fip", size), [float("nan")]))
        print(f"{size:<6}{v / o if o else float('nan'):>12.2f}")
mine = switches
if mine:
    print("\nmedian switch cycles per packet over the measured window (vswitchd pmd-stats busy, OVS processing, testpmd record-core-cycles):")
    print("size  " + "".join(f"{s:>18}" for s in mine) + ("   vswitchd/vswitchd-alt Mpps" if "vswitchd-alt" in mine else ""))
    for size in sizes:
        line = f"{size:<6}" + "".join(f"{statistics.median(cpp.get((s, size), [float('nan')])):>18.1f}" for s in mine)
        if "vswitchd-alt" in mine and med.get(("vswitchd-alt", size)):
            line += f"   {statistics.median(med[('vswitchd', size)]) / statistics.median(med[('vswitchd-alt', size)]):>26.3f}"
        print(line)
PY
