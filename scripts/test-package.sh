#!/usr/bin/env bash
# The Debian package as an operator meets it, in a clean Debian 12 system booted with
# systemd in a container (systemd-nspawn; its root made once by debootstrap and kept in
# /var/lib/vswitch-test/, each run on a fresh copy):
#   1. build the package (scripts/package.sh), install it with dpkg: only the
#      dependencies it declares are in the container, its libraries resolve, the
#      service starts from the packaged unit and config (Type=notify: active = READY=1);
#      man pages, completions and the conffile are in place; the log is in the journal;
#   2. attach a guest: a DPDK testpmd on the host with two virtio-user ports (server
#      mode) looping frames; the operator adds two client-mode ports to
#      /etc/vswitch/vswitchd.toml and runs `systemctl reload vswitchd`; frames cross;
#      an AF_XDP uplink (veth) and a tap added the same way run under the unit's
#      hardening; a broken edit makes the reload fail and changes nothing;
#   3. upgrade to a rebuilt package (Debian revision 2): vswitchd is restarted, the
#      edited conffile is kept, the guest's ports reconnect and frames cross again;
#   4. purge: nothing the package put there is left (files under /etc, /usr, /var/lib
#      and /run compared with the system before the install).
# As root; needs debootstrap and systemd-container (scripts/setup.sh). About 3 minutes
# once the release build and the container root exist (the first run adds both).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-target}"
cache=/var/lib/vswitch-test
work=$(mktemp -d /var/tmp/vswitch-pkg.XXXXXX)
nspawn_pid=""
testpmd_pid=""

say() { echo "test-package: $*"; }
fail() { echo "test-package: FAIL: $*" >&2; exit 1; }

cleanup() {
    set +e
    [ -n "$testpmd_pid" ] && kill $testpmd_pid 2>/dev/null && wait $testpmd_pid 2>/dev/null
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        # SIGTERM: nspawn asks the container's systemd to power off (SIGRTMIN+3).
        kill "$nspawn_pid"
        for _ in $(seq 300); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$nspawn_pid" 2>/dev/null
    fi
    rm -rf /dev/hugepages/vspkg* "$work"
}
trap cleanup EXIT

# Runs a command inside the container (all its namespaces).
in_ct() { nsenter -t "$leader" -m -u -i -n -p -- "$@"; }

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    local secs=$1; shift
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}

# 1. The packages: revision 1, and a rebuilt revision 2 to upgrade to (cargo-deb
# clears its output directory of older builds, so each is copied away first).
version=$(cargo metadata --no-deps --format-version 1 | python3 -c \
    'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="vswitch"))')
mkdir -p "$work/debs" "$work/guests"
for rev in 1 2; do
    say "building the package, Debian revision $rev"
    # --fast: lighter compression of the same files (the test needs no small .deb).
    scripts/package.sh --deb-revision "$rev" --fast >"$work/package-$rev.log" 2>&1 \
        || { cat "$work/package-$rev.log"; fail "scripts/package.sh --deb-revision $rev"; }
    deb="$target/debian/vswitch_${version}-${rev}_amd64.deb"
    [ -f "$deb" ] || fail "scripts/package.sh made no $deb"
    cp "$deb" "$work/debs/"
done
deb1="$work/debs/vswitch_${version}-1_amd64.deb"
deb2="$work/debs/vswitch_${version}-2_amd64.deb"
say "built $(basename "$deb1") ($(du -k "$deb1" | cut -f1) KiB); Depends: $(dpkg-deb -f "$deb1" Depends)"

