#!/usr/bin/env bash
# Renders the documentation (docs/, book.toml) as a book with mdbook into target/book/
# (or $CARGO_TARGET_DIR/book/); open target/book/index.html. Fails when a page listed
# in docs/SUMMARY.md is missing or mdbook reports an error. mdbook comes from
# scripts/setup.sh (cargo install --locked, a pinned version).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v mdbook >/dev/null; then
    echo "docs.sh: mdbook is missing; run scripts/setup.sh (as root) first" >&2
    exit 2
fi
out="$(realpath -m "${CARGO_TARGET_DIR:-target}")/book"
rm -rf "$out"
mdbook build --dest-dir "$out" . 2>&1 | tee "$out.log"
if grep -E '^(ERROR|WARN)|\[(ERROR|WARN)\]| ERROR | WARN ' "$out.log"; then
    echo "docs.sh: mdbook reported problems (above)" >&2
    exit 1
fi
pages=$(grep -oE '\(([a-z0-9/_.-]+)\.md\)' docs/SUMMARY.md | tr -d '()' | sed 's/\.md$/.html/')
for p in $pages; do
    [ -f "$out/$p" ] || { echo "docs.sh: $out/$p was not rendered" >&2; exit 1; }
done
echo "docs.sh: the book is in $out ($(echo "$pages" | wc -w) pages)"
