#!/usr/bin/env bash
# Request/response and connect/close rates between two Linux VMs, netperf-style TCP_RR
# and TCP_CRR (the metrics of the VM-FEX comparison), vswitchd against Open vSwitch with
# DPDK in one run. As root.
#
# Two QEMU guests (the test guest of tests/vm/, TCG: this machine has no usable KVM; one
# vCPU, 512 MiB of shared memfd memory each) on two vhost-user ports of the switch, QEMU
# the socket's server:
#   vswitchd  two --vhost-user-client ports, --poll adaptive
#   ovs       Open vSwitch 3.1 with DPDK, two dpdkvhostuserclient ports, NORMAL action,
#             pmd-maxsleep=50 (OVS's own adaptive polling)
#   vswitchd-sg, ovs-sg  the same two switches as one OVN 23.03 chassis each (vswitchd
#             --ovn-remote; OVS + ovn-controller), the guests on logical switch rr with
#             Neutron's security groups (scripts/lib/ovn-sg.sh: neutron_pg_drop, and pg_rr
#             admitting TCP port 5002 and ICMP from members by allow-related ACLs): every
#             connection TCP_CRR opens is committed in conntrack in both guests' zones
# Guest A answers (vmtool rrserve); guest B runs TCP_RR on one connection, then TCP_CRR
# (a connection per transaction), SECS seconds each, 1 byte each way
# (tests/vm/rr.rs): transactions per second and latency p50/p99 in µs.
#
# Under TCG each guest's network stack runs emulated: the rates measure the guests far
# more than the switch, so only the ratio of the two switches within one run says
# something, and little; the switch's own share is the same 1-byte frames either way.
#
#   scripts/bench-vm-rr.sh [--rounds N] [--secs S] [--only "vswitchd ovs vswitchd-sg ovs-sg"]
#                          [--json FILE]
#   (default 2 rounds of 10 s per test: about 4 minutes)
#   --json FILE  also append one JSON object per measurement to FILE: scenario "rr",
#                params {test: "tcp_rr"|"tcp_crr"}, metrics {rate, p50_us, p99_us}
#   VSWITCHD=/path/to/vswitchd   another build as vswitchd
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2; secs=10; only="vswitchd ovs"; json=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --json) json=$(realpath -m "$2"); touch "$json"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "bench-vm-rr.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for sw in $only; do
    case "$sw" in vswitchd|ovs|vswitchd-sg|ovs-sg) ;;
    *) echo "bench-vm-rr.sh: unknown switch $sw (vswitchd ovs vswitchd-sg ovs-sg)" >&2; exit 2 ;;
    esac
done
scripts/setup.sh --bench
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p vswitch --bins
bin="${CARGO_TARGET_DIR:-target}/release"
img=$(tests/vm/build-guest.sh "${CARGO_TARGET_DIR:-target}/vm")
vectors=""
# QEMU 7.2 under TCG crashes with vhost-user and MSI-X: INTx there (as tests/common/qemu.rs).
qv=$(qemu-system-x86_64 --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -1)
[ "${qv:-0}" -lt 8 ] && vectors=",vectors=0"

