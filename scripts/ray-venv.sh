#!/usr/bin/env bash
# Creates the virtual environment `ccp-sim sweep --executor ray` and its test (sim/tests/sweep_ray.rs)
# run Ray from, kept outside the clone, and prints its python's path on the last line. Called by
# ./test.sh, which exports that path as CCP_SIM_PYTHON; safe to run by hand. CCP_SIM_RAY_VENV moves
# the environment.
#
# Ray is pinned: a driver and the cluster it joins must run the same Ray (and the same Python
# minor version). `ray[client]` brings grpcio for `--address ray://HOST:PORT`.
set -euo pipefail

VENV="${CCP_SIM_RAY_VENV:-$HOME/.cache/ccp-agent/ray-venv}"
RAY_VERSION=2.60.0
if [ ! -x "$VENV/bin/python" ] \
    || [ "$("$VENV/bin/python" -c 'import ray; print(ray.__version__)' 2>/dev/null)" != "$RAY_VERSION" ]; then
    echo "ray-venv: creating $VENV with ray $RAY_VERSION" >&2
    t0=$(date +%s)
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "ray[client]==$RAY_VERSION" >&2
    echo "ray-venv: installed in $(($(date +%s) - t0)) s" >&2
fi
echo "$VENV/bin/python"
