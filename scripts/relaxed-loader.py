#!/usr/bin/env python3
"""Makes trunk's loader in index.html choose between the page's two wasm builds (see
scripts/relaxed-build.sh): the relaxed-SIMD one where `WebAssembly.validate` accepts a module with
a relaxed-SIMD instruction, else the simd128 one. The address chosen goes on <html data-wasm> for
the web workers. The preload of the simd128 wasm is dropped: where the relaxed build is chosen it
would download a file the page never runs.

Usage: relaxed-loader.py DIST/index.html STEM   (STEM: headlab-HASH, the wasm's name before _bg.wasm)
"""
import re
import sys

path, stem = sys.argv[1], sys.argv[2]
html = open(path, encoding="utf-8").read()
# A module whose one function uses i8x16.relaxed_swizzle: valid only where relaxed SIMD is.
RELAXED = "0,97,115,109,1,0,0,0,1,5,1,96,0,1,123,3,2,1,0,10,15,1,13,0,65,0,253,15,65,0,253,15,253,128,2,11"
call = re.compile(r"const wasm = await init\(\{ module_or_path: '([^']*)" + re.escape(stem) + r"_bg\.wasm' \}\);")
found = call.findall(html)
if len(found) != 1:
    sys.exit(f"relaxed-loader.py: expected trunk's one init call for {stem} in {path}, found {len(found)}")
prefix = found[0]
loader = (
    f"const relaxedSimd = WebAssembly.validate(new Uint8Array([{RELAXED}]));\n"
    f"const wasmPath = relaxedSimd ? '{prefix}{stem}-relaxed_bg.wasm' : '{prefix}{stem}_bg.wasm';\n"
    "document.documentElement.dataset.wasm = wasmPath;\n"
    "const wasm = await init({ module_or_path: wasmPath });"
)
html = call.sub(lambda _: loader, html)
preload = re.compile(r'<link rel="preload" href="' + re.escape(prefix + stem) + r'_bg\.wasm"[^>]*>\s*')
html, dropped = preload.subn("", html)
if dropped != 1:
    sys.exit(f"relaxed-loader.py: expected one preload of {stem}_bg.wasm in {path}, found {dropped}")
open(path, "w", encoding="utf-8").write(html)
print(f"relaxed-loader.py: {path} loads {stem}-relaxed_bg.wasm where relaxed SIMD validates, else {stem}_bg.wasm")
