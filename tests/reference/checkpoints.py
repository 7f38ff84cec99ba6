#!/usr/bin/env python3
"""Random BERT-family checkpoints for the loader's tests, each with its float64 reference.

    python3 tests/reference/checkpoints.py OUT_DIR

writes one Hugging Face model folder per case into OUT_DIR/<case>/ (config.json, the weights in
safetensors, whole or sharded with model.safetensors.index.json, the tokenizer as vocab.txt or
tokenizer.json, and sentence-transformers' modules.json and pooling config where the case has
them) and OUT_DIR/<case>/reference.json:

- "tokens": texts and their ids from the `tokenizers` package (BertWordPiece on the case's
  vocabulary and casing), which the page's tokenizer must reproduce;
- "forward": id sequences and a plain float64 numpy forward pass on them (the weights the file
  holds, widened exactly): the pooled embedding with every head and with some heads pruned,
  and the attention of the first and the last layer.

Every weight is a value f16 holds exactly (and, for the bf16 case, bf16 too), so the page's f16
copy is the file's weights and the comparison measures the page's arithmetic alone. Needs numpy,
tokenizers and safetensors (scripts/install-tools.sh test puts them in a venv). Deterministic:
the same OUT_DIR contents on every run. Never touches the network.
"""
import json
import math
import os
import sys

import numpy as np
from safetensors import TensorSpec, serialize
from tokenizers import BertWordPieceTokenizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "bank", "river", "was", "muddy", "after", "rain", "she", "paid", "loan", "at",
         "attention", "head", "heads", "can", "be", "pruned", "un", "##aff", "##able", "cafe",
         "café", "The", "Bank", "##s", "##ing", "##ed", "##ly", "##er", "##a", "##e", "##n",
         "##t", "##r", "ship", "pilot", "pick"]
TEXTS = [
    "",
    "The bank of the river was muddy after the rain.",
    "She paid the loan at the Bank!",
    "Unaffable CAFÉ, café; heads can be pruned?",
    "tabs\tand\nnewlines, xyz and [MASK] and 中文",
    "ships pilots picked " * 30,
]

# Each case: the architecture's config, the dtype the weights are stored in, how the folder is
# laid out, and the tokenizer's casing.
CASES = {
    # BERT as BertForMaskedLM saves it: "bert." prefix, LayerNorm's gamma/beta names of the
    # original checkpoints, a pooler and an MLM head the page does not use; odd sizes (d_k 9).
    "bert-odd": dict(arch="bert", layers=2, heads=4, d=36, ffn=37, positions=40, act="gelu",
                     dtype="F32", prefix="bert.", gamma_beta=True, extra=True, shards=1,
                     lowercase=True, tokenizer="vocab.txt", pooling=None, seed=1),
    # A cased BERT with the tanh GELU, in bf16, split in two shards, pooled from [CLS] and
    # normalised as a sentence-transformers model says.
    "bert-cased-bf16-sharded": dict(arch="bert", layers=3, heads=3, d=24, ffn=40, positions=64,
                                    act="gelu_new", dtype="BF16", prefix="", gamma_beta=False,
                                    extra=False, shards=2, lowercase=False,
                                    tokenizer="tokenizer.json", pooling="cls", seed=2),
    # DistilBERT as DistilBertForMaskedLM saves it, in f16: mean pooling, normalised.
    "distilbert": dict(arch="distilbert", layers=2, heads=2, d=20, ffn=30, positions=32, act="gelu",
                       dtype="F16", prefix="distilbert.", gamma_beta=False, extra=True, shards=1,
                       lowercase=True, tokenizer="tokenizer.json", pooling="mean", seed=3),
    # BERT-base's shape (12 x 12 heads of 64, FFN 3072, 512 positions) with a small vocabulary:
    # about 86 M weights, 172 MB in f16.
    "bert-base-shaped": dict(arch="bert", layers=12, heads=12, d=768, ffn=3072, positions=512,
                             act="gelu", dtype="F16", prefix="", gamma_beta=False, extra=False,
                             shards=1, lowercase=True, tokenizer="vocab.txt", pooling=None, seed=4,
                             vocab_rows=2000, lengths=[128]),
}


