#!/usr/bin/env bash
# Builds the ccp_agent wheel (algorithms/python/package, maturin, abi3) and runs its pytest
# suite against it in a virtual environment kept outside the clone. Called by ./test.sh;
# CCP_PYTHON_VENV moves the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${CCP_PYTHON_VENV:-$HOME/.cache/ccp-agent/venv}"
# maturin, pytest, and what the environment and the training example need, every one pinned. The
# environment is kept between runs: it is (re)filled whenever the list differs from what it
# was filled from.
REQUIREMENTS=algorithms/python/package/requirements-test.txt
if [ ! -x "$VENV/bin/python" ]; then
    echo "python-package: creating $VENV"
    /usr/bin/python3 -m venv "$VENV"
fi
if ! cmp -s "$REQUIREMENTS" "$VENV/ccp-requirements.txt"; then
    echo "python-package: installing $REQUIREMENTS into $VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
    cp "$REQUIREMENTS" "$VENV/ccp-requirements.txt"
fi
# Its own target directory: maturin builds pyo3 as an extension module, which the workspace's
# embedding build must not share.
out=target/wheels
rm -rf "$out"
"$VENV/bin/maturin" build --release --quiet --locked -m algorithms/python/package/Cargo.toml \
    --interpreter "$VENV/bin/python" --target-dir target/maturin --out "$out"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$out"/ccp_agent-*.whl
"$VENV/bin/python" -m pytest -q algorithms/python/package/tests
