#!/usr/bin/env bash
# Creates (once) a Python virtual environment with Ray RLlib, Gymnasium and
# Stable-Baselines3 at the versions in requirements.txt, then runs the
# reference harness with the given arguments:
#
#   bash benches/reference/run.sh --out benches/reference/results/reference.json
#
# The venv lives in $RLX_REFERENCE_VENV (default: benches/reference/.venv,
# ignored by git). The installs take a few GB (torch) and several minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${RLX_REFERENCE_VENV:-$here/.venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import ray, gymnasium, stable_baselines3, psutil" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet -r "$here/requirements.txt"
fi
exec "$venv/bin/python" "$here/harness.py" "$@"