def vocabulary():
    pieces = list(SPECIALS)
    for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
        pieces.append(c)
    for c in "abcdefghijklmnopqrstuvwxyz中文":
        pieces.append(c)
    for w in WORDS:
        if w not in pieces:
            pieces.append(w)
    return pieces


def exact(rng, shape, scale, dtype, mean=0.0):
    """Normal values of `scale` about `mean`, rounded to what f16 (and bf16, for BF16) holds
    exactly."""
    x = (mean + rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        bits = x.view(np.uint32) & np.uint32(0xFFFF0000)  # bf16 keeps the top 16 bits
        x = bits.view(np.float32)
        x[np.abs(x) < 2.0 ** -14] = 0.0  # below f16's normal range, bf16 and f16 differ
    return x


def names(case, l):
    """The checkpoint's names for layer l's tensors, in the page's (BERT's) order."""
    if case["arch"] == "bert":
        p = f"{case['prefix']}encoder.layer.{l}."
        return [p + n for n in ["attention.self.query", "attention.self.key", "attention.self.value",
                                "attention.output.dense", "attention.output.LayerNorm",
                                "intermediate.dense", "output.dense", "output.LayerNorm"]]
    p = f"{case['prefix']}transformer.layer.{l}."
    return [p + n for n in ["attention.q_lin", "attention.k_lin", "attention.v_lin",
                            "attention.out_lin", "sa_layer_norm", "ffn.lin1", "ffn.lin2",
                            "output_layer_norm"]]


def weights(case, vocab_rows):
    """Every tensor of the case, by checkpoint name, and the model as the reference reads it."""
    rng = np.random.default_rng(case["seed"])
    d, ffn, dt = case["d"], case["ffn"], case["dtype"]
    w, bias_suffix, scale_suffix = {}, "bias", "weight"
    ln_names = ("gamma", "beta") if case["gamma_beta"] else ("weight", "bias")

    def norm(name):
        w[f"{name}.{ln_names[0]}"] = exact(rng, [d], 0.1, dt, mean=1.0)
        w[f"{name}.{ln_names[1]}"] = exact(rng, [d], 0.1, dt)

    def dense(name, out, inp):
        w[f"{name}.{scale_suffix}"] = exact(rng, [out, inp], 1.0 / math.sqrt(inp), dt)
        w[f"{name}.{bias_suffix}"] = exact(rng, [out], 0.05, dt)

    e = case["prefix"] + "embeddings."
    w[e + "word_embeddings.weight"] = exact(rng, [vocab_rows, d], 1.0, dt)
    w[e + "position_embeddings.weight"] = exact(rng, [case["positions"], d], 0.3, dt)
    if case["arch"] == "bert":
        w[e + "token_type_embeddings.weight"] = exact(rng, [2, d], 0.1, dt)
    norm(e + "LayerNorm")
    for l in range(case["layers"]):
        q, k, v, o, ln1, up, down, ln2 = names(case, l)
        for n in (q, k, v, o):
            dense(n, d, d)
        norm(ln1)
        dense(up, ffn, d)
        dense(down, d, ffn)
        norm(ln2)
    if case["extra"]:
        if case["arch"] == "bert":
            dense(case["prefix"] + "pooler.dense", d, d)
            w["cls.predictions.bias"] = exact(rng, [vocab_rows], 0.1, dt)
        else:
            dense("vocab_transform", d, d)
            w["vocab_projector.bias"] = exact(rng, [vocab_rows], 0.1, dt)
    return w, ln_names


def reference_forward(case, w, ln_names, ids, pruned=()):
    """The float64 forward pass: post-LayerNorm BERT (DistilBERT is the same without token types)."""
    g = lambda name: w[name].astype(np.float64)
    n, heads, d = len(ids), case["heads"], case["d"]
    dk = d // heads
    eps = 1e-12
    e = case["prefix"] + "embeddings."

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g(f"{name}.{ln_names[0]}") + g(f"{name}.{ln_names[1]}")

    def lin(x, name):
        return x @ g(name + ".weight").T + g(name + ".bias")

    def act(x):
        if case["act"] == "gelu":
            erf = np.vectorize(math.erf)
            return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    x = g(e + "word_embeddings.weight")[ids] + g(e + "position_embeddings.weight")[:n]
    if case["arch"] == "bert":
        x = x + g(e + "token_type_embeddings.weight")[0]
    x = ln(x, e + "LayerNorm")
    attentions = []
    for l in range(case["layers"]):
        qn, kn, vn, on, ln1, up, down, ln2 = names(case, l)
        split = lambda t: t.reshape(n, heads, dk).transpose(1, 0, 2)
        q, k, v = split(lin(x, qn)), split(lin(x, kn)), split(lin(x, vn))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dk)
        s = s - s.max(-1, keepdims=True)
        probs = np.exp(s) / np.exp(s).sum(-1, keepdims=True)
        attentions.append(probs)
        mask = np.array([0.0 if (l, h) in pruned else 1.0 for h in range(heads)])
        ctx = ((probs * mask[:, None, None]) @ v).transpose(1, 0, 2).reshape(n, d)
        x = ln(lin(ctx, on) + x, ln1)
        x = ln(lin(act(lin(x, up)), down) + x, ln2)
    pooled = x[0] if case["pooling"] == "cls" else x.mean(0)
    if case["pooling"] is not None:  # sentence-transformers' Normalize module
        pooled = pooled / np.linalg.norm(pooled)
    return pooled, attentions


