#!/usr/bin/env bash
# Makes the random checkpoints the loader's tests read (tests/reference/checkpoints.py: BERT,
# DistilBERT, bf16 shards, a BERT-base-shaped one; about 175 MB) with their float64 references,
# into target/checkpoints, unless the script that makes them is unchanged since they were made.
# Prints the directory. Needs the venv scripts/install-tools.sh test makes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
out=target/checkpoints
stamp=$(sha256sum tests/reference/checkpoints.py | cut -d' ' -f1)
if [ "$(cat "$out/.made-by" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$out"
  mkdir -p "$out"
  "$TOOLS_DIR/venv/bin/python" tests/reference/checkpoints.py "$out" >&2
  echo "$stamp" > "$out/.made-by"
fi
echo "$PWD/$out"