# The container's root: Debian 12 minbase with systemd and exactly the package's
# declared dependencies (first of each alternative), made once per dependency list.
deps=$(dpkg-deb -f "$deb1" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g' | grep -v '^$' | sort -u | tr '\n' ',')
include="systemd,systemd-sysv,${deps%,}"
base="$cache/bookworm-$(echo "$include" | md5sum | cut -c1-12)"
if [ ! -f "$base/.complete" ]; then
    say "debootstrap bookworm (--include=$include) into $base"
    rm -rf "$base"
    mkdir -p "$cache"
    debootstrap --variant=minbase --include="$include" bookworm "$base" \
        http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
    touch "$base/.complete"
fi
root="$work/root"
cp -a "$base" "$root"
rm -f "$root/.complete"

say "booting the container"
# The container gets what a host gives vswitchd and nspawn withholds by default: CAP_BPF,
# CAP_IPC_LOCK and the bpf() system call (AF_XDP), /dev/net/tun (taps).
systemd-nspawn -q -D "$root" --boot --register=no --keep-unit --private-network \
    --capability=CAP_BPF,CAP_IPC_LOCK,CAP_PERFMON --system-call-filter=bpf --bind=/dev/net/tun \
    --console=passive --bind="$work/guests:/srv/guests" --bind-ro="$work/debs:/srv/debs" \
    >"$work/nspawn.log" 2>&1 &
nspawn_pid=$!
leader=""
for _ in $(seq 100); do
    leader=$(pgrep -P "$nspawn_pid" -x systemd || true)
    [ -n "$leader" ] && break
    sleep 0.1
done
[ -n "$leader" ] || { cat "$work/nspawn.log"; fail "the container did not start systemd"; }
# systemctl answers once systemd's private socket exists; then wait for boot to finish.
wait_for 60 in_ct test -S /run/systemd/private || fail "the container's systemd never listened"
state=$(in_ct systemctl is-system-running --wait 2>&1 || true)
case "$state" in running | degraded) ;; *) fail "container systemd is $state" ;; esac

# What the system holds before the install, to compare after the purge (less what
# systemd itself changes meanwhile: its state, logs, agetty's reload flag).
snapshot() {
    in_ct find /etc /usr /var/lib /run /srv -xdev \
        -not -path '/var/lib/dpkg/*' -not -path '/run/systemd/*' -not -path '/var/lib/systemd/*' \
        -not -path '/run/user/*' -not -path '/srv/*/*' -not -path '/etc/ld.so.cache' \
        -not -path '/var/lib/apt/*' -not -path '/run/log/*' -not -path /run/agetty.reload | sort
}
snapshot >"$work/before.txt"

say "installing $(basename "$deb1")"
in_ct env DEBIAN_FRONTEND=noninteractive dpkg -i "/srv/debs/$(basename "$deb1")" </dev/null \
    >"$work/dpkg1.log" 2>&1 || { cat "$work/dpkg1.log"; fail "dpkg -i"; }
in_ct systemctl is-active --quiet vswitchd || { in_ct journalctl -u vswitchd --no-pager | tail -20; fail "vswitchd is not active after the install"; }
in_ct systemctl is-enabled --quiet vswitchd || fail "vswitchd is not enabled"
[ "$(in_ct systemctl show -p Type --value vswitchd)" = notify ] || fail "the unit is not Type=notify"
status=$(in_ct systemctl show -p StatusText --value vswitchd)
say "vswitchd active (READY=1), status: $status"
for f in /usr/sbin/vswitchd /usr/bin/vswitchctl /etc/vswitch/vswitchd.toml \
    /usr/share/man/man8/vswitchd.8.gz /usr/share/man/man8/vswitchctl.8.gz \
    /usr/share/man/man8/vswitchctl-reload.8.gz /usr/share/man/man5/vswitchd.toml.5.gz \
    /usr/share/bash-completion/completions/vswitchctl /usr/share/zsh/vendor-completions/_vswitchctl \
    /usr/share/fish/vendor_completions.d/vswitchctl.fish /usr/lib/systemd/system/vswitchd.service; do
    in_ct test -f "$f" || fail "$f is not installed"
done
in_ct dpkg-query -W -f='${Conffiles}\n' vswitch | grep -q '/etc/vswitch/vswitchd.toml' \
    || fail "/etc/vswitch/vswitchd.toml is not a conffile"
