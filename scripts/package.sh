#!/usr/bin/env bash
# Builds the Debian package of vswitch into target/debian/ (or $CARGO_TARGET_DIR/debian/):
#   vswitch_<version>-<revision>_amd64.deb (and its -dbgsym .ddeb) with vswitchd (/usr/sbin), vswitchctl
#   (/usr/bin), the systemd unit vswitchd.service, /etc/vswitch/vswitchd.toml (a
#   conffile), the man pages vswitchd(8), vswitchctl(8) (and one per command),
#   vswitchd.toml(5), and bash/zsh/fish completion. Depends: what dpkg-shlibdeps finds
#   the binaries load.
#
#   scripts/package.sh                    release build, then the package
#   scripts/package.sh --deb-revision 2   the same with another Debian revision (the
#                                         package test upgrades 1 -> 2)
# Arguments are passed to `cargo deb`. Needs cargo-deb (scripts/setup.sh installs it).
# The package layout and the unit are described in crates/vswitch/Cargo.toml
# ([package.metadata.deb]) and crates/vswitch/debian/; docs/install.md says how to use it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo deb --version >/dev/null 2>&1; then
    echo "package.sh: cargo-deb is missing; run scripts/setup.sh (as root) first" >&2
    exit 2
fi
target="${CARGO_TARGET_DIR:-target}"
echo "== cargo build --release (vswitchd, vswitchctl, vswitch-docgen)"
cargo build --release -q -p vswitch --bins -p vswitch-docgen
echo "== man pages and completions -> $target/release/docgen"
rm -rf "$target/release/docgen"
"$target/release/vswitch-docgen" "$target/release/docgen" >/dev/null
# Man pages are installed gzipped (Debian policy); cargo-deb leaves built files as they are.
gzip -9n "$target/release/docgen/man/"*
echo "== cargo deb"
mkdir -p "$target/debian"
# --dbgsym: the binaries are stripped; their debug symbols (the release profile keeps
# line tables) go to vswitch-dbgsym_<version>_amd64.ddeb beside the package.
cargo deb -p vswitch --no-build --dbgsym --output "$target/debian/" "$@"
