#!/usr/bin/env bash
# Makes the random checkpoints the loader's and the decoder's tests read (tests/reference/
# checkpoints.py: BERT, DistilBERT, bf16 shards, a BERT-base-shaped one; tests/reference/
# decoders.py: GPT-2 with odd sizes, in F16 with a tokenizer.json, a GPT-2-small-shaped one, a
# GPT-2-Large-shaped one of 1.5 GB that the end-to-end tests load once; about 1.9 GB, made in
# about a minute and a half) with their float64 references, into target/checkpoints, unless the scripts that
# make them are unchanged since they were made.
# Prints the directory. Needs the venv scripts/install-tools.sh test makes.
#   scripts/make-checkpoints.sh          the tests' folders
#   scripts/make-checkpoints.sh large    a BERT-large-shaped folder (670 MB, for bench/load.mjs)
#                                        and gpt2-medium-, gpt2-large- and gpt2-xl-shaped ones
#                                        (710 MB, 1.5 GB, 3.1 GB; a few minutes and about 8 GB
#                                        of memory) into target/checkpoints-large
#   scripts/make-checkpoints.sh bench    a GPT-2-small-shaped folder with GPT-2's whole
#                                        vocabulary (250 MB, for bench/decoder-speed.mjs) into
#                                        target/checkpoints-bench
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
which=${1:-tests}
out=target/checkpoints
[ "$which" = large ] && out=target/checkpoints-large
[ "$which" = bench ] && out=target/checkpoints-bench
# The decoders' references include the perplexity on the text set (scripts/fetch-texts.sh).
HEADLAB_TEXTS_CHAPTERS=$(scripts/fetch-texts.sh)
export HEADLAB_TEXTS_CHAPTERS
stamp=$(cat tests/reference/checkpoints.py tests/reference/decoders.py scripts/fetch-texts.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.made-by" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$out"
  mkdir -p "$out"
  [ "$which" = bench ] || "$TOOLS_DIR/venv/bin/python" tests/reference/checkpoints.py "$out" "$which" >&2
  "$TOOLS_DIR/venv/bin/python" tests/reference/decoders.py "$out" "$which" >&2
  echo "$stamp" > "$out/.made-by"
fi
echo "$PWD/$out"
