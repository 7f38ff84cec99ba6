#!/usr/bin/env python3
"""Random GPT-2-family checkpoints for the decoder's tests, each with its float64 reference.

    python3 tests/reference/decoders.py OUT_DIR

writes one Hugging Face model folder per case into OUT_DIR/<case>/ (config.json as
GPT2LMHeadModel saves it, the weights in safetensors with GPT-2's Conv1D layout, the byte-level
BPE tokenizer as vocab.json + merges.txt or as tokenizer.json) and OUT_DIR/<case>/reference.json:

- "tokens": texts (leading spaces, newlines, emoji, CJK, control characters, a very long word,
  contractions, the end-of-text token written out) and their ids from the `tokenizers` package
  (a BPE model with GPT-2's ByteLevel pre-tokenizer), which the page's tokenizer must reproduce;
- "forward": id sequences and a plain float64 numpy forward pass on them (causal attention, the
  tied output head): the last position's logits, every position's loss of the next token, and the
  attention of the first and the last layer, with every head and with some heads pruned.

The vocabulary is GPT-2's 256 byte characters, merges learned here by plain BPE counting on a
few English sentences (deterministic: ties go to the smaller pair), and `<|endoftext|>`. Every
weight is a value f16 holds exactly. Needs numpy, tokenizers and safetensors. Never touches the
network.
"""
import hashlib
import json
import math
import os
import sys
from collections import Counter

import numpy as np
from safetensors import TensorSpec, serialize
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

CORPUS = [
    "The bank of the river was muddy after the rain.",
    "She paid the loan at the bank, and then she went home.",
    "Attention heads can be pruned; the model keeps working.",
    "In the beginning the heads attend to the previous token, then to the token after the last time it appeared.",
    "It's what they'll say: we've seen it, I'm sure, they're right, he'd know.",
    "Numbers like 1905, 2024 and 3.14 are split into pieces too.",
]
TEXTS = [
    "",
    "The bank of the river was muddy after the rain.",
    "  leading spaces and trailing spaces  ",
    "new\nlines\n\n\nand\ttabs\r\nhere",
    "emoji 🙂🚀 and CJK 中文字 and Hindi नमस्ते",
    "control\x00chars\x07and\x1bescapes",
    "It's they'll we've I'm he'd 'S ''s",
    "Supercalifragilisticexpialidocious" * 4,
    "numbers 1905 3.14 and 12345678901234567890",
    "one<|endoftext|>two <|endoftext|>",
    "non\u00a0breaking and zero\u200bwidth and accents cafe\u0301 café",
]
END_OF_TEXT = "<|endoftext|>"
MERGES = 300

# Each case: the shape, the dtype the weights are stored in, their prefix, which tokenizer files,
# whether the checkpoint holds GPT-2's causal-mask buffers and the tied output head.
CASES = {
    # GPT2LMHeadModel's naming, odd sizes (d_k 9, FFN 37 given as n_inner), F32, vocab.json +
    # merges.txt, the attention's mask buffers as old checkpoints have them.
    "gpt2-odd": dict(layers=2, heads=4, d=36, ffn=37, positions=40, dtype="F32",
                     prefix="transformer.", tokenizer="files", buffers=True, head=True, seed=11,
                     text_set=True),
    # The original openai-community/gpt2 naming (no prefix), F16, tokenizer.json, n_inner null.
    "gpt2-tokenizer-json": dict(layers=3, heads=3, d=24, ffn=None, positions=64, dtype="F16",
                                prefix="", tokenizer="json", buffers=False, head=False, seed=12),
    # GPT-2 small's shape (12 x 12 heads of 64, FFN 3072, 1024 positions) with the small
    # vocabulary: about 86 M weights, 172 MB in f16.
    "gpt2-small-shaped": dict(layers=12, heads=12, d=768, ffn=None, positions=1024, dtype="F16",
                              prefix="transformer.", tokenizer="files", buffers=False, head=False,
                              seed=13, lengths=[128]),
    # GPT-2 Large's every size (36 x 20 heads of 64, FFN 5120, 1024 positions, GPT-2's 50 257
    # embedding rows): 774 M weights, 1.5 GB in f16, more than a page holds in f32 beside its
    # file, so the page holds it at 8 bits only. The end-to-end tests load it once.
    "gpt2-large-shaped": dict(layers=36, heads=20, d=1280, ffn=None, positions=1024, dtype="F16",
                              prefix="transformer.", tokenizer="files", buffers=False, head=False,
                              seed=16, lengths=[24], vocab_rows=50257, draw=np.float32),
}


