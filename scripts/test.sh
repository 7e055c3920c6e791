#!/usr/bin/env bash
# Everything CI checks: installs what is missing, then formatting, lints, the API docs'
# links, all tests (unit, property, and integration tests against real DPDK testpmd
# guests), the docs' commands and the book, and the Debian package in a booted
# container.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo doc (every intra-doc link resolves, none to a private item)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== cargo test"
cargo test --workspace --no-fail-fast
echo "== docs: the pages' commands (scripts/test-docs.sh)"
scripts/test-docs.sh
echo "== docs: the book (scripts/docs.sh)"
scripts/docs.sh
echo "== the Debian package (scripts/test-package.sh)"
scripts/test-package.sh
