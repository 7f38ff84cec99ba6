#!/usr/bin/env bash
# Installs what is missing, builds the app and serves it on http://127.0.0.1:8080 (Ctrl-C stops).
#   scripts/serve.sh            release build (what readers get)
#   scripts/serve.sh --debug    debug build, faster to compile
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-tools.sh serve
. scripts/env.sh
cargo fetch --quiet
scripts/build-model-asset.sh
release=--release
[ "${1:-}" = --debug ] && release=
echo "headlab: serving on http://127.0.0.1:8080 once the build below finishes"
exec trunk serve $release --offline
