#!/usr/bin/env bash
# Installs the peers and load generators the benchmarks compare against, printing what it installs:
# - Debian: nginx with the nchan module (libnginx-mod-nchan), wrk;
# - PyPI: datasette, in a virtual environment at $OSDS_BENCH_VENV (default target/bench-venv).
# Idempotent: what is there already is left alone. Runs apt-get as root, or through `sudo -n` when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${OSDS_BENCH_VENV:-${CARGO_TARGET_DIR:-target}/bench-venv}"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        echo "install-peers: need root or passwordless sudo to run: $*" >&2
        return 1
    fi
}

missing=()
[ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || missing+=(nginx libnginx-mod-nchan)
command -v wrk >/dev/null || missing+=(wrk)
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-peers: apt-get install ${missing[*]}"
    as_root apt-get update -qq
    # Keep the package scripts from starting a system nginx on port 80: the benchmark runs its own.
    as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    echo "install-peers: nginx + nchan and wrk present"
fi

if [ ! -x "$venv/bin/datasette" ]; then
    echo "install-peers: python3 -m venv $venv; pip install datasette"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check datasette
else
    echo "install-peers: datasette present in $venv"
fi
echo "install-peers: nginx $(nginx -v 2>&1 | sed 's/.*\///'), nchan $(dpkg-query -W -f='${Version}' libnginx-mod-nchan 2>/dev/null || echo '?'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), datasette $("$venv/bin/datasette" --version | awk '{print $NF}')"