def save_weights(folder, case, w):
    """The weights as safetensors in the case's dtype, whole or in shards with their index."""
    def spec(arr):
        if case["dtype"] == "F32":
            data = np.ascontiguousarray(arr, dtype="<f4")
            return TensorSpec(dtype="float32", shape=list(arr.shape), data_ptr=data.ctypes.data,
                              data_len=data.nbytes), data
        if case["dtype"] == "F16":
            data = np.ascontiguousarray(arr.astype("<f2"))
            return TensorSpec(dtype="float16", shape=list(arr.shape), data_ptr=data.ctypes.data,
                              data_len=data.nbytes), data
        data = np.ascontiguousarray((arr.view(np.uint32) >> 16).astype("<u2"))
        return TensorSpec(dtype="bfloat16", shape=list(arr.shape), data_ptr=data.ctypes.data,
                          data_len=data.nbytes), data

    names_all = list(w)
    parts = [names_all[i::case["shards"]] for i in range(case["shards"])]
    weight_map = {}
    for i, part in enumerate(parts):
        keep = {n: spec(w[n]) for n in part}
        blob = bytes(serialize({n: s for n, (s, _) in keep.items()}, metadata={"format": "pt"}))
        fname = ("model.safetensors" if case["shards"] == 1
                 else f"model-{i + 1:05d}-of-{case['shards']:05d}.safetensors")
        with open(os.path.join(folder, fname), "wb") as f:
            f.write(blob)
        weight_map.update({n: fname for n in part})
    if case["shards"] > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)


def save_config(folder, name, case, vocab_rows):
    if case["arch"] == "bert":
        config = {"architectures": ["BertModel"], "model_type": "bert",
                  "num_hidden_layers": case["layers"], "num_attention_heads": case["heads"],
                  "hidden_size": case["d"], "intermediate_size": case["ffn"],
                  "hidden_act": case["act"], "max_position_embeddings": case["positions"],
                  "vocab_size": vocab_rows, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
                  "position_embedding_type": "absolute"}
    else:
        config = {"architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert",
                  "n_layers": case["layers"], "n_heads": case["heads"], "dim": case["d"],
                  "hidden_dim": case["ffn"], "activation": case["act"],
                  "max_position_embeddings": case["positions"], "vocab_size": vocab_rows,
                  "sinusoidal_pos_embds": False}
    config["_name_or_path"] = f"headlab-tests/{name}"
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    if case["pooling"] is not None:
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ]
        with open(os.path.join(folder, "modules.json"), "w") as f:
            json.dump(modules, f, indent=1)
        os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
        with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": case["d"],
                       "pooling_mode_cls_token": case["pooling"] == "cls",
                       "pooling_mode_mean_tokens": case["pooling"] == "mean",
                       "pooling_mode_max_tokens": False}, f, indent=1)


