#!/usr/bin/env bash
# The docs stay true: every ```sh doctest block of README.md and docs/*.md runs, each
# page's blocks in order in one shell (set -euo pipefail), as root, with the workspace's
# vswitchd and vswitchctl first on PATH. A page runs in its own mount, network and PID
# namespaces: /run/vswitch and /etc/vswitch are private tmpfs (the paths the docs show,
# without touching the host's), /sys shows the page's own network namespace, in which
# only loopback is up and interfaces it makes live, and whatever the page started in
# the background ends with it. Blocks that cannot run in CI are marked
# <!-- no-doctest: WHY --> in the page (scripts/lib/doctest.py refuses an sh block that
# is neither). Also checks that relative links between pages resolve.
#   scripts/test-docs.sh [PAGE.md...]     default: README.md docs/*.md
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-target}"
target=$(realpath -m "$target")
pages=("$@")
[ "${#pages[@]}" -gt 0 ] || pages=(README.md docs/*.md)
cargo build -q -p vswitch --bins
work=$(mktemp -d /tmp/vswitch-doctest.XXXXXX)
made=()
for d in /run/vswitch /etc/vswitch; do
    [ -d "$d" ] || { mkdir -p "$d"; made+=("$d"); }
done
cleanup() {
    rm -rf "$work"
    for d in "${made[@]}"; do rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT
if ! python3 scripts/lib/doctest.py "$work/scripts" "${pages[@]}" >"$work/list"; then
    echo "doc-tests: 0 passed, 1 failed (the pages' markup, above)"
    exit 1
fi
mapfile -t scripts <"$work/list"
passed=0
failed=0
for s in "${scripts[@]}"; do
    name=$(basename "$s" .sh)
    mkdir -p "$work/run/$name"
    if timeout 180 unshare --mount --net --pid --fork --mount-proc --propagation private \
        env PATH="$target/debug:$PATH" bash -c '
            set -e
            mount -t tmpfs -o mode=0755 vswitch-run /run/vswitch
            mount -t tmpfs -o mode=0755 vswitch-etc /etc/vswitch
            mount -t sysfs vswitch-sys /sys
            ip link set lo up
            cd "$1"
            bash "$2"' doctest "$work/run/$name" "$s" >"$work/$name.log" 2>&1; then
        echo "doc-test ${name#*-}: ok"
        passed=$((passed + 1))
    else
        echo "doc-test ${name#*-}: FAILED"
        sed 's/^/    /' "$work/$name.log" | tail -40
        failed=$((failed + 1))
    fi
done
echo "doc-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
