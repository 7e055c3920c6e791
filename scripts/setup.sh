#!/usr/bin/env bash
# Installs what vswitch's demo, tests and benchmarks need on Debian 12, as root:
# Debian packages, hugepages and hugetlbfs, and the packaging and docs tools (cargo-deb,
# mdbook). Idempotent; safe to run again.
#   scripts/setup.sh          packages for the demo and the tests
#   scripts/setup.sh --bench  also Open vSwitch with DPDK, perf, iperf3 and QEMU, for the
#                             benchmark scripts
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: run as root (it installs packages and reserves hugepages)" >&2
    exit 2
fi

# libbpf-dev: vswitchd links Debian's libbpf to load its XDP program (AF_XDP uplinks);
# iputils-ping and python3: the AF_XDP and tap tests ping and move TCP through namespaces;
# openvswitch-switch: the overlay's interop test runs OVS's userspace Geneve as a peer;
# the ovsdb_config tests and docs/ovsdb.md run its ovsdb-server, ovsdb-tool, ovs-vsctl
# and vswitch.ovsschema for vswitchd --ovsdb (ovs-vswitchd is never started);
# python3-os-vif: those tests plug vhost-user VIFs through os-vif as OpenStack Nova does;
# fonts-dejavu-core: the bench-report crate embeds DejaVuSans.ttf for its PNG plots' text;
# ovn-central, ovn-host: the OVN tests run the real NB/SB ovsdb-servers, ovn-northd and an
# ovn-controller chassis beside vswitchd's (none of their services is started);
# debootstrap, systemd-container: the package test boots a clean Debian 12 in a container
# (systemd-nspawn); dpkg-dev (dpkg-shlibdeps) and binutils (objcopy): cargo-deb computes
# the package's Depends and splits its debug symbols; curl: the docs' metrics example.
pkgs=(dpdk dpdk-dev python3-scapy tshark tcpdump ethtool iproute2 util-linux coreutils procps
      busybox-static cpio xz-utils
      libbpf-dev pkg-config iputils-ping python3 openvswitch-switch fonts-dejavu-core
      ovn-central ovn-host debootstrap systemd-container dpkg-dev binutils curl
      python3-os-vif)
if [ "${1:-}" = "--bench" ]; then
    pkgs+=(openvswitch-switch-dpdk linux-perf iperf3 qemu-system-x86)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
    apt-get update -qq
    # The tests and benchmarks start their own OVS (and iperf3) in namespaces; the
    # packages' system services are not wanted, so none starts during the install.
    norc=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        norc=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    if [ -n "$norc" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

# QEMU for the test guests, 8 or newer: Debian 12's QEMU 7.2 corrupts TCG guests across
# live migrations (their page allocator, even with QEMU's own virtio-net and no vswitchd;
# docs/live-changes.md, "Live migration"), so on Debian 12 it comes from bookworm-backports (QEMU 10),
# and so does libvirt (11.3, which matches that QEMU) for the libvirt tests (libvirt.rs,
# and ovsdb_config.rs's virsh domifstat).
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
qemu_ok() {
    local v
    installed qemu-system-x86 || return 1
    v=$(dpkg-query -W -f='${Version}' qemu-system-x86)
    dpkg --compare-versions "$v" ge 1:8
}
libvirt_ok() { installed libvirt-daemon-system && installed libvirt-clients; }
if ! qemu_ok || ! libvirt_ok; then
    . /etc/os-release
    target=()
    if [ "${VERSION_CODENAME:-}" = bookworm ]; then
        echo "deb http://deb.debian.org/debian bookworm-backports main" \
            > /etc/apt/sources.list.d/vswitch-bookworm-backports.list
        target=(-t bookworm-backports)
    fi
    echo "setup.sh: installing qemu-system-x86 libvirt-daemon-system libvirt-clients ${target[*]}"
    apt-get update -qq
    # libvirtd and virtlogd are not started as services: the libvirt test starts them.
    norc=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        norc=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${target[@]}" \
        qemu-system-x86 libvirt-daemon-system libvirt-clients >/dev/null
    if [ -n "$norc" ]; then rm -f /usr/sbin/policy-rc.d; fi
    qemu_ok || { echo "setup.sh: qemu-system-x86 is $(dpkg-query -W -f='${Version}' qemu-system-x86); 8 or newer needed" >&2; exit 1; }
fi

# Rust: the machine's rustup toolchain, with rustfmt and clippy.
if ! command -v cargo >/dev/null; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null || { echo "setup.sh: cargo not found; install Rust (rustup) first" >&2; exit 2; }
for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$c" >/dev/null 2>&1 || { echo "setup.sh: cargo $c missing and rustup could not add it" >&2; exit 2; }
    fi
done

# The Debian package and the book: cargo-deb builds the .deb (scripts/package.sh),
# mdbook renders docs/ (scripts/docs.sh). Debian 12 packages neither, so both come from
# crates.io, compiled once (a few minutes on 2 cores) at pinned versions.
cargo_tool() {
    local crate=$1 version=$2 probe=$3
    if ! $probe 2>/dev/null | grep -qF "$version"; then
        echo "setup.sh: cargo install --locked $crate@$version"
        cargo install --locked --quiet "$crate" --version "$version" \
            || { echo "setup.sh: cargo install $crate failed" >&2; exit 1; }
    fi
}
export PATH="$HOME/.cargo/bin:$PATH"
cargo_tool cargo-deb 3.8.0 "cargo deb --version"
cargo_tool mdbook 0.5.4 "mdbook --version"

# 2 MiB hugepages for DPDK guests (testpmd needs ~256 MiB each).
want=1024
have=$(cat /proc/sys/vm/nr_hugepages)
if [ "$have" -lt "$want" ]; then
    echo "$want" > /proc/sys/vm/nr_hugepages
fi
if ! grep -q hugetlbfs /proc/mounts; then
    mkdir -p /dev/hugepages
    mount -t hugetlbfs nodev /dev/hugepages
fi
got=$(cat /proc/sys/vm/nr_hugepages)
if [ "$got" -lt 512 ]; then
    echo "setup.sh: only $got hugepages could be reserved (wanted $want); memory too fragmented?" >&2
    exit 1
fi
