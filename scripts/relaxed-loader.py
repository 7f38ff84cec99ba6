#!/usr/bin/env python3
"""Makes trunk's loader in index.html choose between the page's two wasm builds (see
scripts/relaxed-build.sh): the relaxed-SIMD one (headlab-HASH-relaxed.js and its wasm) where
`WebAssembly.validate` accepts a module with a relaxed-SIMD instruction, else the simd128 one
(trunk's headlab-HASH.js and its wasm). The addresses chosen go on <html data-glue data-wasm>
for the web workers. The preload of the simd128 wasm is dropped: where the relaxed build is
chosen it would download a file the page never runs.

Usage: relaxed-loader.py DIST/index.html STEM   (STEM: headlab-HASH, the glue's name before .js)
"""
import re
import sys

path, stem = sys.argv[1], sys.argv[2]
html = open(path, encoding="utf-8").read()
# A module whose one function uses i8x16.relaxed_swizzle: valid only where relaxed SIMD is.
RELAXED = "0,97,115,109,1,0,0,0,1,5,1,96,0,1,123,3,2,1,0,10,15,1,13,0,65,0,253,15,65,0,253,15,253,128,2,11"
loader = re.compile(
    r"import init, \* as bindings from '([^']*)" + re.escape(stem) + r"\.js';\s*"
    r"const wasm = await init\(\{ module_or_path: '\1" + re.escape(stem) + r"_bg\.wasm' \}\);"
)
found = loader.findall(html)
if len(found) != 1:
    sys.exit(f"relaxed-loader.py: expected trunk's one loader for {stem} in {path}, found {len(found)}")
at = found[0] + stem
choose = (
    f"const relaxedSimd = WebAssembly.validate(new Uint8Array([{RELAXED}]));\n"
    f"const [gluePath, wasmPath] = relaxedSimd\n"
    f"  ? ['{at}-relaxed.js', '{at}-relaxed_bg.wasm']\n"
    f"  : ['{at}.js', '{at}_bg.wasm'];\n"
    "document.documentElement.dataset.glue = gluePath;\n"
    "document.documentElement.dataset.wasm = wasmPath;\n"
    "const bindings = await import(gluePath);\n"
    "const wasm = await bindings.default({ module_or_path: wasmPath });"
)
html = loader.sub(lambda _: choose, html)
preload = re.compile(r'<link rel="preload" href="' + re.escape(at) + r'_bg\.wasm"[^>]*>\s*')
html, dropped = preload.subn("", html)
if dropped != 1:
    sys.exit(f"relaxed-loader.py: expected one preload of {stem}_bg.wasm in {path}, found {dropped}")
open(path, "w", encoding="utf-8").write(html)
print(f"relaxed-loader.py: {path} loads {stem}-relaxed.js and its wasm where relaxed SIMD validates, else {stem}.js")
