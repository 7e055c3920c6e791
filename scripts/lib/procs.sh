# Process handling shared by the benchmark scripts (bench-pvp, bench-cps, bench-vm-rr
# through scripts/lib/ovn-sg.sh, and bench-mcast). Sourced, not run, from the
# repository's root.

# stop_pids_and_ovs: kills the processes in array `pids` (TERM, then KILL after 5 s)
# and empties it, then the Open vSwitch daemons whose pid files are in $work/ovs.
stop_pids_and_ovs() {
    local p f alive
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break; sleep 0.1
    done
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    pids=()
    for f in ovn-controller ovs-vswitchd ovsdb-server; do
        if [ -f "$work/ovs/$f.pid" ]; then kill "$(cat "$work/ovs/$f.pid")" 2>/dev/null || true; fi
    done
}
