#!/usr/bin/env bash
# The peer's conversion tools (bench/peer/requirements.txt) in a venv of their own, made on first
# use and again whenever the requirements change; prints its python. Benchmarks only: CI's bench
# smoke runs on the hand-written graphs and never calls this.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=${HEADLAB_TOOLS_DIR:-$HOME/.cache/headlab-tools}
venv=$tools/peer-venv
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$venv/requirements.sha256" 2>/dev/null)" != "$want" ]; then
  echo "bench/peer/setup.sh: onnxruntime's conversion tools into $venv (once)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements.txt" >&2
  "$venv/bin/python" -c 'import onnx, onnxruntime, onnxslim, optimum.exporters.onnx, torch, transformers' >&2
  echo "$want" > "$venv/requirements.sha256"
fi
echo "$venv/bin/python"