def byte_chars():
    """GPT-2's byte-to-unicode table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def learn_merges():
    """Plain BPE on the corpus's byte-level words: the most frequent pair first, ties to the
    smaller pair."""
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    words = Counter(w for text in CORPUS for w, _ in pre.pre_tokenize_str(text))
    split = {w: list(w) for w in words}
    merges = []
    for _ in range(MERGES):
        pairs = Counter()
        for w, count in words.items():
            s = split[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        for w in words:
            s, out, i = split[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            split[w] = out
    return merges


def vocabulary(merges):
    pieces = byte_chars()
    for a, b in merges:
        if a + b not in pieces:
            pieces.append(a + b)
    pieces.append(END_OF_TEXT)
    return {p: i for i, p in enumerate(pieces)}


def make_tokenizer(vocab, merges):
    tok = Tokenizer(models.BPE(vocab=dict(vocab), merges=list(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([END_OF_TEXT])
    return tok


# The text set a decoder's perplexity is measured on (src/model/decoder/texts.rs), selected here again,
# independently: a passage of every fourth of Moby-Dick's 135 chapters (the chapters from
# scripts/fetch-texts.sh, in HEADLAB_TEXTS_CHAPTERS), each the chapter's first paragraph of 200
# or more characters, cut after the last sentence ending within 400 (else at the last space).
TEXTS_HEADER = ("# Moby-Dick; or, The Whale (Herman Melville, 1851; public domain): "
                "a passage of every fourth chapter, one per line")


def passage(chapter):
    paragraph = next((p.strip() for p in chapter.split("\n") if len(p.strip()) >= 200), None)
    if paragraph is None:
        return None
    paragraph = paragraph.replace("\t", " ")
    if len(paragraph) <= 400:
        return paragraph
    sentence_end = space = None
    for i in range(400):
        if paragraph[i] == " ":
            space = i
        end = i
        while end + 1 < 400 and paragraph[end + 1] in '"\u201d\u2019)':
            end += 1
        if paragraph[i] in ".!?" and end + 1 < len(paragraph) and paragraph[end + 1] == " ":
            sentence_end = end + 1
    cut = sentence_end if sentence_end is not None else space
    return None if cut is None else paragraph[:cut].rstrip()


def text_set():
    """The passages and the SHA-256 of the page's file of them; None without the chapters."""
    folder = os.environ.get("HEADLAB_TEXTS_CHAPTERS")
    if not folder:
        return None
    passages = []
    for i in range(1, 136, 4):
        with open(os.path.join(folder, f"chapter_{i}.json"), encoding="utf-8") as f:
            p = passage(json.load(f)["text"])
        if p is not None:
            passages.append(p)
    text = TEXTS_HEADER + "\n" + "".join(p + "\n" for p in passages)
    return passages, hashlib.sha256(text.encode("utf-8")).hexdigest()


def set_reference(case, w, tok, passages, pruned):
    """Mean loss per predicted token on the passages (each cut to 64 tokens and the positions)."""
    most = min(64, case["positions"])
    out = {}
    for key, heads_pruned in (("full", ()), ("pruned", pruned)):
        total, count = 0.0, 0
        for p in passages:
            ids = tok.encode(p).ids[:most]
            if len(ids) < 2:
                continue
            _, losses, _ = reference_forward(case, w, ids, heads_pruned)
            total += float(sum(losses))
            count += len(losses)
        out[key] = {"mean_loss": total / count, "perplexity": math.exp(total / count), "tokens": count}
    return out


def save_tokenizer(folder, case, vocab, merges):
    tok = make_tokenizer(vocab, merges)
    if case["tokenizer"] == "files":
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    else:
        tok.save(os.path.join(folder, "tokenizer.json"))
    return [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS]


def exact(rng, shape, scale, mean=0.0, dtype=np.float64):
    """Normal values of `scale` about `mean`, rounded to what f16 holds exactly (drawn in `dtype`:
    float32 draws GPT-2 Large's 774 M weights in half the time)."""
    return (mean + rng.standard_normal(shape, dtype=dtype) * scale).astype(np.float16).astype(np.float32)


