#!/usr/bin/env bash
# The Geneve overlay between two hosts, vswitchd against Open vSwitch in the same
# topology, interleaved in one run. As root.
#
# Two "hosts" are network namespaces (bo0, bo1) joined by a veth pair (bou0/bou1, MTU
# 1600, underlay 198.51.100.1 and .2/24); on each, a switch with an AF_XDP uplink on its
# veth end and a Geneve endpoint (VNI 5001) toward the other host.
#
#   tcp     iperf3 from a "VM" on host 0 to one on host 1 (10.50.0.1 -> 10.50.0.2), with
#           1 and 4 streams (--streams). The VM is a tap: vswitchd's tap port (TSO and
#           checksum offload on, MTU set to 1550 by vswitchd), or OVS's internal port
#           (MTU 1550 by hand; OVS 3.1 keeps its offloads off). Switches:
#             vswitchd   two vswitchd, --poll adaptive, PMD of host k on CPU k
#             ovs        two ovs-vswitchd (userspace "netdev" datapath, no DPDK), br-phy
#                        with the uplink and the underlay address, br-int with the Geneve
#                        port and the internal port; pmd-maxsleep=50 (OVS 3.1's own
#                        adaptive polling) and PMD of host k on CPU k
#   frames  64-byte frames from a DPDK testpmd guest on host 0 (txonly, virtio-user) to one
#           on host 1 (rxonly), both behind vhost-user ports; the rate the receiving guest
#           counts over SECS seconds. Switches: two vswitchd as above (vhost-user-client
#           ports), or two OVS with DPDK (dpdkvhostuserclient ports; the uplink is OVS's
#           afxdp netdev). Host 0's switch and host 1's guest share CPU 0, host 1's switch
#           and host 0's guest CPU 1: four busy pollers on two cores, the same for both.
#           Before measuring, the receiving guest sends a burst (tx_first) until host 0's
#           switch has learned its MAC, so neither switch floods.
# Each switch runs with its uplinks in both AF_XDP modes the veth offers (--modes): native
# (the veth driver's XDP) and generic (skb). Results are medians over ROUNDS, and the
# ratios compare vswitchd's best mode with OVS's best mode. On two cores the kernel's TCP
# stacks, the veth and the switches share the CPUs: the numbers measure the machine with
# each switch in it, and only their ratio within one run says something about the switches.
#
#   scripts/bench-overlay.sh [--rounds N] [--secs S] [--parts "tcp frames"]
#                            [--streams "1 4"] [--modes "native generic"] [--only "vswitchd ovs"]
#   (default 3 rounds of 8 s: about 8 minutes)
#   --poll MODE vswitchd's --poll (default adaptive; OVS sleeps up to 50 us when idle)
#   --topologies "geneve plain ovn"   for tcp (default geneve): plain puts the VM and the
#               uplink in one L2 domain (vswitchd: no --geneve, no vni; OVS: the internal port
#               on br-phy, no br-int), so frames cross the veth unencapsulated; ovn drives both
#               switches from OVN (an OVN central in the work directory: NB/SB ovsdb-server
#               and ovn-northd; logical switch sw0 with one port per VM, made by ovn-nbctl):
#               vswitchd chassis <-> vswitchd chassis (--ovn-remote, iface_id=), or OVS +
#               ovn-controller <-> OVS + ovn-controller; VM MTU 1542 (58 bytes of Geneve
#               with OVN's option on the 1600-byte underlay)
#   --latency "0 10 50 90"   after each tcp measurement of the first --streams value, ICMP
#               round trips between the VMs (ping -i 0.002, 500 per level) while iperf3 runs
#               paced (-b) at each percentage of the Gbit/s just measured (0: no iperf3)
#   --json FILE also append one JSON object per measurement to FILE: scenario "tcp"
#               (params topology, streams, mode; metrics gbps, retransmits, cpu_s_per_gb =
#               CPU seconds, user + system, both switch processes spent during the transfer
#               per 10^9 bytes received), "latency" (params topology, load_pct; metrics
#               min_us, p50_us, p99_us, max_us, offered_gbps), "frames" (metrics mpps)
#   --verbose   after each measurement, the switches' counters (vswitchctl stats, tunnels and
#               pmd-stats; ovs-appctl dpif-netdev/pmd-stats-show) on stderr
#   VSWITCHD=/path/to/vswitchd   another build as vswitchd
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3; secs=8; parts="tcp frames"; streams="1 4"; modes="native generic"; only="vswitchd ovs"
verbose=""; poll=adaptive; topologies="geneve"; latency=""; json=""; topo=geneve
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --parts) parts=$2; shift 2 ;;
        --streams) streams=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --verbose) verbose=1; shift ;;
        --poll) poll=$2; shift 2 ;;
        --topologies) topologies=$2; shift 2 ;;
        --latency) latency=$2; shift 2 ;;
        --json) json=$(realpath -m "$2"); touch "$json"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-overlay.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-overlay.sh: run as root" >&2; exit 2; }