def save_tokenizer(folder, case, pieces):
    tok = BertWordPieceTokenizer({p: i for i, p in enumerate(pieces)}, lowercase=case["lowercase"],
                                 strip_accents=None)
    tok.enable_truncation(case["positions"])
    if case["tokenizer"] == "vocab.txt":
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(pieces) + "\n")
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": case["lowercase"]}, f)
    else:
        tok.save(os.path.join(folder, "tokenizer.json"))
    return [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS]


def make(out_dir, name, case):
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    pieces = vocabulary()
    vocab_rows = case.get("vocab_rows", len(pieces))
    w, ln_names = weights(case, vocab_rows)
    save_weights(folder, case, w)
    save_config(folder, name, case, vocab_rows)
    tokens = save_tokenizer(folder, case, pieces)
    rng = np.random.default_rng(100 + case["seed"])
    layers, heads = case["layers"], case["heads"]
    # Some heads of every layer, never all of one.
    pruned = sorted({(l, int(h)) for l in range(layers) for h in rng.choice(heads, max(1, heads // 3), replace=False)})
    forward = []
    for n in case.get("lengths", [1, 7, case["positions"]]):
        ids = [int(i) for i in rng.integers(0, vocab_rows, n)]
        emb, att = reference_forward(case, w, ln_names, ids)
        emb_pruned, _ = reference_forward(case, w, ln_names, ids, pruned)
        forward.append({
            "ids": ids,
            "embedding": [float(v) for v in emb],
            "pruned": [list(p) for p in pruned],
            "embedding_pruned": [float(v) for v in emb_pruned],
            "attention_first": [round(float(v), 12) for v in att[0].ravel()],
            "attention_last": [round(float(v), 12) for v in att[-1].ravel()],
        })
    # What the page shows for one sentence with head 2 of layer 1 pruned: the cosine of the
    # pruned embedding to the full one (the end-to-end tests compare the page's with it).
    ids = tokens[1]["ids"]
    full, _ = reference_forward(case, w, ln_names, ids)
    pruned_one, _ = reference_forward(case, w, ln_names, ids, [(0, 1)])
    page = {"text": tokens[1]["text"], "ids": ids, "pruned": [[0, 1]],
            "cosine": float(full @ pruned_one / np.linalg.norm(full) / np.linalg.norm(pruned_one))}
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump({"tokens": tokens, "forward": forward, "page": page}, f)
    print(f"{name}: {sum(a.size for a in w.values())} weights ({case['dtype']}), "
          f"{len(tokens)} tokenizer cases, {len(forward)} forward cases")


# BERT-large's shape (24 x 16 heads of 64, FFN 4096, 512 positions, BERT's 30 522-piece
# vocabulary): 335 M weights, 670 MB in f16. Made only when asked (`large`): for measuring what
# the page holds (bench/load.mjs), not for the tests.
LARGE = {"bert-large-shaped": dict(arch="bert", layers=24, heads=16, d=1024, ffn=4096, positions=512,
                                   act="gelu", dtype="F16", prefix="", gamma_beta=False, extra=False,
                                   shards=1, lowercase=True, tokenizer="vocab.txt", pooling=None,
                                   seed=5, vocab_rows=30522, lengths=[128])}


def main(out_dir, which="tests"):
    for name, case in (LARGE if which == "large" else CASES).items():
        make(out_dir, name, case)


if __name__ == "__main__":
    main(*sys.argv[1:3])
