#!/usr/bin/env python3
"""Trunk post-build hook: gives the built index.html a strict Content-Security-Policy.

trunk writes one inline module script (it loads the wasm); its SHA-256 goes into script-src, so
no other inline script can run. The policy, and why each part is there:

  default-src 'none'                      nothing that is not allowed below
  script-src 'self' 'wasm-unsafe-eval'    the page's own JS, and compiling its wasm
             'sha256-...'                 trunk's inline loader, by hash
  style-src 'self'                        the page's stylesheet
  style-src-attr 'unsafe-inline'          style="" attributes the components set (bar widths,
                                          colour gradients); attributes cannot run code
  img-src 'self' data:                    the favicon (data:)
  connect-src 'self'                      the wasm and the trained model, from this origin only
  base-uri 'none'; form-action 'none'     no <base> or form can redirect anything

Usage: trunk runs it with TRUNK_STAGING_DIR set; or `csp.py DIR/index.html`.
"""
import base64
import hashlib
import os
import re
import sys

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ["TRUNK_STAGING_DIR"], "index.html")
html = open(path, encoding="utf-8").read()
scripts = re.findall(r"<script type=\"module\">(.*?)</script>", html, flags=re.S)
if len(scripts) != 1:
    sys.exit(f"csp.py: expected trunk's one inline module script in {path}, found {len(scripts)}")
digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
policy = "; ".join([
    "default-src 'none'",
    f"script-src 'self' 'wasm-unsafe-eval' 'sha256-{digest}'",
    "style-src 'self'",
    "style-src-attr 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
])
meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}" />'
if 'http-equiv="Content-Security-Policy"' in html:
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', meta, html)
else:
    html = html.replace('<meta charset="utf-8" />', '<meta charset="utf-8" />\n    ' + meta, 1)
open(path, "w", encoding="utf-8").write(html)
print(f"csp.py: {path} now has a Content-Security-Policy (loader sha256-{digest})")