in_ct sh -c 'zcat /usr/share/man/man5/vswitchd.toml.5.gz | grep -q fdb_aging_secs' || fail "vswitchd.toml(5) lacks a key"
if in_ct ldd /usr/sbin/vswitchd | grep -q 'not found'; then
    in_ct ldd /usr/sbin/vswitchd; fail "vswitchd needs a library the package does not depend on"
fi
in_ct vswitchctl show >/dev/null || fail "vswitchctl show"
in_ct journalctl -u vswitchd -o json --no-pager | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
mine = [r for r in rows if r.get("SYSLOG_IDENTIFIER") == "vswitchd"]
assert mine, "no vswitchd entry in the journal"
assert any("PRIORITY" in r and "TARGET" in r for r in mine), "no structured (native journal) entry: %r" % mine[-1]
print("test-package: journal: %d vswitchd entries, e.g. %r" % (len(mine), mine[-1]["MESSAGE"]))
' || fail "journalctl -u vswitchd"

# 2. A guest: DPDK testpmd on the host, two virtio-user ports in server mode (vswitchd
# connects, and reconnects after it restarts), as two processes: guest a transmits to
# guest b's MAC without pause (txonly), guest b receives (rxonly).
say "attaching a guest (testpmd, two client-mode ports added by editing the config)"
mkfifo "$work/testpmd.in"
exec 7<>"$work/testpmd.in"
testpmd() { # PREFIX SOCKET MAC ARGS...
    local prefix=$1 sock=$2 mac=$3; shift 3
    dpdk-testpmd -l 0,1 --main-lcore 0 -m 256 --no-pci --file-prefix="$prefix" \
        --single-file-segments --vdev "net_virtio_user0,path=$sock,server=1,mac=$mac" \
        -- --nb-cores=1 --total-num-mbufs=16384 "$@" <&7 >"$work/$prefix.log" 2>&1 &
}
testpmd vspkgb "$work/guests/b.sock" 02:00:00:00:00:0b --forward-mode=rxonly
testpmd_pid="$!"
testpmd vspkga "$work/guests/a.sock" 02:00:00:00:00:0a --forward-mode=txonly --eth-peer=0,02:00:00:00:00:0b
testpmd_pid="$testpmd_pid $!"
wait_for 20 test -S "$work/guests/a.sock" -a -S "$work/guests/b.sock" \
    || { cat "$work"/vspkg*.log; fail "testpmd did not listen"; }
in_ct sh -c 'cat >> /etc/vswitch/vswitchd.toml' <<'TOML'

[[port]]
name = "guest-a"
type = "vhost-user-client"
path = "/srv/guests/a.sock"

[[port]]
name = "guest-b"
type = "vhost-user-client"
path = "/srv/guests/b.sock"
TOML
in_ct systemctl reload vswitchd || { in_ct journalctl -u vswitchd --no-pager | tail; fail "systemctl reload vswitchd"; }

# Frames crossed: taken from guest a (its port's rx) and delivered to guest b (tx).
crossing() {
    in_ct vswitchctl stats --json | python3 -c '
import json, sys
rows = {r["port"]: r for r in json.load(sys.stdin)}
a, b = rows["guest-a"], rows["guest-b"]
print("guest-a rx %d, guest-b tx %d" % (a["rx_packets"], b["tx_packets"]))
sys.exit(0 if min(a["rx_packets"], b["tx_packets"]) > 1000 else 1)'
}
wait_for 30 crossing || { crossing; tail -20 "$work"/vspkg*.log; fail "no frames crossed after the reload"; }
say "frames cross: $(crossing)"
in_ct journalctl -u vswitchd -o json --no-pager | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
r = [r for r in rows if r.get("MESSAGE") == "configuration reloaded"]
assert r and "F_REPLY" in r[-1] and "guest-a" in r[-1]["F_REPLY"], "no reload entry with its fields"
print("test-package: journal: the reload, with its fields: F_REPLY=%s" % r[-1]["F_REPLY"][:100])
' || fail "the reload is not in the journal with its fields"