scripts/setup.sh --bench >/dev/null
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
bin="${CARGO_TARGET_DIR:-target}/release"
if [ -z "${VSWITCHD:-}" ]; then
    cargo build --release -q -p vswitch --bins
    VSWITCHD="$bin/vswitchd"
fi
VSWITCHCTL="$(dirname "$VSWITCHD")/vswitchctl"

# frames: two guests of 256 MiB and two OVS with DPDK of 512 MiB each, in 2 MiB pages.
if [[ " $parts " == *" frames "* ]] && [ "$(cat /proc/sys/vm/nr_hugepages)" -lt 2048 ]; then
    echo 2048 > /proc/sys/vm/nr_hugepages
fi

work=$(mktemp -d /tmp/bench-overlay.XXXXXX)
results="$work/results.tsv"
pids=()
stop_all() {
    exec 5>&- 6>&- || true  # (2>/dev/null on exec would silence the script for good)
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    local f
    for f in "$work"/ovs*/*.pid; do
        [ -f "$f" ] || continue
        local p; p=$(cat "$f")
        kill "$p" 2>/dev/null || true
        # Daemonized (not our child): gone, or a zombie nobody reaps.
        for _ in $(seq 100); do
            [ -d "/proc/$p" ] && ! grep -q ') Z ' "/proc/$p/stat" 2>/dev/null || break
            sleep 0.05
        done
    done
    rm -rf "$work"/ovs* "$work"/*.in "$work"/*.sock /var/run/dpdk/bo* 2>/dev/null || true
    rm -f /dev/hugepages/bo*map_* 2>/dev/null || true
    for k in 0 1; do ip netns del "bo$k" 2>/dev/null || true; done
}
trap 'stop_all; rm -rf "$work"' EXIT INT TERM

# hosts SWITCH: the two namespaces and the veth between them; the underlay address goes
# on the veth for vswitchd (the kernel keeps it), on br-phy for OVS (added there).
hosts() {
    for k in 0 1; do ip netns del "bo$k" 2>/dev/null || true; ip netns add "bo$k"; done
    ip link add bou0 type veth peer name bou1
    for k in 0 1; do
        ip link set "bou$k" netns "bo$k"
        ip netns exec "bo$k" ip link set lo up
        ip netns exec "bo$k" sysctl -qw "net.ipv6.conf.all.disable_ipv6=1"
        ip netns exec "bo$k" ip link set "bou$k" mtu 1600 up
        if [ "$1" = vswitchd ]; then
            ip netns exec "bo$k" ip addr add "198.51.100.$((k + 1))/24" dev "bou$k"
        fi
    done
}

# vswitchd_host K MODE PORT-ARGS...
vswitchd_host() {
    local k=$1 mode=$2; shift 2
    local tep=(--geneve "t=198.51.100.$((k + 1)),uplink=u,remote=198.51.100.$((2 - k))")
    [ "$topo" = plain ] && tep=()
    [ "$topo" = ovn ] && tep=(--geneve "t=198.51.100.$((k + 1)),uplink=u"
        --ovn-remote "unix:$work/ovs-central/sb.sock" --chassis "hv$k")
    ip netns exec "bo$k" "$VSWITCHD" --uplink "u=bou$k,mode=$mode" "${tep[@]}" \
        --poll "$poll" --pmd-cpus "$k" --control "$work/ctl$k.sock" "$@" \
        2>"$work/vswitchd$k.log" &
    pids+=($!)
    for _ in $(seq 100); do [ -S "$work/ctl$k.sock" ] && return 0; sleep 0.1; done
    echo "vswitchd on host $k did not start:" >&2; tail -5 "$work/vswitchd$k.log" >&2; return 1
}

vsctl() { local k=$1; shift; OVS_RUNDIR="$work/ovs$k" ovs-vsctl --timeout=30 --db="unix:$work/ovs$k/db.sock" "$@"; }
# The control socket is named after the program: ovs-vswitchd.PID.ctl or ovs-vswitchd-dpdk.PID.ctl.
appctl() { local k=$1; shift; local d="$work/ovs$k"; ovs-appctl -t "$(ls "$d"/ovs-vswitchd*.ctl)" "$@"; }

# ovs_host K MODE DPDK(0|1): the userspace tunnelling setup of OVS's documentation.
ovs_host() {
    local k=$1 mode=$2 dpdk=$3 d="$work/ovs$1" ns="bo$1"
    mkdir -p "$d"
    export OVS_RUNDIR=$d OVS_LOGDIR=$d OVS_DBDIR=$d
    ovsdb-tool create "$d/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ip netns exec "$ns" ovsdb-server "$d/conf.db" --remote="punix:$d/db.sock" \
        --pidfile="$d/ovsdb-server.pid" --detach --log-file="$d/ovsdb.log" 2>/dev/null
    vsctl "$k" --no-wait init
    vsctl "$k" --no-wait set Open_vSwitch . other_config:pmd-cpu-mask="0x$((1 << k))" \
        other_config:pmd-maxsleep=50
    local exe=ovs-vswitchd
    if [ "$dpdk" = 1 ]; then
        exe=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
        vsctl "$k" --no-wait set Open_vSwitch . other_config:dpdk-init=true \
            other_config:dpdk-lcore-mask="0x$((1 << k))" other_config:dpdk-socket-mem=512 \
            other_config:dpdk-socket-limit=512 \
            "other_config:dpdk-extra=--file-prefix=boovs$k --no-pci --single-file-segments"
    fi
    if ! ip netns exec "$ns" "$exe" "unix:$d/db.sock" --pidfile="$d/ovs-vswitchd.pid" --detach \
        --log-file="$d/ovs-vswitchd.log" 2>/dev/null; then
        echo "bench-overlay.sh: $exe on host $k did not start:" >&2
        grep -E 'ERR|EMER' "$d/ovs-vswitchd.log" | tail -5 >&2
        return 1
    fi
    # br-phy gets a MAC of its own: with the veth's, the namespace's kernel would take the
    # Geneve frames too and answer them with ICMP port unreachable.
    vsctl "$k" add-br br-phy -- set bridge br-phy datapath_type=netdev \
        "other_config:hwaddr=02:00:00:00:0f:0$k"
    vsctl "$k" add-port br-phy "bou$k" -- set interface "bou$k" type=afxdp "options:xdp-mode=$mode"
    if [ "$topo" = plain ]; then
        ip netns exec "$ns" ip link set br-phy mtu 1600 up
        return 0
    fi
    ip netns exec "$ns" ip addr add "198.51.100.$((k + 1))/24" dev br-phy
    ip netns exec "$ns" ip link set br-phy mtu 1600 up
    vsctl "$k" add-br br-int -- set bridge br-int datapath_type=netdev
    if [ "$topo" = ovn ]; then
        # ovn-controller makes the tunnels; br-int is its integration bridge.
        vsctl "$k" set open . "external_ids:system-id=hv$k" \
            "external_ids:ovn-remote=unix:$work/ovs-central/sb.sock" \
            external_ids:ovn-encap-type=geneve "external_ids:ovn-encap-ip=198.51.100.$((k + 1))"
        OVN_RUNDIR=$d OVN_LOGDIR=$d ip netns exec "$ns" ovn-controller "unix:$d/db.sock" \
            --pidfile="$d/ovn-controller.pid" --log-file="$d/ovn-controller.log" --detach
        return 0
    fi
    vsctl "$k" add-port br-int gnv0 -- set interface gnv0 type=geneve \
        "options:remote_ip=198.51.100.$((2 - k))" options:key=5001
}

# ovn_central: NB and SB ovsdb-server and ovn-northd in $work/ovs-central (stop_all stops
# them with the OVS daemons), logical switch sw0 with ports vm0 and vm1 (the VMs' MACs
# 02:00:00:00:0a:0(k+1) and addresses 10.50.0.(k+1)).
ovn_central() {
    local d="$work/ovs-central"
    mkdir -p "$d"
    local db
    for db in nb sb; do
        ovsdb-tool create "$d/$db.db" "/usr/share/ovn/ovn-$db.ovsschema"
        ovsdb-server "$d/$db.db" --remote="punix:$d/$db.sock" --pidfile="$d/$db.pid" \
            --log-file="$d/$db.log" --unixctl="$d/$db.ctl" --detach 2>/dev/null
    done
    OVN_RUNDIR=$d OVN_LOGDIR=$d ovn-northd --ovnnb-db="unix:$d/nb.sock" --ovnsb-db="unix:$d/sb.sock" \
        --pidfile="$d/northd.pid" --log-file="$d/northd.log" --detach 2>/dev/null
    nbctl ls-add sw0
    for k in 0 1; do
        nbctl lsp-add sw0 "vm$k" -- lsp-set-addresses "vm$k" "02:00:00:00:0a:0$((k + 1)) 10.50.0.$((k + 1))"
    done
}
nbctl() { ovn-nbctl --timeout=30 --db="unix:$work/ovs-central/nb.sock" "$@"; }

# counters: with --verbose, each switch's counters on stderr.
counters() {
    [ -n "$verbose" ] || return 0
    local k
    for k in 0 1; do
        echo "--- host $k" >&2
        if [ -S "$work/ctl$k.sock" ]; then
            for c in show stats tunnels pmd-stats; do
                "$VSWITCHCTL" --socket "$work/ctl$k.sock" "$c" >&2 || true
            done
        elif [ -f "$work/ovs$k/ovs-vswitchd.pid" ]; then
            appctl "$k" dpif-netdev/pmd-stats-show >&2 || true
            vsctl "$k" --columns=name,statistics list interface >&2 || true
        fi
    done
}

# measure_tcp SWITCH MODE STREAMS: writes Gbit/s (iperf3's receiver) and retransmits to
# $work/value.
measure_tcp() {
    local sw=$1 mode=$2 n=$3
    hosts "$sw"
    [ "$topo" = ovn ] && ovn_central
    for k in 0 1; do
        local mac="02:00:00:00:0a:0$((k + 1))"
        if [ "$sw" = vswitchd ]; then
            case $topo in
                plain) vswitchd_host "$k" "$mode" --tap vm=bovm ;;
                ovn) vswitchd_host "$k" "$mode" --tap "vm=bovm,iface_id=vm$k"
                     ip netns exec "bo$k" ip link set bovm address "$mac" ;;
                *) vswitchd_host "$k" "$mode" --tap vm=bovm,vni=5001 ;;
            esac
        else
            ovs_host "$k" "$mode" 0
            local br=br-int mtu=1550; [ "$topo" = plain ] && br=br-phy
            if [ "$topo" = ovn ]; then
                mtu=1542
                vsctl "$k" add-port br-int bovm -- set interface bovm type=internal \
                    "external_ids:iface-id=vm$k" "mac=\"$mac\""
            else
                vsctl "$k" add-port "$br" bovm -- set interface bovm type=internal
            fi
            ip netns exec "bo$k" ip link set bovm mtu "$mtu" up
        fi
        ip netns exec "bo$k" ip link set bovm up
        ip netns exec "bo$k" ip addr add "10.50.0.$((k + 1))/24" dev bovm
    done
    [ "$topo" = ovn ] && nbctl --wait=hv sync
    local ok=""
    for _ in $(seq 30); do
        ip netns exec bo0 ping -c 1 -W 1 10.50.0.2 >/dev/null 2>&1 && { ok=1; break; }
    done
    [ -n "$ok" ] || { echo "bench-overlay.sh: no ping across $sw's overlay" >&2; stop_all; echo "0 0" >"$work/value"; return 0; }
    ip netns exec bo1 iperf3 -s -1 -B 10.50.0.2 >/dev/null 2>&1 &
    local srv=$!
    for _ in $(seq 50); do ip netns exec bo1 ss -ltn | grep -q ':5201 ' && break; sleep 0.1; done
    local t0 t1
    t0=$(switch_cpu_ticks "$sw")
    ip netns exec bo0 iperf3 -c 10.50.0.2 -t "$secs" -O 1 -P "$n" -J >"$work/iperf.json" 2>&1 || true
    t1=$(switch_cpu_ticks "$sw")
    wait "$srv" 2>/dev/null || true
    /usr/bin/python3 - "$work/iperf.json" "$t0" "$t1" "$(getconf CLK_TCK)" >"$work/value" <<'PY'
import json, sys
t0, t1, hz = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    e = json.load(open(sys.argv[1]))["end"]
    gb = e["sum_received"]["bytes"] / 1e9
    cpu = f'{(t1 - t0) / hz / gb:.3f}' if gb > 0 else "nan"
    print(f'{e["sum_received"]["bits_per_second"] / 1e9:.3f} {e["sum_sent"].get("retransmits", 0)} {cpu}')
except Exception:
    print("0 0 nan")
PY
    if [ -n "$latency" ] && [ "$n" = "${streams%% *}" ]; then
        local g; read -r g _ <"$work/value"
        : >"$work/latency"
        for pct in $latency; do measure_latency "$g" "$pct" >>"$work/latency"; done
    fi
    counters
    stop_all
}

# switch_cpu_ticks SWITCH: user + system clock ticks of the switch processes of both hosts.
switch_cpu_ticks() {
    local p ps=()
    if [ "$1" = vswitchd ]; then ps=("${pids[@]}")
    else for p in "$work"/ovs[01]/ovs-vswitchd.pid; do [ -f "$p" ] && ps+=("$(cat "$p")"); done; fi
    for p in "${ps[@]}"; do cat "/proc/$p/stat" 2>/dev/null || true; done |
        awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}

# measure_latency GBPS PCT: prints "PCT OFFERED_GBPS MIN P50 P99 MAX" (µs) of 500 pings from
# host 0's VM to host 1's while iperf3 runs paced at PCT % of GBPS (none at 0).
measure_latency() {
    local g=$1 pct=$2 rate client="" srv=""
    rate=$(awk -v g="$g" -v p="$pct" 'BEGIN { printf "%.0f", g * p / 100 * 1e9 }')
    if [ "$pct" != 0 ] && [ "$rate" -gt 0 ]; then
        ip netns exec bo1 iperf3 -s -1 -B 10.50.0.2 >/dev/null 2>&1 &
        srv=$!
        for _ in $(seq 50); do ip netns exec bo1 ss -ltn | grep -q ':5201 ' && break; sleep 0.1; done
        ip netns exec bo0 iperf3 -c 10.50.0.2 -t 30 -b "$rate" >/dev/null 2>&1 &
        client=$!
        sleep 1.5
    fi
    ip netns exec bo0 ping -n -i 0.002 -c 500 -W 1 10.50.0.2 >"$work/ping.out" 2>&1 || true
    if [ -n "$client" ]; then kill "$client" 2>/dev/null || true; wait "$client" 2>/dev/null || true; fi
    if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi
    /usr/bin/python3 - "$work/ping.out" "$pct" "$rate" <<'PY'
import re, sys
t = sorted(float(x) * 1000 for x in re.findall(r"time=([0-9.]+) ms", open(sys.argv[1]).read()))
pct, rate = sys.argv[2], float(sys.argv[3]) / 1e9 if sys.argv[2] != "0" else 0.0
if t:
    q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
    print(pct, f"{rate:.3f}", f"{t[0]:.1f}", f"{q(0.5):.1f}", f"{q(0.99):.1f}", f"{t[-1]:.1f}")
else:
    print(pct, f"{rate:.3f}", "nan nan nan nan")
PY
}

# testpmd NAME FD CPU ARGS...: an interactive testpmd guest reading commands from a fifo,
# its forwarding core on CPU.
testpmd() {
    local name=$1 fd=$2 cpu=$3; shift 3
    mkfifo "$work/$name.in"
    stdbuf -o0 -e0 dpdk-testpmd --lcores "0@$((1 - cpu)),1@$cpu" -m 256 --no-pci \
        --file-prefix="bo$name" --single-file-segments "$@" \
        <"$work/$name.in" >"$work/$name.out" 2>&1 &
    pids+=($!)
    eval "exec $fd>\"$work/$name.in\""
}

# learned K MAC: host K's switch has MAC in its forwarding table.
learned() {
    if [ -S "$work/ctl$1.sock" ]; then
        "$VSWITCHCTL" --socket "$work/ctl$1.sock" fdb 2>/dev/null | grep -qi "$2"
    else
        appctl "$1" fdb/show br-int 2>/dev/null | grep -qi "$2"
    fi
}

# measure_frames SWITCH MODE: writes the receiving guest's Mpps to $work/value.
measure_frames() {
    local sw=$1 mode=$2 ga=02:00:00:00:00:0a gb=02:00:00:00:00:0b
    rm -f "$work"/*.in "$work"/*.out
    hosts "$sw"
    # Host k's guest forwards on CPU 1-k, host k's switch polls on CPU k.
    # 1024-entry rings: the guests share their cores with a switch each.
    testpmd ga 5 1 --vdev "net_virtio_user0,path=$work/a.sock,queues=1,server=1,mac=$ga,queue_size=1024" \
        -- -i --nb-cores=1 --total-num-mbufs=8192 --rxd=1024 --txd=1024 --forward-mode=txonly --txpkts=60 \
        --eth-peer=0,$gb
    testpmd gb 6 0 --vdev "net_virtio_user0,path=$work/b.sock,queues=1,server=1,mac=$gb,queue_size=1024" \
        -- -i --nb-cores=1 --total-num-mbufs=8192 --rxd=1024 --txd=1024 --forward-mode=rxonly --txpkts=60 \
        --eth-peer=0,$ga
    local k g
    for k in 0 1; do
        g=$([ "$k" = 0 ] && echo a || echo b)
        if [ "$sw" = vswitchd ]; then
            vswitchd_host "$k" "$mode" --vhost-user-client "vm=$work/$g.sock,vni=5001"
        else
            ovs_host "$k" "$mode" 1
            vsctl "$k" add-port br-int vm -- set interface vm type=dpdkvhostuserclient \
                "options:vhost-server-path=$work/$g.sock"
        fi
    done
    for name in ga gb; do
        for _ in $(seq 200); do grep -aq "Link status: up" "$work/$name.out" 2>/dev/null && break
            echo "show port info 0" >&"$([ $name = ga ] && echo 5 || echo 6)"; sleep 0.2; done
    done
    # The receiver's bursts teach host 0's switch where gb lives (OVS resolves the other
    # endpoint's MAC with ARP first, so the first bursts may be lost).
    for _ in $(seq 40); do
        echo "start tx_first 1" >&6; sleep 0.25; echo "stop" >&6
        learned 0 "$gb" && break
    done
    learned 0 "$gb" || echo "bench-overlay.sh: $sw on host 0 did not learn $gb" >&2
    echo "start" >&6
    echo "start" >&5
    sleep 2
    echo "show port stats 0" >&6
    sleep "$secs"
    echo "show port stats 0" >&6
    sleep 0.5
    local pps
    pps=$(grep -ao 'Rx-pps: *[0-9]*' "$work/gb.out" | tail -1 | awk '{print $2}')
    counters
    stop_all
    awk -v p="${pps:-0}" 'BEGIN { printf "%.3f\n", p / 1e6 }' >"$work/value"
}

# json ...: with --json, one raw record.
json() { [ -z "$json" ] || printf '%s\n' "$*" | sed 's/:nan\([,}]\)/:null\1/g' >>"$json"; }

printf "round\tpart\tswitch\tmode\tstreams\tvalue\tretransmits\tcpu_s_per_gb\n" > "$results"
for r in $(seq "$rounds"); do
    for part in $parts; do
        for mode in $modes; do
            for sw in $only; do
                if [ "$part" = tcp ]; then
                    for topo in $topologies; do
                    for n in $streams; do
                        rm -f "$work/latency"
                        measure_tcp "$sw" "$mode" "$n"
                        read -r g re cpu <"$work/value"
                        # The TSV keeps its shape: a plain-topology row says so in its part.
                        part_name=tcp; [ "$topo" = geneve ] || part_name="tcp-$topo"
                        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$part_name" "$sw" "$mode" "$n" "$g" "$re" "$cpu" | tee -a "$results"
                        json "{\"scenario\":\"tcp\",\"switch\":\"$sw\",\"round\":$r,\"params\":{\"topology\":\"$topo\",\"streams\":$n,\"mode\":\"$mode\"},\"metrics\":{\"gbps\":$g,\"retransmits\":$re,\"cpu_s_per_gb\":$cpu}}"
                        if [ -f "$work/latency" ]; then
                            while read -r pct off mn p50 p99 mx; do
                                echo "  latency $sw $topo load ${pct}% (${off} Gbit/s): min $mn p50 $p50 p99 $p99 max $mx us"
                                json "{\"scenario\":\"latency\",\"switch\":\"$sw\",\"round\":$r,\"params\":{\"topology\":\"$topo\",\"load_pct\":$pct,\"mode\":\"$mode\"},\"metrics\":{\"offered_gbps\":$off,\"min_us\":$mn,\"p50_us\":$p50,\"p99_us\":$p99,\"max_us\":$mx}}"
                            done <"$work/latency"
                        fi
                    done
                    done
                else
                    measure_frames "$sw" "$mode"
                    m=$(cat "$work/value")
                    printf "%s\tframes\t%s\t%s\t-\t%s\t-\t-\n" "$r" "$sw" "$mode" "$m" | tee -a "$results"
                    json "{\"scenario\":\"frames\",\"switch\":\"$sw\",\"round\":$r,\"params\":{\"mode\":\"$mode\",\"frame_size\":64},\"metrics\":{\"mpps\":$m}}"
                fi
            done
        done
    done
done

/usr/bin/python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = {}
for r in rows:
    med.setdefault((r["part"], r["streams"], r["switch"], r["mode"]), []).append(float(r["value"]))
med = {k: statistics.median(v) for k, v in med.items()}
for part, unit, target in (("tcp", "Gbit/s", 3.0), ("tcp-plain", "Gbit/s", None), ("tcp-ovn", "Gbit/s", None), ("frames", "Mpps (64 B)", 1.3)):
    keys = sorted({(k[1]) for k in med if k[0] == part})
    if not keys:
        continue
    print(f"\n{part}: median {unit} over rounds")
    modes = sorted({k[3] for k in med if k[0] == part})
    for n in keys:
        label = f"{n} stream(s)" if part.startswith("tcp") else "64 B"
        best = {}
        for sw in ("vswitchd", "ovs"):
            vals = {m: med.get((part, n, sw, m)) for m in modes}
            vals = {m: v for m, v in vals.items() if v is not None}
            if vals:
                best[sw] = max(vals.values())
                print(f"  {label:<13} {sw:<9} " + "  ".join(f"{m} {v:7.3f}" for m, v in vals.items()))
        if len(best) == 2 and best["ovs"] > 0:
            ratio = best["vswitchd"] / best["ovs"]
            if target is None:
                print(f"  {label:<13} vswitchd/ovs (best mode each) {ratio:.2f}x")
            else:
                verdict = "meets" if ratio >= target else "misses"
                print(f"  {label:<13} vswitchd/ovs (best mode each) {ratio:.2f}x  ({verdict} the {target}x target)")
PY