# shellcheck source=scripts/lib/ovn-sg.sh
. scripts/lib/ovn-sg.sh
work=$(mktemp -d /tmp/vswitch-rr.XXXXXX)
results="$work/results.tsv"
pids=()
stop_all() {
    stop_pids_and_ovs
    sleep 0.5
    # The next chassis run starts from no Chassis row (and no binding to it).
    if [ -S "$central/sb.sock" ]; then sbctl --if-exists chassis-del hv-rr || true; fi
    rm -rf "$work/ovs" /var/run/dpdk/rrovs* "$work"/*.sock 2>/dev/null || true
}
central="$work/central"
trap 'stop_all; ovn_central_stop; ip netns del rrsg 2>/dev/null; rm -rf "$work"' EXIT INT TERM

start_vm() { # name socket mac params
    qemu-system-x86_64 -accel tcg -M pc -cpu max -m 512M -smp 1 -nodefaults -display none \
        -serial stdio -no-reboot -kernel "$img/vmlinux" -initrd "$img/initrd.cpio.gz" \
        -append "console=ttyS0 quiet panic=-1 $4" \
        -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
        -chardev "socket,id=c0,path=$2,server=on,wait=off" -netdev vhost-user,id=n0,chardev=c0 \
        -device "virtio-net-pci,netdev=n0,mac=$3$vectors" \
        </dev/null >"$work/$1.log" 2>&1 &
    pids+=($!)
}

start_switch() {
    case "$1" in
    ovs|ovs-sg)
        local d="$work/ovs" br=br0
        [ "$1" = ovs-sg ] && br=br-int
        ovs_dpdk "$d" $br rrovs pmd-maxsleep=50
        local vsctl="ovs-vsctl --timeout=60 --db=unix:$d/db.sock"
        for p in a b; do
            $vsctl add-port $br "vhu$p" -- set Interface "vhu$p" type=dpdkvhostuserclient \
                "options:vhost-server-path=$work/$p.sock" "external_ids:iface-id=rr-$p"
        done
        [ "$1" = ovs-sg ] && ovs_ovn_chassis "$vsctl" "$d" hv-rr
        ;;
    vswitchd-sg)
        ip netns exec rrsg "${VSWITCHD:-$bin/vswitchd}" \
            --vhost-user-client "a=$work/a.sock,iface_id=rr-a" \
            --vhost-user-client "b=$work/b.sock,iface_id=rr-b" \
            --uplink u=rrsg0 --geneve "t=198.51.100.1,uplink=u" \
            --ovn-remote "unix:$central/sb.sock" --chassis hv-rr --poll adaptive \
            --control "$work/ctl.sock" 2>"$work/vswitchd.log" &
        pids+=($!)
        ;;
    vswitchd)
        "${VSWITCHD:-$bin/vswitchd}" --vhost-user-client "a=$work/a.sock" \
            --vhost-user-client "b=$work/b.sock" --poll adaptive \
            --control "$work/ctl.sock" 2>"$work/vswitchd.log" &
        pids+=($!)
        ;;
    esac
}

# Waits up to $2 s for a line starting with $3 in guest log $1; prints it.
wait_line() {
    local i
    for i in $(seq $(($2 * 10))); do
        if grep -a "^$3" "$work/$1.log" 2>/dev/null | head -1 | grep .; then return 0; fi
        sleep 0.1
    done
    echo "bench-vm-rr.sh: no '$3' from guest $1 within $2 s; its console:" >&2
    tail -20 "$work/$1.log" >&2
    return 1
}

measure() { # switch -> prints "rr_rate rr_p50 rr_p99 crr_rate crr_p50 crr_p99"
    local sw=$1
    start_vm a "$work/a.sock" 52:54:00:00:0a:01 "vm.ip=10.9.0.1 vm.peer=10.9.0.2 vm.test=rr-server"
    start_vm b "$work/b.sock" 52:54:00:00:0a:02 \
        "vm.ip=10.9.0.2 vm.peer=10.9.0.1 vm.test=rr vm.secs=$secs"
    sleep 1
    start_switch "$sw"
    case "$sw" in *-sg) sg_ready rr-a rr-b || { stop_all; return 1; } ;; esac
    local rr crr
    rr=$(wait_line b $((180 + secs)) "RESULT rr ") || { stop_all; return 1; }
    crr=$(wait_line b $((60 + secs)) "RESULT crr ") || { stop_all; return 1; }
    stop_all
    python3 - "$rr" "$crr" <<'PY'
import sys
kv = [dict(w.split("=", 1) for w in line.split()[2:]) for line in sys.argv[1:3]]
print(" ".join(f"{k['rate']} {k['p50_us']} {k['p99_us']}" for k in kv))
PY
}

case " $only " in *-sg\ *)
    ovn_central
    sg_tenant rr rr-a "52:54:00:00:0a:01 10.9.0.1" rr-b "52:54:00:00:0a:02 10.9.0.2" \
        "tcp.dst == 5002 || icmp4"
    sg_netns rrsg ;;
esac
printf "round\tswitch\ttest\trate\tp50_us\tp99_us\n" > "$results"
for r in $(seq "$rounds"); do
    for sw in $only; do
        m=$(measure "$sw") || { echo "bench-vm-rr.sh: $sw, round $r failed" >&2; continue; }
        # shellcheck disable=SC2086 # m is six numbers
        set -- $m
        printf "%s\t%s\ttcp_rr\t%s\t%s\t%s\n" "$r" "$sw" "$1" "$2" "$3" | tee -a "$results"
        printf "%s\t%s\ttcp_crr\t%s\t%s\t%s\n" "$r" "$sw" "$4" "$5" "$6" | tee -a "$results"
    done
done

python3 - "$results" "$json" <<'PY'
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
if sys.argv[2]:
    with open(sys.argv[2], "a") as f:
        for r in rows:
            f.write(json.dumps({"scenario": "rr", "switch": r["switch"], "round": int(r["round"]),
                                "params": {"test": r["test"]},
                                "metrics": {k: float(r[k]) for k in ("rate", "p50_us", "p99_us")}}) + "\n")
med = {}
for r in rows:
    med.setdefault((r["switch"], r["test"]), []).append(r)
switches = [s for s in ("ovs", "vswitchd", "ovs-sg", "vswitchd-sg") if any(k[0] == s for k in med)]
print("\nmedian over rounds (transactions/s, latency p50/p99 µs; TCG guests):")
for test in ("tcp_rr", "tcp_crr"):
    line = f"{test:<8}"
    rate = {}
    for s in switches:
        rs = med.get((s, test), [])
        rate[s] = statistics.median(float(r["rate"]) for r in rs)
        p50 = statistics.median(float(r["p50_us"]) for r in rs)
        p99 = statistics.median(float(r["p99_us"]) for r in rs)
        line += f"  {s}: {rate[s]:>8.0f}/s {p50:>6.0f}/{p99:<6.0f}"
    for v, o in (("vswitchd", "ovs"), ("vswitchd-sg", "ovs-sg")):
        if rate.get(o) and v in rate:
            line += f"  {v}/{o} {rate[v] / rate[o]:.2f}"
    print(line)
PY
