#!/usr/bin/env bash
# The CPU benchmark, natively and as wasm (simd128) in Node, at BERT-base, n = 128.
#   bench/run.sh [ROUNDS]      (default 15; results go in BENCHMARKS.md by hand, with the date)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
rounds=${1:-15}

echo "## native ($(uname -m), $(nproc) cores visible, single thread)"
cargo bench --quiet --locked --bench mha -- "$rounds"

echo
echo "## wasm32 + simd128 in Node $(node --version)"
# The library as a cdylib for wasm-bindgen's Node target; the app's bin is built by trunk.
cargo rustc --quiet --locked --release --target wasm32-unknown-unknown --lib --crate-type cdylib
wasm-bindgen --target nodejs --out-dir target/bench-node target/wasm32-unknown-unknown/release/headlab.wasm
node bench/node.mjs "$rounds"
