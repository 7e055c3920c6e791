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
#
#   scripts/bench-pvp.sh [--rounds N] [--secs S] [--sizes "64 512 1518"] [--only "vswitchd ovs limit"]
#   VSWITCHD=/path/to/vswitchd scripts/bench-pvp.sh ...   (compare another build)
#   --multi-flow       inject frames of 256 flows (testpmd --txonly-multi-flow: 198.18.X.3)
#   --vswitchd-args A  extra vswitchd flags, e.g. "--flow-cache off"
#   PVP_PMD_STATS=1    print vswitchd's pmd-stats (cycles/packet) after each measurement
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3; secs=10; sizes="64 512 1518"; only="limit ovs vswitchd"; multiflow=""; vsargs=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --multi-flow) multiflow="--txonly-multi-flow"; shift ;;
        --vswitchd-args) vsargs=$2; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "bench-pvp.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
scripts/setup.sh --bench
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p vswitch --bins

work=$(mktemp -d /tmp/vswitch-pvp.XXXXXX)
results="$work/results.tsv"
pids=()
stop_all() {
    exec 3>&- 4>&- 2>/dev/null || true
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break; sleep 0.1
    done
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    pids=()
    if [ -f "$work/ovs/ovs-vswitchd.pid" ]; then kill "$(cat "$work/ovs/ovs-vswitchd.pid")" 2>/dev/null || true; fi
    if [ -f "$work/ovs/ovsdb-server.pid" ]; then kill "$(cat "$work/ovs/ovsdb-server.pid")" 2>/dev/null || true; fi
    sleep 0.5
    rm -rf "$work/ovs" /var/run/dpdk/pvp* 2>/dev/null || true
    rm -f /dev/hugepages/pvp*map_* "$work"/*.sock "$work/guest.in" "$work/sw.in" 2>/dev/null || true
}
trap 'stop_all; rm -rf "$work"' EXIT INT TERM

start_guest() {
    mkfifo "$work/guest.in"
    stdbuf -o0 dpdk-testpmd -l 0,1 --main-lcore 0 -m 512 --no-pci --file-prefix=pvpguest \
        --single-file-segments \
        --vdev "net_virtio_user0,path=$work/a.sock,queues=1,server=1,mac=02:00:00:00:00:01" \
        --vdev "net_virtio_user1,path=$work/b.sock,queues=1,server=1,mac=02:00:00:00:00:02" \
        -- -i --nb-cores=1 --total-num-mbufs=32768 --forward-mode=io \
        --eth-peer=0,02:00:00:00:00:02 --eth-peer=1,02:00:00:00:00:01 $multiflow \
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
            -- -i --nb-cores=1 --forward-mode=io --total-num-mbufs=32768 \
            <"$work/sw.in" >"$work/sw.log" 2>&1 &
        pids+=($!)
        exec 4>"$work/sw.in"
        echo "start" >&4
        ;;
    ovs)
        local d="$work/ovs"; mkdir -p "$d"
        export OVS_RUNDIR=$d OVS_LOGDIR=$d OVS_DBDIR=$d
        local vsctl="ovs-vsctl --db=unix:$d/db.sock"
        ovsdb-tool create "$d/conf.db" /usr/share/openvswitch/vswitch.ovsschema
        ovsdb-server "$d/conf.db" --remote="punix:$d/db.sock" --pidfile="$d/ovsdb-server.pid" \
            --detach --log-file="$d/ovsdb.log"
        $vsctl --no-wait init
        $vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
            other_config:dpdk-lcore-mask=0x2 other_config:pmd-cpu-mask=0x1 \
            other_config:dpdk-socket-mem=512 \
            "other_config:dpdk-extra=--file-prefix=pvpovs --no-pci --single-file-segments"
        /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk "unix:$d/db.sock" \
            --pidfile="$d/ovs-vswitchd.pid" --detach --log-file="$d/ovs-vswitchd.log"
        $vsctl add-br br0 -- set bridge br0 datapath_type=netdev
        $vsctl add-port br0 vhu0 -- set Interface vhu0 type=dpdkvhostuserclient \
            "options:vhost-server-path=$work/a.sock"
        $vsctl add-port br0 vhu1 -- set Interface vhu1 type=dpdkvhostuserclient \
            "options:vhost-server-path=$work/b.sock"
        ;;
    vswitchd)
        "${VSWITCHD:-target/release/vswitchd}" --vhost-user-client "a=$work/a.sock" \
            --vhost-user-client "b=$work/b.sock" --pmd-cpus 0 --poll busy \
            --control "$work/ctl.sock" $vsargs 2>"$work/vswitchd.log" &
        pids+=($!)
        ;;
    esac
}

measure() { # switch size -> prints Mpps
    local sw=$1 size=$2
    start_guest
    start_switch "$sw"
    wait_guest
    # Wait until both virtio-user ports report link up.
    for _ in $(seq 100); do
        echo "show port info all" >&3; sleep 0.2
        [ "$(grep -ac 'Link status: up' "$work/guest.log")" -ge 2 ] && break
        : > "$work/guest.log"
    done
    echo "set txpkts $((size - 4))" >&3
    echo "start tx_first 64" >&3
    sleep 2
    echo "clear port stats all" >&3
    sleep "$secs"
    : > "$work/guest.log"
    echo "show port stats all" >&3
    sleep 0.5
    local rx
    rx=$(grep -ao "RX-packets: *[0-9]*" "$work/guest.log" | awk '{s+=$2} END {print s+0}')
    if [ "$sw" = vswitchd ] && [ -n "${PVP_PMD_STATS:-}" ]; then
        target/release/vswitchctl --socket "$work/ctl.sock" pmd-stats >&2 || true
    fi
    echo "stop" >&3
    stop_all
    python3 -c "print(f'{$rx / $secs / 1e6:.3f}')"
}

printf "round\tswitch\tsize\tmpps\n" > "$results"
for r in $(seq "$rounds"); do
    for size in $sizes; do
        for sw in $only; do
            mpps=$(measure "$sw" "$size")
            printf "%s\t%s\t%s\t%s\n" "$r" "$sw" "$size" "$mpps" | tee -a "$results"
        done
    done
done

python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = {}
for r in rows:
    med.setdefault((r["switch"], int(r["size"])), []).append(float(r["mpps"]))
sizes = sorted({s for _, s in med})
switches = [s for s in ("limit", "ovs", "vswitchd") if any(k[0] == s for k in med)]
print("\nmedian over rounds (Mpps / Gbit/s of frames, guest RX):")
print("size  " + "".join(f"{s:>22}" for s in switches) + "   vswitchd/ovs  vswitchd/limit")
for size in sizes:
    line = f"{size:<6}"
    m = {}
    for s in switches:
        v = statistics.median(med.get((s, size), [0.0]))
        m[s] = v
        line += f"{v:>10.3f} Mpps {v * size * 8 / 1e3:>6.2f} G"
    ro = m.get("vswitchd", 0) / m["ovs"] if m.get("ovs") else float("nan")
    rl = m.get("vswitchd", 0) / m["limit"] if m.get("limit") else float("nan")
    print(line + f"   {ro:>12.2f}  {rl:>14.2f}")
PY
