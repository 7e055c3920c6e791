#!/usr/bin/env bash
# Soak test: the PVP loop (a DPDK testpmd guest forwarding between ports a and b) for
# MINUTES (default 30) while a second guest reconnects every few seconds (cleanly and by
# kill -9), a port is added and deleted, an ACL rule is added and deleted, and a scraper
# reads /metrics four times a second. vswitchd's RSS, fds and threads are sampled every
# 10 s (printed), must stay flat, and every frame of the loop must be delivered or
# counted. The last line starts with "soak:". The test suite runs a 2-minute version.
#   scripts/soak.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
case "$minutes" in
    ''|*[!0-9]*) echo "soak.sh: MINUTES must be a whole number, got '$minutes'" >&2; exit 2 ;;
esac
scripts/setup.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
SOAK_SECS=$((minutes * 60)) exec cargo test -p vswitch --test soak -- --nocapture