def weights(case, vocab_rows):
    """Every tensor of the case, by checkpoint name (Conv1D weights `[in, out]`)."""
    rng = np.random.default_rng(case["seed"])
    draw = case.get("draw", np.float64)

    def normal(shape, scale, mean=0.0):
        return exact(rng, shape, scale, mean, draw)

    d, p = case["d"], case["prefix"]
    ffn = case["ffn"] or 4 * d
    w = {p + "wte.weight": normal([vocab_rows, d], 0.5),
         p + "wpe.weight": normal([case["positions"], d], 0.3)}
    for l in range(case["layers"]):
        h = f"{p}h.{l}."
        for name in ("ln_1", "ln_2"):
            w[h + name + ".weight"] = normal([d], 0.1, mean=1.0)
            w[h + name + ".bias"] = normal([d], 0.1)
        for name, inp, out in (("attn.c_attn", d, 3 * d), ("attn.c_proj", d, d), ("mlp.c_fc", d, ffn), ("mlp.c_proj", ffn, d)):
            w[h + name + ".weight"] = normal([inp, out], 1.0 / math.sqrt(inp))
            w[h + name + ".bias"] = normal([out], 0.05)
        if case["buffers"]:
            n = case["positions"]
            w[h + "attn.bias"] = np.tril(np.ones((n, n), dtype=np.float32)).reshape(1, 1, n, n)
            w[h + "attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    w[p + "ln_f.weight"] = normal([d], 0.1, mean=1.0)
    w[p + "ln_f.bias"] = normal([d], 0.1)
    if case["head"]:
        w["lm_head.weight"] = w[p + "wte.weight"]
    return w


def reference_forward(case, w, ids, pruned=()):
    """The float64 forward pass: pre-LayerNorm GPT-2, causal attention, the tied output head."""
    g = lambda name: w[case["prefix"] + name].astype(np.float64)
    n, heads, d = len(ids), case["heads"], case["d"]
    dk = d // heads

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g(name + ".weight") + g(name + ".bias")

    def conv(x, name):
        return x @ g(name + ".weight") + g(name + ".bias")

    def gelu_new(x):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    x = g("wte.weight")[ids] + g("wpe.weight")[:n]
    causal = np.tril(np.ones((n, n), dtype=bool))
    attentions = []
    for l in range(case["layers"]):
        h = f"h.{l}."
        qkv = conv(ln(x, h + "ln_1"), h + "attn.c_attn")
        split = lambda t: t.reshape(n, heads, dk).transpose(1, 0, 2)
        q, k, v = split(qkv[:, :d]), split(qkv[:, d:2 * d]), split(qkv[:, 2 * d:])
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dk)
        s = np.where(causal, s, -np.inf)
        s = s - s.max(-1, keepdims=True)
        probs = np.exp(s) / np.exp(s).sum(-1, keepdims=True)
        attentions.append(probs)
        mask = np.array([0.0 if (l, hh) in pruned else 1.0 for hh in range(heads)])
        ctx = ((probs * mask[:, None, None]) @ v).transpose(1, 0, 2).reshape(n, d)
        x = x + conv(ctx, h + "attn.c_proj")
        x = x + conv(gelu_new(conv(ln(x, h + "ln_2"), h + "mlp.c_fc")), h + "mlp.c_proj")
    logits = ln(x, "ln_f") @ g("wte.weight").T
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    losses = [-logp[t, ids[t + 1]] for t in range(n - 1)]
    return logits[-1], losses, attentions


def save_weights(folder, case, w):
    def spec(arr):
        kind, np_type = ("float32", "<f4") if case["dtype"] == "F32" else ("float16", "<f2")
        data = np.ascontiguousarray(arr.astype(np_type))
        return TensorSpec(dtype=kind, shape=list(arr.shape), data_ptr=data.ctypes.data, data_len=data.nbytes), data

    keep = {n: spec(a) for n, a in w.items()}
    blob = bytes(serialize({n: s for n, (s, _) in keep.items()}, metadata={"format": "pt"}))
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(blob)


