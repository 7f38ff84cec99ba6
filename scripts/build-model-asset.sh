#!/usr/bin/env bash
# Builds the page's data: the trained-model asset (target/model/minilm-f16.bin) from the
# checksum-verified checkpoint, unless it is already there, the sentence pairs
# (target/model/sts-pairs.tsv) and a decoder's text set (target/model/moby-dick.txt). Run by
# serve.sh and test.sh before the tests and trunk.
set -euo pipefail
cd "$(dirname "$0")/.."
# The converter runs in the test profile (optimised, no LTO): scripts/test.sh has built it there
# for the native tests already, and a fat-LTO release build of the library for a converter that
# runs for seconds would cost a minute or more.
convert() { cargo run --quiet --locked --profile test --bin convert-model -- "$@"; }
out=target/model/minilm-f16.bin
model=$(scripts/fetch-model.sh)
# The page accepts only the asset whose SHA-256 is built into it (src/model/load/model_file.rs): one made
# by another version of the converter is made again.
want=$(sed -n 's/^pub const ASSET_SHA256: &str = "\([0-9a-f]*\)";/\1/p' src/model/load/model_file.rs)
if [ ! -s "$out" ] || [ "$(sha256sum "$out" | cut -d' ' -f1)" != "$want" ]; then
  convert --built-in "$model" "$out"
fi
got=$(sha256sum "$out" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "build-model-asset.sh: $out has SHA-256 $got, the page expects $want" >&2; exit 1; }
# The model card (licence Apache-2.0) ships with the page.
cp "$model/README.md" target/model/MODEL-CARD.md

# make_checked FLAG SOURCE OUT CONST FILE: the page's data file OUT from SOURCE
# (`convert-model FLAG`), checked against the SHA-256 that FILE builds into the page as CONST.
make_checked() {
  local flag=$1 source=$2 out=$3 const=$4 file=$5 want got
  convert "$flag" "$source" "$out"
  want=$(sed -n "s/^pub const $const: &str = \"\([0-9a-f]*\)\";/\1/p" "$file")
  got=$(sha256sum "$out" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "build-model-asset.sh: $out has SHA-256 $got, the page expects $want" >&2; exit 1; }
}

# The sentence pairs the page measures pruning on: every sixth pair of the STS Benchmark's test
# split (230 pairs, all three genres; src/model/encoder/task.rs, select). Checked against the SHA-256
# built into the page, as the model is.
make_checked --pairs "$(scripts/fetch-pairs.sh)" target/model/sts-pairs.tsv PAIRS_SHA256 src/model/encoder/task.rs

# The text set a decoder's perplexity is measured on: a passage of every fourth chapter of
# Moby-Dick (public domain; src/model/decoder/texts.rs, select), checked as the pairs are.
make_checked --texts "$(scripts/fetch-texts.sh)" target/model/moby-dick.txt TEXTS_SHA256 src/model/decoder/texts.rs
