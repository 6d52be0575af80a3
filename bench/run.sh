#!/usr/bin/env bash
# Builds the release binaries and runs every osds benchmark once; the output also goes to
# target/bench-last-run.txt. Arguments go to osds-bench (default `all`; e.g. `bench/run.sh --seconds 20 ingest`).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p osds -p osds-bench

out=target/bench-last-run.txt
{
    echo "# osds-bench run, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- host components 2>/dev/null || echo ' (host/components modified in the working tree)')"
    echo "# nproc: $(nproc)"
    echo "# memory: $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
    echo "# disk: $(df -h /work 2>/dev/null | awk 'NR==2 {print $1 " " $2 " (" $5 " used)"}')"
    echo "# $(rustc --version)"
    if [ $# -eq 0 ]; then set -- all; fi
    target/release/osds-bench --osds target/release/osds "$@"
} 2>&1 | tee "$out"
echo "written to $out"
