#!/usr/bin/env bash
# Builds vswitch's tiny Linux test guest from Debian packages, without installing a
# kernel on the host:
#   OUT/vmlinux        the uncompressed kernel of Debian's current linux-image-6.1.0-*-amd64,
#                      booted by QEMU through its PVH entry (-kernel vmlinux): no xz
#                      decompression under TCG emulation
#   OUT/initrd.cpio.gz busybox-static, the virtio-net modules, tests/vm/init.sh as /init
#                      and vmtool (tests/vm/vmtool.rs and rr.rs, a static bulk-TCP and
#                      request/response program)
#   OUT/kernel-version the Debian kernel version the guest was built from
#
# Usage: tests/vm/build-guest.sh [OUT]   (default OUT: target/vm)
# Idempotent: reuses the downloaded kernel; rebuilds the initrd when its sources change.
# Needs: apt-get, dpkg, xz, cpio, gzip, busybox-static, rustc (scripts/setup.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../target/vm}
mkdir -p "$out"
out=$(cd "$out" && pwd)

die() { echo "build-guest.sh: $*" >&2; exit 1; }
# (grep reads the whole list: with pipefail, `grep -q` quitting early can fail the pipe
# through busybox's SIGPIPE.)
[ -x /bin/busybox ] && /bin/busybox --list | grep -x insmod >/dev/null || die "busybox-static missing (apt-get install busybox-static)"
command -v cpio >/dev/null || die "cpio missing (apt-get install cpio)"
if ! command -v rustc >/dev/null; then
    [ -x "$HOME/.cargo/bin/rustc" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v rustc >/dev/null || die "rustc missing"

# 1. The kernel package: the newest linux-image-6.1.0-N-amd64 apt knows.
pick() { apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | cut -d' ' -f1 | sort -V | tail -1; }
pkg=$(pick)
if [ -z "$pkg" ]; then
    apt-get update -qq
    pkg=$(pick)
fi
[ -n "$pkg" ] || die "no linux-image-6.1.0-*-amd64 package in the apt sources"
kver=${pkg#linux-image-}
kdir=$out/kernel-$kver
if [ ! -f "$kdir/vmlinux" ]; then
    rm -rf "$kdir.tmp" && mkdir -p "$kdir.tmp"
    (cd "$kdir.tmp" && apt-get download "$pkg" >&2 2>/dev/null) || die "apt-get download $pkg failed"
    dpkg -x "$kdir.tmp"/*.deb "$kdir.tmp/x"
    bz=$kdir.tmp/x/boot/vmlinuz-$kver
    # The bzImage's payload is xz-compressed (CONFIG_KERNEL_XZ): decompress from the
    # xz magic on; xz complains about the trailing bytes after the stream.
    off=$(grep -abo $'\xfd7zXZ' "$bz" | head -1 | cut -d: -f1)
    [ -n "$off" ] || die "$bz: no xz stream found"
    tail -c +$((off + 1)) "$bz" | xz -dc > "$kdir.tmp/vmlinux" 2>/dev/null || true
    file_magic=$(head -c 4 "$kdir.tmp/vmlinux" | od -An -tx1 | tr -d ' ')
    [ "$file_magic" = 7f454c46 ] || die "$bz: decompressed payload is not an ELF vmlinux"
    mkdir -p "$kdir.tmp/modules"
    for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
             failover net_failover virtio_net; do
        f=$(find "$kdir.tmp/x/lib/modules/$kver" -name "$m.ko*" | head -1)
        [ -n "$f" ] || die "module $m not found in $pkg"
        case "$f" in
            *.ko.xz) xz -dc "$f" > "$kdir.tmp/modules/$m.ko" ;;
            *.ko.zst) zstd -qdc "$f" > "$kdir.tmp/modules/$m.ko" ;;
            *) cp "$f" "$kdir.tmp/modules/$m.ko" ;;
        esac
    done
    rm -rf "$kdir.tmp/x" "$kdir.tmp"/*.deb "$kdir"
    mv "$kdir.tmp" "$kdir"
fi

# 2. vmtool, static (glibc static-pie; std only).
stamp=$(cat "$here"/*.rs "$here/init.sh" "$0" /bin/busybox | sha256sum | cut -c1-16)
if [ ! -f "$out/initrd.cpio.gz" ] || [ "$(cat "$out/initrd.stamp" 2>/dev/null)" != "$kver-$stamp" ]; then
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,lib/modules}
    rustc --edition 2021 -O -C target-feature=+crt-static -C strip=symbols \
        "$here/vmtool.rs" -o "$root/bin/vmtool"
    cp /bin/busybox "$root/bin/busybox"
    cp "$kdir"/modules/*.ko "$root/lib/modules/"
    cp "$here/init.sh" "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initrd.cpio.gz.tmp"
    mv "$out/initrd.cpio.gz.tmp" "$out/initrd.cpio.gz"
    echo "$kver-$stamp" > "$out/initrd.stamp"
fi
ln -sfn "kernel-$kver/vmlinux" "$out/vmlinux"
echo "$kver" > "$out/kernel-version"
echo "$out"
