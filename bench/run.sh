#!/usr/bin/env bash
# The benchmarks: the CPU forward pass and head toggle natively and as wasm (simd128) in Node at
# BERT-base, n = 128, and GPT-3 with generated weights; the wasm forward (both of the page's
# builds, simd128 and relaxed SIMD) against onnxruntime-web in the same Node process; the trained
# model against transformers.js (bench/transformers.mjs, both builds); the attention forward
# against onnxruntime-web in headless Chromium as well (bench/ort.mjs --browser);
# one pass cut across threads (bench/split.mjs); the GPU path per dispatch (timestamp queries)
# on the native adapter; a decoder's pruning curves on the page's thread and on two workers
# (bench/decoder-curves.mjs).
#   bench/run.sh [ROUNDS] [all|smoke]   (default 15 all; results go in BENCHMARKS.md by hand,
#                                        with the date; smoke: BERT-base n = 128 only)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
rounds=${1:-15}
shapes=${2:-all}
# Every table holds only for the CPU it was measured on.
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs) model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)), $(nproc) logical cores; $(date -u +%F)"

# The smoke run proves the benchmarks still run, not their numbers: natively it uses the tests'
# build (opt-level 2, debug assertions; `cargo test` has built every dependency at that profile),
# which saves a fat-LTO release build of every dependency.
native_profile=()
if [ "$shapes" = smoke ]; then
  native_profile=(--profile test)
  echo "(smoke: the native benchmarks run the tests' build, opt-level 2 with debug assertions: not numbers to quote)"
fi
bench() { cargo bench --quiet --locked --features bench "${native_profile[@]}" "$@"; }

echo "## native ($(uname -m), $(nproc) cores visible, single thread)"
bench --bench mha -- "$rounds"

# The library as a cdylib, in both of the page's builds (the app's bin is built by trunk): simd128,
# and relaxed SIMD (the micro-kernel's f32x4.relaxed_madd), each for Node (the benchmarks against
# onnxruntime-web and transformers.js measure both: bench/builds.mjs) and for the browser
# (bench/relaxed.mjs). Node 20 runs relaxed SIMD behind a flag.
wasm=target/wasm32-unknown-unknown/release/headlab.wasm
cargo rustc --quiet --locked --release --features bench --target wasm32-unknown-unknown --lib --crate-type cdylib
wasm-bindgen --target nodejs --out-dir target/bench-node "$wasm"
wasm-bindgen --target web --out-dir target/bench-web/simd128 "$wasm"
cargo rustc --quiet --locked --release --features bench,relaxed-simd --target wasm32-unknown-unknown --lib --crate-type cdylib
wasm-bindgen --target nodejs --out-dir target/bench-node-relaxed "$wasm"
wasm-bindgen --target web --out-dir target/bench-web/relaxed "$wasm"
node_relaxed=(node --experimental-wasm-relaxed-simd)

echo
echo "## wasm32 + simd128 in Node $(node --version)"
node bench/node.mjs "$rounds" "$shapes"

echo
echo "## wasm32 (simd128, and relaxed SIMD) against onnxruntime-web (wasm backend), same process"
"${node_relaxed[@]}" bench/ort.mjs "$rounds" "$shapes"

echo
echo "## the same in one page of headless Chromium (what a reader's browser runs: a newer V8 than Node's)"
node bench/ort.mjs "$rounds" "$shapes" --browser

echo
echo "## one pass cut across threads (worker_threads, no shared memory) against 1 thread and onnxruntime-web on as many"
node bench/split.mjs "$rounds" "$shapes"

echo
echo "## GPU (native adapter: lavapipe here, a real GPU elsewhere)"
bench --bench gpu -- "$rounds" "$shapes"

echo
echo "## the trained model pruned for real: natively, and as wasm in Node"
bench --bench trained -- "$rounds" pruned
"${node_relaxed[@]}" bench/trained.mjs "$rounds" "$shapes"

# The trained model against transformers.js: an ONNX export of the same checkpoint, fp32 and the
# 8-bit form transformers.js loads by default for wasm (target/transformers/), then headlab's
# embedding against its pipeline on both. Its smoke form is a step of its own in scripts/test.sh.
if [ "$shapes" != smoke ]; then
  echo
  echo "## the trained model against transformers.js on onnxruntime-web (wasm backend), same process"
  node bench/onnx-bert.mjs >/dev/null
  "${node_relaxed[@]}" bench/transformers.mjs "$rounds"
  echo
  echo "## a BERT-base-shaped checkpoint (random weights, scripts/make-checkpoints.sh) against transformers.js, 128 tokens"
  "${node_relaxed[@]}" bench/transformers.mjs "$rounds" all --model="$(scripts/make-checkpoints.sh)/bert-base-shaped"
  echo
  echo "## a GPT-2-small-shaped decoder (random weights, GPT-2's vocabulary: scripts/make-checkpoints.sh bench) against transformers.js, 128 tokens"
  "${node_relaxed[@]}" bench/decoder-speed.mjs "$rounds"
fi

echo
echo "## every core: the trained model's batch work in headless Chromium, threads 1 against $(nproc)"
# What is measured is the built page; build it if this checkout has none.
[ -f dist/index.html ] || trunk build --release --offline
if [ "$shapes" = smoke ]; then
  node bench/threads.mjs 1 "$(nproc)" smoke
else
  node bench/threads.mjs "$rounds" "$(nproc)" all
  # The two long jobs' budgets, f16 against 8 bits.
  node bench/threads.mjs "$rounds" "$(nproc)" curve
  node bench/threads.mjs "$rounds" "$(nproc)" sweep
fi

echo
echo "## a decoder's first complete pruning curves: the page's thread against two workers, headless Chromium"
# One round is 15 minutes at GPT-2 small's shape; the smoke form is the tests' 8-head decoder.
if [ "$shapes" = smoke ]; then node bench/decoder-curves.mjs 1 smoke; else node bench/decoder-curves.mjs 1; fi

echo
echo "## relaxed SIMD against simd128 only, side by side in headless Chromium"
# Both builds, made above for the browser.
if [ "$shapes" = smoke ]; then node bench/relaxed.mjs 2 smoke; else node bench/relaxed.mjs "$rounds"; fi

# The 8-bit path against f16 and transformers.js (the export made above) in headless Chromium.
# Its smoke form is a step of its own in scripts/test.sh, after the export.
if [ "$shapes" != smoke ]; then
  echo
  echo "## the 8-bit path against f16 and transformers.js, both builds, side by side in headless Chromium"
  node bench/int8.mjs "$rounds"
  echo
  echo "## the 8-bit path against transformers.js q8, both on two threads (cross-origin isolated page)"
  node bench/int8.mjs "$rounds" threads
  echo
  echo "## where an 8-bit layer's time goes (the relaxed build's products and stages, microsecond clock)"
  node bench/layer-profile.mjs "$rounds"
fi

echo
echo "## the backend per input: the page's measured choice against the CPU kernel and the GPU forced"
if [ "$shapes" = smoke ]; then node bench/backend.mjs 1 smoke; else node bench/backend.mjs 3; fi
