#!/usr/bin/env bash
# Trunk post-build hook (run before csp.py, in one hook: trunk runs hooks at once): adds the relaxed-SIMD build of the page's wasm and makes
# the loader pick it where the browser has relaxed SIMD.
#
# The page's wasm is built for simd128; a second build with the `relaxed-simd` feature runs the
# matrix product's micro-kernel on `f32x4.relaxed_madd` (src/cpu/packed.rs), 0.66-0.74x the time
# in headless Chromium on this project's machine (BENCHMARKS.md, `node bench/relaxed.mjs`). Each build has its
# wasm-bindgen glue (this checks that they export the same names). The loader (trunk's inline
# module script) asks `WebAssembly.validate` whether the browser takes a relaxed-SIMD instruction
# and imports `headlab-HASH-relaxed.js` with its wasm, or trunk's own pair; it writes the
# addresses it chose on <html data-glue data-wasm>, where the page's web workers find them
# (src/jobs/web/workers.rs), so they run the same build and give the same numbers.
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
# Trunk's target directory (cargo's default, or CARGO_TARGET_DIR where the caller set one).
target=${CARGO_TARGET_DIR:-target}
out=$target/relaxed
# The page's build with the relaxed-simd feature: the same target directory and flags as trunk's,
# so only this crate is compiled again.
cargo build --quiet --locked --release --target wasm32-unknown-unknown --bin headlab --features relaxed-simd
# As trunk runs it (out-name headlab: the module name the wasm imports its glue by). The feature
# changes the crate's symbol hashes, so the glue differs in its closure names: it ships beside the
# wasm as headlab-HASH-relaxed.js, and must export what the page's glue exports.
wasm-bindgen --target web --no-typescript --out-dir "$out/bindgen" --out-name headlab \
  "$target/wasm32-unknown-unknown/release/headlab.wasm"
exports() { grep -oE '^export (async )?(function|class|const|let) [A-Za-z_$][A-Za-z0-9_$]*' "$1" | sort; }
if ! diff <(exports "$out/bindgen/headlab.js") <(exports "$staging/$stem.js") >/dev/null; then
  echo "relaxed-build.sh: the relaxed-SIMD build's glue exports other names than the page's; refusing to ship it" >&2
  exit 1
fi
cp "$out/bindgen/headlab.js" "$staging/$stem-relaxed.js"
# Both builds through wasm-opt -O3 twice at once, one per core (about a minute and a half each;
# trunk's own pass is off in www/index.html, so that its build's does not run alone first). The
# second -O3 takes 4.7 KB more off the gzipped wasm for 24 s (BENCHMARKS.md section 19). The simd128 wasm's
# preload, the one link trunk gave an integrity hash, is dropped by relaxed-loader.py below.
wasm-opt -O3 -O3 "$out/bindgen/headlab_bg.wasm" -o "$staging/$stem-relaxed_bg.wasm" &
relaxed_opt=$!
wasm-opt -O3 -O3 "$staging/$plain" -o "$out/plain_bg.wasm"
wait "$relaxed_opt"
mv "$out/plain_bg.wasm" "$staging/$plain"
if ! wasm-opt "$staging/$stem-relaxed_bg.wasm" --print-features 2>/dev/null | grep -q -- --enable-relaxed-simd; then
  echo "relaxed-build.sh: the relaxed build has no relaxed-SIMD feature" >&2
  exit 1
fi
python3 scripts/relaxed-loader.py "$staging/index.html" "$stem"
