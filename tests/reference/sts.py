#!/usr/bin/env python3
"""Reference for the task-quality test: the full all-MiniLM-L6-v2's quality on the page's sentence
pairs (target/model/sts-pairs.tsv, made by scripts/build-model-asset.sh), in float64 numpy with the
model's own tokenizer: Spearman's correlation (ties averaged, as scipy.stats.spearmanr) between
each pair's embedding cosine and its human score.

    python3 tests/reference/sts.py "$(scripts/fetch-model.sh)" target/model/sts-pairs.tsv

writes tests/fixtures/sts-quality.json. Needs numpy and tokenizers (pip); reuses minilm.py's
forward pass. The Rust test only reads the fixture.
"""
import hashlib
import json
import os
import sys

import numpy as np
from tokenizers import Tokenizer

from minilm import FIXTURES, forward, load_safetensors


def ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(np.asarray(a)), ranks(np.asarray(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main(model_dir, pairs_path):
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(512)
    tok.no_padding()
    w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
    data = open(pairs_path, "rb").read()
    rows = [line.split("\t") for line in data.decode("utf-8").splitlines()[1:] if line]
    cache = {}

    def embed(s):
        s = s.strip()
        if s not in cache:
            cache[s], _ = forward(w, tok.encode(s).ids)
        return cache[s]

    cosines = [float(embed(r[3]) @ embed(r[4])) for r in rows]
    scores = [float(r[0]) / 5.0 for r in rows]
    out = {
        "pairs_sha256": hashlib.sha256(data).hexdigest(),
        "pairs": len(rows),
        "sentences": len(cache),
        "quality": round(spearman(cosines, scores), 9),
    }
    with open(os.path.join(FIXTURES, "sts-quality.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
