#!/usr/bin/env bash
# Installs the peers (bench/install-peers.sh: nginx + nchan, wrk, datasette), builds the release binaries and
# runs every osds benchmark once; the output also goes to $target/bench-last-run.txt. Arguments go to osds-bench
# (default `all`; e.g. `bench/run.sh --seconds 20 ingest`, `bench/run.sh --subscribers 1000 fan-out`).
# Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"

bench/install-peers.sh
cargo build --release -p osds -p osds-bench

out="$target/bench-last-run.txt"
{
    echo "# osds-bench run, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- host components 2>/dev/null || echo " (host/components modified in the working tree)")"
    echo "# nproc: $(nproc)"
    echo "# memory: $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
    echo "# disk: $(df -h /work 2>/dev/null | awk 'NR==2 {print $1 " " $2 " (" $5 " used)"}')"
    echo "# open files: soft $(ulimit -Sn), hard $(ulimit -Hn)"
    echo "# $(rustc --version)"
    echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    # The 1M-version archive of `query` is written once into the temp dir and reused by later runs.
    if [ $# -eq 0 ]; then set -- --reuse-archive all; fi
    "$target/release/osds-bench" --osds "$target/release/osds" "$@"
} 2>&1 | tee "$out"
echo "written to $out"
