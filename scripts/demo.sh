#!/usr/bin/env bash
# The main job in one command: two virtio-net guests (DPDK testpmd's virtio-user, a real
# virtio-net driver, no VM needed) exchange frames through vswitchd for ~10 s while this
# prints the per-port rates once a second, then a summary. Installs what is missing and
# cleans up.
#
#   sudo scripts/demo.sh [--separate-guests] [SECONDS] [FRAME_BYTES]
#
# The guests inject 16 bursts of 32 frames each (512 per guest) and then forward every
# frame they receive back into the switch (testpmd mac mode: source = own MAC, destination
# = the other guest), so the same frames circulate A -> vswitchd -> B -> vswitchd -> A ...
# Their rings hold 1024 descriptors (virtio-user queue_size, testpmd --rxd/--txd): the
# 1024 frames in flight always fit one receive ring, so a first run drops nothing; where a
# drop remains, the summary names its reason.
#
# Layout: vswitchd's PMD busy-polls on CPU 0, the guests' forwarding on CPU 1. By default
# both guests' virtio-user devices live in one testpmd process, whose one forwarding core
# serves both (the PVP layout the field benchmarks with). With --separate-guests each guest
# is its own testpmd process; on a 2-core machine their two busy-polling forwarding cores
# then share CPU 1 and take turns by scheduler time slice, so the loop runs at tens of
# thousands of frames per second instead of millions: that measures the scheduler, not the
# switch.
set -euo pipefail
cd "$(dirname "$0")/.."
separate=0
if [ "${1:-}" = "--separate-guests" ]; then separate=1; shift; fi
secs=${1:-10}
size=${2:-64}
scripts/setup.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "== building vswitchd (release)"
cargo build --release -q -p vswitch --bins
# Where cargo put them: CARGO_TARGET_DIR when it is set.
bin="${CARGO_TARGET_DIR:-target}/release"

work=$(mktemp -d /tmp/vswitch-demo.XXXXXX)
pids=()
cleanup() {
    for fd in 3 4; do eval "exec $fd>&-" 2>/dev/null || true; done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 1
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -f /dev/hugepages/vsdemo{a,b}map_* 2>/dev/null || true
    rm -rf /var/run/dpdk/vsdemoa /var/run/dpdk/vsdemob "$work"
}
trap cleanup EXIT INT TERM

ctl="$work/ctl.sock"
"$bin"/vswitchd --vhost-user "a=$work/a.sock" --vhost-user "b=$work/b.sock" \
    --pmd-cpus 0 --poll busy --control "$ctl" 2>"$work/vswitchd.log" &
pids+=($!)
for _ in $(seq 100); do "$bin"/vswitchctl --socket "$ctl" show >/dev/null 2>&1 && break; sleep 0.1; done

wait_prompt() { for _ in $(seq 300); do grep -aq "testpmd> " "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "demo: testpmd did not start; see $1" >&2; tail -20 "$1" >&2; exit 1; }
common=(-l 0,1 --main-lcore 0 -m 512 --no-pci --single-file-segments)
# Ring size and bursts injected per guest: 2 x bursts x 32 frames must fit one ring.
ring=1024
bursts=16
if [ "$separate" = 1 ]; then
    guest() { # name mac peer-mac
        mkfifo "$work/$1.in"
        stdbuf -o0 dpdk-testpmd "${common[@]}" --file-prefix="vsdemo$1" \
            --vdev "net_virtio_user0,path=$work/$1.sock,queues=1,queue_size=$ring,mac=$2" \
            -- -i --nb-cores=1 --rxd=$ring --txd=$ring --total-num-mbufs=16384 --forward-mode=mac --eth-peer="0,$3" \
            <"$work/$1.in" >"$work/$1.log" 2>&1 &
        pids+=($!)
    }
    guest a 02:00:00:00:00:01 02:00:00:00:00:02
    exec 3>"$work/a.in"
    guest b 02:00:00:00:00:02 02:00:00:00:00:01
    exec 4>"$work/b.in"
    wait_prompt "$work/a.log"; wait_prompt "$work/b.log"
    echo "set txpkts $((size - 4))" >&3
    echo "start" >&4
    echo "start tx_first $bursts" >&3
else
    mkfifo "$work/a.in"
    stdbuf -o0 dpdk-testpmd "${common[@]}" --file-prefix=vsdemoa \
        --vdev "net_virtio_user0,path=$work/a.sock,queues=1,queue_size=$ring,mac=02:00:00:00:00:01" \
        --vdev "net_virtio_user1,path=$work/b.sock,queues=1,queue_size=$ring,mac=02:00:00:00:00:02" \
        -- -i --nb-cores=1 --rxd=$ring --txd=$ring --total-num-mbufs=32768 --forward-mode=mac \
        --eth-peer=0,02:00:00:00:00:02 --eth-peer=1,02:00:00:00:00:01 \
        <"$work/a.in" >"$work/a.log" 2>&1 &
    pids+=($!)
    exec 3>"$work/a.in"
    wait_prompt "$work/a.log"
    echo "set txpkts $((size - 4))" >&3
    echo "start tx_first $bursts" >&3
fi
echo "== vswitchd ports"
"$bin"/vswitchctl --socket "$ctl" show
echo "== ${size}-byte frames circulating between guest a and guest b, ${secs} s"
"$bin"/vswitchctl --socket "$ctl" top --interval 1 --count "$secs"
echo "== PMD"
"$bin"/vswitchctl --socket "$ctl" pmd-stats
echo "stop" >&3; [ "$separate" = 1 ] && echo "stop" >&4 || true
