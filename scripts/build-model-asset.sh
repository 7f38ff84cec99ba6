#!/usr/bin/env bash
# Builds the page's trained-model asset (target/model/minilm-f16.bin) from the checksum-verified
# checkpoint, unless it is already there. Run by serve.sh and test.sh before trunk.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/model/minilm-f16.bin
model=$(scripts/fetch-model.sh)
if [ ! -s "$out" ] || [ "$model/model.safetensors" -nt "$out" ]; then
  cargo run --quiet --locked --release --bin convert-model -- "$model" "$out"
fi
# The model card (licence Apache-2.0) ships with the page.
cp "$model/README.md" target/model/MODEL-CARD.md
