#!/usr/bin/env bash
# The benchmark report: every scenario, every switch in the same run, one command. As root.
#
#   scripts/bench-report.sh            the full run (about an hour on 2 cores): 3 rounds
#   scripts/bench-report.sh --quick    a reduced set in under 10 minutes (1 round, 64 and
#                                      1518 B, fewer levels) to check that everything works
#
# Writes target/bench-report/ (or --out DIR):
#   raw.jsonl        every figure of every round, one JSON object per line, as measured
#   machine.json     CPU model, cores, kernel, versions of vswitch, Open vSwitch and DPDK
#   results.json     both of the above plus medians, min–max and the targets' outcomes
#   report.md        the tables (medians over rounds, min–max), targets met or not
#   plots/*.png|svg  Mpps and Gbit/s against frame size, cycles per packet against frame
#                    size, Mpps against flow count, latency percentiles, pipeline scale
#   logs/*.log       each scenario script's output
# A full run also rewrites, from this run, the README's headline figure (between its
# bench-report:headline markers), the report excerpt in docs/benchmarks.md (between the
# bench-report markers) and docs/bench/ (report.md, results.json, plots/*.svg); --no-readme
# leaves them.
#
# Switches: vswitchd (this project, one busy-polling PMD), ovs (Open vSwitch 3.1 with DPDK,
# NORMAL action; userspace datapath without DPDK for the tcp scenario), limit/testpmd (DPDK
# testpmd's own vhost or AF_XDP io forwarding). Each scenario script runs its switches in
# interleaved rounds (A, B, C, A, B, C, …), so slow drift of the machine hits all alike.
#
# Scenarios (--scenarios "pvp flows acl sg nat afxdp tcp rr scale mcast", default all):
#   pvp    PVP loop, 1 flow, frame sizes 64…1518, split and packed rings (bench-pvp.sh and
#          bench-pvp.sh --packed), and IMIX (7:4:1 of 64/570/1518 B, split rings;
#          bench-pvp.sh --sizes imix): Mpps, Gbit/s, drops, the switch's own cycles per
#          packet
#   flows  testpmd flowgen with 1, 128 and 1280 flows, 64 B (bench-pvp.sh --flowgen N)
#   acl    vswitchd, 1280 flows from a pcap, 100 ACL rules, flow cache on and off
#          (bench-pvp.sh --flows 1280)
#   sg     64 B PVP with OVN security groups (conntrack both ways): vswitchd as the OVN
#          chassis against Open vSwitch with DPDK + ovn-controller, and vswitchd's plain
#          L2 loop (bench-pvp.sh --only "vswitchd vswitchd-sg ovs-sg")
#   nat    64 B through a load balancer's VIP and a floating IP (DNAT), the same two
#          chassis (bench-pvp.sh --only "vswitchd-lb ovs-lb vswitchd-fip ovs-fip"); new
#          connections per second through a VIP and a floating IP (bench-cps.sh; --quick:
#          1M SYNs, a 1 s window)
#   afxdp  AF_XDP uplink <-> vhost-user guest over a veth, against testpmd net_af_xdp
#          (bench-afxdp.sh)
#   tcp    iperf3 between two namespace hosts through tap ports, plain L2 and Geneve, against
#          OVS userspace; ICMP latency at 0/10/50/90 % of each switch's maximum
#          (bench-overlay.sh --parts tcp --latency ...)
#   scale  criterion: ns per packet at 1…100 000 flows and 2…64 ports
#          (cargo bench --bench pipeline -- scale)
#   rr     TCP_RR and TCP_CRR between two QEMU (TCG) guests on vhost-user ports, against
#          OVS with DPDK, plain and as OVN chassis with security groups (bench-vm-rr.sh
#          --only "vswitchd ovs vswitchd-sg ovs-sg")
#   mcast  one sender, 16/32/64 testpmd receivers, 800 B to a group at rising rates
#          until a receiver loses > 0.01 %, vswitchd against OVS with mcast snooping
#          (bench-mcast.sh; --quick: 64 receivers, 40 and 80 kpps)
#
# Options:
#   --quick            the reduced set
#   --out DIR          output directory (default target/bench-report)
#   --scenarios LIST   run only these
#   --rounds N         rounds per scenario (default 3; --quick 1)
#   --no-readme        never touch README.md, docs/benchmarks.md and docs/bench/
#   --render-only      measure nothing: render OUT/raw.jsonl and OUT/machine.json again
#                      (after a change to the report's layout; the figures stay the run's)
# Run nothing else heavy meanwhile (the machine's two cores are the measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
all_scenarios="pvp flows acl sg nat afxdp tcp rr scale mcast"
quick=""; out=target/bench-report; scenarios=$all_scenarios; rounds=""
readme=1; render_only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; shift ;;
        --out) out=$2; shift 2 ;;
        --scenarios) scenarios=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --no-readme) readme=""; shift ;;
        --render-only) render_only=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-report.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-report.sh: run as root (namespaces, hugepages, XDP)" >&2; exit 2; }
