#!/usr/bin/env bash
# The main job in one command: two DPDK testpmd guests (virtio-user, a real virtio-net
# driver, no VM needed) exchange frames through vswitchd for ~10 s while this prints the
# per-port rates once a second, then a summary. Installs what is missing and cleans up.
#
#   sudo scripts/demo.sh [SECONDS] [FRAME_BYTES]
#
# Layout on a 2-core machine: vswitchd's PMD busy-polls on CPU 0; the two guests'
# forwarding cores share CPU 1. Guest A injects 64 bursts and both guests then forward
# every frame they receive back into the switch (testpmd mac mode: source = own MAC,
# destination = the other guest), so the same frames circulate
# A → vswitchd → B → vswitchd → A ... and each guest's MAC stays on its own port.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
size=${2:-64}
scripts/setup.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "== building vswitchd (release)"
cargo build --release -q -p vswitch --bins

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
target/release/vswitchd --vhost-user "a=$work/a.sock" --vhost-user "b=$work/b.sock" \
    --pmd-cpus 0 --poll busy --control "$ctl" 2>"$work/vswitchd.log" &
pids+=($!)
for _ in $(seq 100); do target/release/vswitchctl --socket "$ctl" show >/dev/null 2>&1 && break; sleep 0.1; done

guest() { # name mac peer-mac fifo
    mkfifo "$work/$1.in"
    stdbuf -o0 dpdk-testpmd -l 0,1 --main-lcore 0 -m 256 --no-pci --file-prefix="vsdemo$1" \
        --single-file-segments --vdev "net_virtio_user0,path=$work/$1.sock,queues=1,mac=$2" \
        -- -i --nb-cores=1 --total-num-mbufs=16384 --forward-mode=mac --eth-peer="0,$3" \
        <"$work/$1.in" >"$work/$1.log" 2>&1 &
    pids+=($!)
}
guest a 02:00:00:00:00:01 02:00:00:00:00:02
exec 3>"$work/a.in"
guest b 02:00:00:00:00:02 02:00:00:00:00:01
exec 4>"$work/b.in"
for g in a b; do
    for _ in $(seq 300); do grep -q "testpmd> " "$work/$g.log" 2>/dev/null && break; sleep 0.1; done
done
echo "set txpkts $((size - 4))" >&3
echo "start" >&4
echo "start tx_first 64" >&3
echo "== vswitchd ports"
target/release/vswitchctl --socket "$ctl" show
echo "== ${size}-byte frames circulating between guest a and guest b, ${secs} s"
target/release/vswitchctl --socket "$ctl" top --interval 1 --count "$secs"
echo "== PMD"
target/release/vswitchctl --socket "$ctl" pmd-stats
echo "stop" >&3; echo "stop" >&4