def save_config(folder, name, case, vocab_rows):
    config = {"_name_or_path": f"headlab-tests/{name}", "activation_function": "gelu_new",
              "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": case["layers"],
              "n_head": case["heads"], "n_embd": case["d"], "n_inner": case["ffn"],
              "n_positions": case["positions"], "n_ctx": case["positions"], "vocab_size": vocab_rows,
              "layer_norm_epsilon": 1e-5, "bos_token_id": vocab_rows - 1, "eos_token_id": vocab_rows - 1,
              "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


def make(out_dir, name, case, merges, vocab):
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    vocab_rows = case.get("vocab_rows", len(vocab))
    w = weights(case, vocab_rows)
    save_weights(folder, case, w)
    save_config(folder, name, case, vocab_rows)
    tokens = save_tokenizer(folder, case, vocab, merges)
    rng = np.random.default_rng(200 + case["seed"])
    layers, heads = case["layers"], case["heads"]
    pruned = sorted({(l, int(h)) for l in range(layers) for h in rng.choice(heads, max(1, heads // 3), replace=False)})
    forward = []
    for n in case.get("lengths", [1, 7, case["positions"]]):
        ids = [int(i) for i in rng.integers(0, vocab_rows, n)]
        logits, losses, att = reference_forward(case, w, ids)
        logits_p, losses_p, _ = reference_forward(case, w, ids, pruned)
        forward.append({
            "ids": ids,
            "next_logits": [float(v) for v in logits],
            "losses": [float(v) for v in losses],
            "pruned": [list(p) for p in pruned],
            "next_logits_pruned": [float(v) for v in logits_p],
            "losses_pruned": [float(v) for v in losses_p],
            "attention_first": [round(float(v), 12) for v in att[0].ravel()],
            "attention_last": [round(float(v), 12) for v in att[-1].ravel()],
        })
    # What the page shows for one text with head 1 of layer 1 pruned: each token's loss, the next
    # token's logits' KL divergence (full || pruned) and the two top tokens (the end-to-end tests
    # compare the page's with them).
    ids = tokens[1]["ids"]
    logits, losses, _ = reference_forward(case, w, ids)
    logits_p, losses_p, _ = reference_forward(case, w, ids, [(0, 1)])
    lp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
    lq = logits_p - logits_p.max() - np.log(np.exp(logits_p - logits_p.max()).sum())
    page = {"text": tokens[1]["text"], "ids": ids, "pruned": [[0, 1]],
            "losses": [float(v) for v in losses], "losses_pruned": [float(v) for v in losses_p],
            "kl": float((np.exp(lp) * (lp - lq)).sum()),
            "top": int(np.argmax(logits)), "top_pruned": int(np.argmax(logits_p))}
    reference = {"tokens": tokens, "forward": forward, "page": page}
    texts = text_set()
    if texts is not None and case.get("text_set"):
        passages, sha = texts
        reference["set"] = {"sha256": sha, "passages": len(passages), "pruned_heads": [[0, 1]],
                            **set_reference(case, w, make_tokenizer(vocab, merges), passages, [(0, 1)])}
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(reference, f)
    print(f"{name}: {sum(a.size for a in w.values())} weights ({case['dtype']}), "
          f"{len(tokens)} tokenizer cases, {len(forward)} forward cases")


# gpt2-medium's shape (24 x 16 heads of 64, FFN 4096, 1024 positions, GPT-2's 50 257 embedding
# rows): 355 M weights, 710 MB in f16; beside it Large's (as the tests') and XL's (48 x 25 heads
# of 64, FFN 6400: 1558 M weights, 3.1 GB in f16), so that bench/load.mjs serves the three from
# one folder. Made only when asked (`large`): for checking that the page holds them and timing
# their passes side by side, not for the tests.
LARGE = {"gpt2-medium-shaped": dict(layers=24, heads=16, d=1024, ffn=None, positions=1024, dtype="F16",
                                    prefix="transformer.", tokenizer="files", buffers=False, head=False,
                                    seed=14, lengths=[128], vocab_rows=50257),
         "gpt2-large-shaped": CASES["gpt2-large-shaped"],
         "gpt2-xl-shaped": dict(layers=48, heads=25, d=1600, ffn=None, positions=1024, dtype="F16",
                                prefix="transformer.", tokenizer="files", buffers=False, head=False,
                                seed=17, lengths=[24], vocab_rows=50257, draw=np.float32)}


# GPT-2 small's every size, its 50 257 embedding rows included (124 M weights, 250 MB in f16): the
# decoder benchmark's model (bench/decoder-speed.mjs), made only when asked (`bench`).
BENCH = {"gpt2-shaped": dict(layers=12, heads=12, d=768, ffn=None, positions=1024, dtype="F16",
                             prefix="transformer.", tokenizer="files", buffers=False, head=False,
                             seed=15, lengths=[128], vocab_rows=50257)}


def main(out_dir, which="tests"):
    merges = learn_merges()
    vocab = vocabulary(merges)
    for name, case in {"large": LARGE, "bench": BENCH}.get(which, CASES).items():
        make(out_dir, name, case, merges, vocab)


if __name__ == "__main__":
    main(*sys.argv[1:3])
