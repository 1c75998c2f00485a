#!/usr/bin/env bash
# Builds the ccp_agent wheel (algorithms/python/package, maturin, abi3) and runs its pytest
# suite against it in a virtual environment kept outside the clone. Called by ./test.sh;
# CCP_PYTHON_VENV moves the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${CCP_PYTHON_VENV:-$HOME/.cache/ccp-agent/venv}"
MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
if [ ! -x "$VENV/bin/maturin" ] || ! "$VENV/bin/maturin" --version | grep -q " $MATURIN_VERSION\$"; then
    echo "python-package: creating $VENV with maturin $MATURIN_VERSION and pytest $PYTEST_VERSION"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION"
fi
# Its own target directory: maturin builds pyo3 as an extension module, which the workspace's
# embedding build must not share.
out=target/wheels
rm -rf "$out"
"$VENV/bin/maturin" build --quiet --locked -m algorithms/python/package/Cargo.toml \
    --interpreter "$VENV/bin/python" --target-dir target/maturin --out "$out"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$out"/ccp_agent-*.whl
"$VENV/bin/python" -m pytest -q algorithms/python/package/tests