for s in $scenarios; do
    case "$s" in pvp|flows|acl|sg|nat|afxdp|tcp|rr|scale|mcast) ;;
    *) echo "bench-report.sh: unknown scenario $s ($all_scenarios)" >&2; exit 2 ;;
    esac
done

if [ -n "$quick" ]; then
    rounds=${rounds:-1}; secs=2; sizes="64 1518"; flowcounts="1 1280"; latency="0 90"
    tcp_secs=3; rr_secs=5; mode=quick; readme=""; mc_receivers="64"; mc_rates="40 80"
else
    rounds=${rounds:-3}; secs=3; sizes="64 128 256 512 1024 1280 1518"; flowcounts="1 128 1280"
    latency="0 10 50 90"; tcp_secs=6; rr_secs=10; mode=full; mc_receivers="16 32 64"
    mc_rates="40 80 120 160 200 240 320"
fi
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-target}"
report="$target/release/bench-report"

# render: the report from OUT/raw.jsonl; after a full run also README.md, docs/benchmarks.md
# and docs/bench/.
render() {
    local args=()
    if [ -n "$readme" ] && [ "$(jq_mode)" = full ] && [ "$scenarios" = "$all_scenarios" ]; then
        args=(--readme README.md)
    fi
    "$report" render --raw "$out/raw.jsonl" --machine "$out/machine.json" --out "$out" "${args[@]}"
    if [ "${#args[@]}" -gt 0 ]; then
        mkdir -p docs/bench/plots
        cp "$out/report.md" "$out/results.json" docs/bench/
        cp "$out"/plots/*.svg docs/bench/plots/
        echo "README.md, docs/benchmarks.md and docs/bench/ rewritten from this run"
    fi
    echo "report: $out/report.md"
}
jq_mode() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("mode", ""))' "$out/machine.json"; }

if [ -n "$render_only" ]; then
    [ -f "$out/raw.jsonl" ] && [ -f "$out/machine.json" ] || { echo "bench-report.sh: no $out/raw.jsonl to render" >&2; exit 2; }
    cargo build --release -q -p bench-report
    out=$(realpath "$out")
    render
    exit 0
fi

scripts/setup.sh --bench
echo "== building (release: vswitchd, bench-report; bench: pipeline)"
cargo build --release -q -p vswitch --bins
cargo build --release -q -p bench-report
if [[ " $scenarios " == *" scale "* ]]; then cargo bench -q --bench pipeline --no-run 2>/dev/null; fi

mkdir -p "$out/logs"
out=$(realpath "$out")
raw="$out/raw.jsonl"
: >"$raw"
rm -rf "$out/plots"

# machine.json: what the figures were measured on.
/usr/bin/python3 - "$out/machine.json" "$mode" "$rounds" <<'PY'
import json, os, platform, re, subprocess, sys, time
def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
cpu = re.search(r"^model name\s*:\s*(.*)$", open("/proc/cpuinfo").read(), re.M)
ovs = run("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk", "--version").splitlines()
ver = re.search(r'^version = "(.*)"', open("crates/vswitch/Cargo.toml").read(), re.M)
m = {
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "mode": sys.argv[2],
    "rounds": int(sys.argv[3]),
    "cpu_model": cpu.group(1) if cpu else "?",
    "cores": os.cpu_count(),
    "kernel": platform.release(),
    "vswitch_version": f'{ver.group(1) if ver else "?"} ({run("git", "describe", "--always", "--dirty")})',
    "ovs_version": ovs[0].split()[-1] if ovs else "?",
    "dpdk_version": run("dpkg-query", "-W", "-f=${Version}", "dpdk"),
    "rustc": run("rustc", "--version"),
}
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY

# not_run SCENARIO SWITCH WHY: a raw record saying why there are no figures.
not_run() {
    /usr/bin/python3 -c 'import json, sys; print(json.dumps({"scenario": sys.argv[1], "switch": sys.argv[2], "not_run": sys.argv[3]}))' \
        "$1" "$2" "$3" >>"$raw"
}

# scenario NAME CMD...: runs one scenario script, its output in logs/NAME.log; a failure
# becomes a "not run" record and the report goes on.
scenario() {
    local name=$1; shift
    echo "== $name: $*"
    local t0=$SECONDS rc=0
    "$@" >"$out/logs/$name.log" 2>&1 || rc=$?
    echo "   $name took $((SECONDS - t0)) s"
    if [ "$rc" != 0 ]; then
        echo "   $name failed (exit $rc); last lines of logs/$name.log:" >&2
        tail -5 "$out/logs/$name.log" >&2
        not_run "${name%%-*}" "" "the script exited with status $rc (see logs/$name.log)"
    fi
}

t_start=$SECONDS
for s in $scenarios; do
    case "$s" in
    pvp)
        scenario pvp scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes "$sizes" \
            --only "vswitchd ovs limit" --json "$raw"
        scenario pvp-packed scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes "$sizes" \
            --only "vswitchd ovs limit" --packed --json "$raw"
        # IMIX (7:4:1 of 64/570/1518 B), split rings: the guest injects the mix in three
        # tx_first rounds (bench-pvp.sh --sizes imix), the same for all three switches.
        scenario pvp-imix scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes imix \
            --only "vswitchd ovs limit" --json "$raw"
        ;;
    flows)
        for f in $flowcounts; do
            scenario "flows-$f" scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes 64 \
                --only "vswitchd ovs limit" --flowgen "$f" --json "$raw"
        done
        ;;
    acl)
        scenario acl scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes 64 \
            --flows 1280 --acl-rules 100 --only "vswitchd vswitchd-nocache" --json "$raw"
        ;;
    sg)
        scenario sg scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes 64 \
            --only "vswitchd vswitchd-sg ovs-sg" --json "$raw"
        ;;
    nat)
        scenario nat scripts/bench-pvp.sh --rounds "$rounds" --secs "$secs" --sizes 64 \
            --only "vswitchd-lb ovs-lb vswitchd-fip ovs-fip" --json "$raw"
        if [ "$mode" = quick ]; then
            scenario cps scripts/bench-cps.sh --rounds "$rounds" --conns 1000000 --secs 1 \
                --warm 0.3 --json "$raw"
        else
            scenario cps scripts/bench-cps.sh --rounds "$rounds" --json "$raw"
        fi
        ;;
    afxdp)
        scenario afxdp scripts/bench-afxdp.sh --rounds "$rounds" --secs "$secs" --json "$raw"
        ;;
    tcp)
        scenario tcp scripts/bench-overlay.sh --parts tcp --modes native --streams 1 \
            --topologies "plain geneve ovn" --latency "$latency" --rounds "$rounds" \
            --secs "$tcp_secs" --only "vswitchd ovs" --json "$raw"
        not_run latency limit "testpmd io forwarding has no tap port for the kernel's TCP and ICMP; and testpmd 22.11 --latencystats stamps frames at the guest's own rx and reads them at its tx, so in the PVP loop it measures the guest, not the switch"
        ;;
    rr)
        scenario rr scripts/bench-vm-rr.sh --rounds "$rounds" --secs "$rr_secs" \
            --only "vswitchd ovs vswitchd-sg ovs-sg" --json "$raw"
        not_run rr limit "testpmd io forwarding has no TCP stack; the two guests' own TCP is what request/response measures"
        ;;
    mcast)
        scenario mcast scripts/bench-mcast.sh --receivers "$mc_receivers" --rates "$mc_rates" \
            --secs "$secs" --json "$raw"
        ;;
    scale)
        echo "== scale: cargo bench --bench pipeline -- scale"
        if cargo bench -q --bench pipeline -- scale >"$out/logs/scale.log" 2>&1; then
            "$report" criterion "$target/criterion/scale" >>"$raw"
        else
            echo "   scale failed; see logs/scale.log" >&2
            not_run scale "" "cargo bench failed (see logs/scale.log)"
        fi
        ;;
    esac
done
echo "== measured in $((SECONDS - t_start)) s"

render