# An AF_XDP uplink (a veth in the container's own network namespace, made with the host's
# ip) and a tap, under the unit's hardening.
nsenter -t "$leader" -n ip link add vx0 type veth peer name vx1
nsenter -t "$leader" -n ip link set vx0 up
nsenter -t "$leader" -n ip link set vx1 up
in_ct sh -c 'cat >> /etc/vswitch/vswitchd.toml' <<'TOML'

[[uplink]]
name = "up0"
iface = "vx0"

[[tap]]
name = "host"
ifname = "vs-host"
TOML
in_ct systemctl reload vswitchd || { in_ct journalctl -u vswitchd --no-pager | tail; fail "reload with an uplink and a tap"; }
uplink_and_tap() {
    local show
    show=$(in_ct vswitchctl show)
    grep -qE 'afxdp: iface vx0 +mode (native-copy|generic)' <<<"$show" && grep -q 'iface: vs-host' <<<"$show"
}
uplink_and_tap || { in_ct vswitchctl show; fail "the uplink or the tap is missing"; }
say "an AF_XDP uplink and a tap run under the unit: $(in_ct vswitchctl show | grep -o 'afxdp: iface vx0 *mode [a-z-]*')"

# A broken edit: the reload fails, names the field, and changes nothing.
in_ct cp /etc/vswitch/vswitchd.toml /etc/vswitch/vswitchd.toml.good
in_ct sed -i '1i fdb_aging_secs = "soon"' /etc/vswitch/vswitchd.toml
if in_ct vswitchctl reload >"$work/bad-reload.txt" 2>&1; then fail "a broken file reloaded"; fi
grep -q fdb_aging_secs "$work/bad-reload.txt" || { cat "$work/bad-reload.txt"; fail "the reload error does not name the field"; }
in_ct systemctl is-active --quiet vswitchd || fail "a broken reload stopped vswitchd"
in_ct mv /etc/vswitch/vswitchd.toml.good /etc/vswitch/vswitchd.toml
say "a broken edit is refused: $(head -1 "$work/bad-reload.txt")"

# 3. Upgrade: the service restarts under the guest, which reconnects.
pid1=$(in_ct systemctl show -p MainPID --value vswitchd)
say "upgrading to $(basename "$deb2")"
in_ct env DEBIAN_FRONTEND=noninteractive dpkg -i "/srv/debs/$(basename "$deb2")" </dev/null \
    >"$work/dpkg2.log" 2>&1 || { cat "$work/dpkg2.log"; fail "dpkg -i (upgrade)"; }
pid2=$(in_ct systemctl show -p MainPID --value vswitchd)
[ "$pid2" != "$pid1" ] && [ "$pid2" != 0 ] || fail "the upgrade did not restart vswitchd ($pid1 -> $pid2)"
in_ct grep -q guest-a /etc/vswitch/vswitchd.toml || fail "the upgrade replaced the edited conffile"
[ "$(in_ct dpkg-query -W -f='${Version}' vswitch)" = "${version}-2" ] || fail "not upgraded"
uplink_and_tap || { in_ct vswitchctl show; fail "the uplink or the tap did not come back after the upgrade"; }
wait_for 30 crossing || { crossing; fail "the guest did not reconnect after the upgrade"; }
say "upgraded (vswitchd pid $pid1 -> $pid2), conffile kept, frames cross again: $(crossing)"
kill $testpmd_pid; wait $testpmd_pid 2>/dev/null || true; testpmd_pid=""

# 4. Purge: nothing left behind.
in_ct env DEBIAN_FRONTEND=noninteractive dpkg --purge vswitch </dev/null >"$work/purge.log" 2>&1 \
    || { cat "$work/purge.log"; fail "dpkg --purge"; }
in_ct systemctl daemon-reload
if in_ct systemctl list-unit-files vswitchd.service | grep -q vswitchd; then fail "the unit is still known"; fi
snapshot >"$work/after.txt"
if ! diff -u "$work/before.txt" "$work/after.txt" >"$work/left.diff"; then
    cat "$work/left.diff"; fail "the purge left files behind (or removed others)"
fi
say "purged: nothing left behind"
echo "test-package: 1 passed, 0 failed"
