#!/usr/bin/env bash
# AF_XDP uplink <-> vhost-user guest at 64 B over a veth pair, both directions, against
# DPDK testpmd's own net_af_xdp PMD doing the same forwarding, in one run. As root.
#
# veth pair bxa (the device-under-test's uplink) / bxb (the traffic side). The guest is
# a testpmd virtio-user port (server=1, MAC 02:00:00:00:00:01); the traffic side is a
# testpmd on net_af_xdp iface=bxb. Devices under test, each on CPU 1:
#   vswitchd  --uplink up=bxa,mode=native --vhost-user-client g=SOCK --pmd-cpus 1 --poll busy
#   testpmd   --vdev net_af_xdp0,iface=bxa --vdev net_vhost0,iface=SOCK,client=1, io forwarding
# Directions:
#   xdp2vhost  the traffic side transmits (txonly, to the guest's MAC); the guest counts (rxonly)
#   vhost2xdp  the guest transmits (txonly, to bxb's MAC); the traffic side counts (rxonly)
# The generator and the sink share CPU 0 (the machine has two cores), the same for both
# devices under test. Rates are the sink's Rx-pps over SECS seconds after a warm-up.
#
#   scripts/bench-afxdp.sh [--rounds N] [--secs S]      (default 2 rounds of 5 s: ~2 minutes)
#   --json FILE   also append one JSON object per measurement to FILE (scenario "afxdp",
#                 switch, round, params {direction, frame_size}, metrics {mpps})
#   VSWITCHD=/path/to/vswitchd scripts/bench-afxdp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2; secs=5; json=
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --json) json=$(realpath -m "$2"); touch "$json"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-afxdp.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-afxdp.sh: run as root" >&2; exit 2; }
scripts/setup.sh >/dev/null
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if [ -z "${VSWITCHD:-}" ]; then
    cargo build --release -q -p vswitch
    VSWITCHD="${CARGO_TARGET_DIR:-target}/release/vswitchd"
fi

work=$(mktemp -d /tmp/bench-afxdp.XXXXXX)
pids=()
stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    exec 5>&- 6>&- 7>&- || true  # (2>/dev/null on exec would silence the script for good)
    rm -f /dev/hugepages/bx*map_* ; rm -rf /var/run/dpdk/bx*
}
cleanup() { stop_all; ip link del bxa 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ip link del bxa 2>/dev/null || true
ip link add bxa type veth peer name bxb
for i in bxa bxb; do
    echo 1 > "/proc/sys/net/ipv6/conf/$i/disable_ipv6"
    ip link set "$i" up
done
bxb_mac=$(cat /sys/class/net/bxb/address)
sock="$work/g.sock"

# testpmd NAME FIFO-FD LCORES ARGS...: interactive testpmd reading commands from a fifo.
testpmd() {
    local name=$1 fd=$2 lcores=$3; shift 3
    mkfifo "$work/$name.in"
    stdbuf -o0 -e0 dpdk-testpmd --lcores "$lcores" -m 256 --no-pci --file-prefix="bx$name" \
        --single-file-segments "$@" <"$work/$name.in" >"$work/$name.out" 2>&1 &
    pids+=($!)
    eval "exec $fd>\"$work/$name.in\""
}

# rate NAME FD PORT: Rx-pps of PORT over $secs seconds.
rate() {
    local name=$1 fd=$2 port=$3
    echo "show port stats $port" >&"$fd"
    sleep "$secs"
    echo "show port stats $port" >&"$fd"
    sleep 0.5
    grep -o 'Rx-pps: *[0-9]*' "$work/$name.out" | tail -1 | awk '{print $2}'
}

# run DUT DIR: prints Mpps.
run() {
    local dut=$1 dir=$2
    rm -f "$work"/*.in "$work"/*.out "$sock"
    local gmode tmode
    if [ "$dir" = xdp2vhost ]; then gmode=rxonly; tmode=txonly; else gmode=txonly; tmode=rxonly; fi
    testpmd guest 5 0@1,1@0 --vdev "net_virtio_user0,path=$sock,queues=1,mac=02:00:00:00:00:01,server=1" \
        -- -i --nb-cores=1 --forward-mode=$gmode --eth-peer=0,"$bxb_mac" --txpkts=64
    sleep 1
    if [ "$dut" = vswitchd ]; then
        "$VSWITCHD" --uplink up=bxa,mode=native --vhost-user-client "g=$sock" --pmd-cpus 1 \
            --poll busy --control "$work/ctl.sock" 2>"$work/vswitchd.log" &
        pids+=($!)
    else
        testpmd dut 7 0@0,1@1 --vdev net_af_xdp0,iface=bxa,start_queue=0,queue_count=1 \
            --vdev "net_vhost0,iface=$sock,client=1,queues=1" \
            -- -i --nb-cores=1 --forward-mode=io --auto-start
    fi
    sleep 3
    testpmd traffic 6 0@1,1@0 --vdev net_af_xdp0,iface=bxb,start_queue=0,queue_count=1 \
        -- -i --nb-cores=1 --forward-mode=$tmode --eth-peer=0,02:00:00:00:00:01 --txpkts=64
    sleep 3
    echo start >&5; echo start >&6
    sleep 2
    local pps
    if [ "$dir" = xdp2vhost ]; then pps=$(rate guest 5 0); else pps=$(rate traffic 6 0); fi
    stop_all
    awk -v p="${pps:-0}" 'BEGIN { printf "%.3f", p / 1e6 }'
}

declare -A sum
for r in $(seq 1 "$rounds"); do
    for dir in xdp2vhost vhost2xdp; do
        for dut in testpmd vswitchd; do
            m=$(run "$dut" "$dir")
            echo "round $r  $dir  $dut  $m Mpps"
            if [ -n "$json" ]; then
                printf '{"scenario":"afxdp","switch":"%s","round":%s,"params":{"direction":"%s","frame_size":64},"metrics":{"mpps":%s}}\n' \
                    "$dut" "$r" "$dir" "$m" >>"$json"
            fi
            sum[$dir.$dut]=$(awk -v a="${sum[$dir.$dut]:-0}" -v b="$m" 'BEGIN { print a + b }')
        done
    done
done
echo
printf "%-10s %14s %14s %8s\n" direction "testpmd Mpps" "vswitchd Mpps" ratio
for dir in xdp2vhost vhost2xdp; do
    awk -v d="$dir" -v t="${sum[$dir.testpmd]}" -v v="${sum[$dir.vswitchd]}" -v n="$rounds" \
        'BEGIN { printf "%-10s %14.3f %14.3f %8.2f\n", d, t / n, v / n, (t > 0 ? v / t : 0) }'
done
