#!/usr/bin/env bash
# Trunk post-build hook (run before csp.py, in one hook: trunk runs hooks at once): adds the relaxed-SIMD build of the page's wasm and makes
# the loader pick it where the browser has relaxed SIMD.
#
# The page's wasm is built for simd128; a second build with `+relaxed-simd` runs the matrix
# product's micro-kernel on `f32x4.relaxed_madd` (src/cpu/packed.rs), 16-19 % faster in headless
# Chromium on this project's machine (BENCHMARKS.md, `node bench/relaxed.mjs`). Both builds come
# from the same source, so wasm-bindgen writes the same JavaScript glue for them: this checks that
# it does, and the one glue loads either wasm. The loader (trunk's inline module script) asks
# `WebAssembly.validate` whether the browser takes a relaxed-SIMD instruction and loads
# `headlab-HASH-relaxed_bg.wasm` or trunk's own `headlab-HASH_bg.wasm`; it writes the address it
# chose on <html data-wasm>, where the page's web workers find it (src/ui/pool.rs), so they run
# the same build and give the same numbers.
#
# Debug builds (`scripts/serve.sh --debug`) keep the simd128 build alone.
set -euo pipefail
cd "$(dirname "$0")/.."
staging=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook}
if [ "${TRUNK_PROFILE:-release}" != release ]; then
  echo "relaxed-build.sh: debug build, simd128 only"
  exit 0
fi
plain=$(cd "$staging" && ls headlab-*_bg.wasm | grep -v -- -relaxed_bg.wasm)
stem=${plain%_bg.wasm}
out=target/relaxed
RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" cargo build --quiet --locked --release \
  --target wasm32-unknown-unknown --bin headlab --target-dir "$out"
# As trunk runs it (out-name headlab: the names the wasm imports its glue by), then renamed.
wasm-bindgen --target web --no-typescript --out-dir "$out/bindgen" --out-name headlab \
  "$out/wasm32-unknown-unknown/release/headlab.wasm"
if ! diff -q "$out/bindgen/headlab.js" "$staging/$stem.js" >/dev/null; then
  echo "relaxed-build.sh: the relaxed-SIMD build's JavaScript glue differs from the page's; refusing to ship it" >&2
  exit 1
fi
wasm-opt -O3 "$out/bindgen/headlab_bg.wasm" -o "$staging/$stem-relaxed_bg.wasm"
if ! wasm-opt "$staging/$stem-relaxed_bg.wasm" --print-features 2>/dev/null | grep -q -- --enable-relaxed-simd; then
  echo "relaxed-build.sh: the relaxed build has no relaxed-SIMD feature" >&2
  exit 1
fi
python3 scripts/relaxed-loader.py "$staging/index.html" "$stem"
