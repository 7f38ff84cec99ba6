"""The peer's graphs made by the peer's own tools, from a checkpoint folder, as a transformers.js
user gets them from its conversion (transformers.js's scripts/convert.py and scripts/quantize.py,
their settings restated here, not their code):

    python bench/peer/convert.py MODEL_DIR ONNX_DIR

writes into ONNX_DIR:

- model.onnx: optimum's ONNX exporter (main_export; the task the hub would infer for the
  model, which a local folder cannot: a BERT's features, a GPT-2's text generation with its
  past key values as inputs, as optimum exports it when the task is left to it), then onnxslim,
  as convert.py does;
- model_quantized.onnx (transformers.js's default `q8`): onnxruntime's dynamic quantizer
  (ONNXQuantizer, IntegerOps, activations uint8, EnableSubgraph and MatMulConstBOnly) on it,
  weights int8 unless the graph has a Conv or grouped/multi-head attention op (then uint8), per
  channel and in the reduced range for the model types convert.py does not list as exceptions
  (BERT: both; GPT-2 is listed: neither);
- model_fused.onnx and model_fused_quantized.onnx: onnxruntime's transformer optimizer
  (optimize_model for the model type, its default level: fused attention, skip-LayerNorm, fused
  GELU where its patterns match) on the exporter's graph, then the same quantizer: the fastest graph onnxruntime-web
  can run;
- graphs.json: what made each file (tool versions, settings, the optimizer's fused operators).

No hub: the export reads MODEL_DIR alone (HF_HUB_OFFLINE).
"""
import argparse
import json
import os
import sys
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"

import onnx  # noqa: E402
import onnxruntime  # noqa: E402
import onnxslim  # noqa: E402
import optimum.version  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from onnxruntime.quantization import QuantizationMode, QuantType  # noqa: E402
from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer  # noqa: E402
from onnxruntime.quantization.registry import IntegerOpsRegistry  # noqa: E402
from onnxruntime.transformers.optimizer import optimize_model  # noqa: E402
from optimum.exporters.onnx import main_export  # noqa: E402

# convert.py's NO_PER_CHANNEL_REDUCE_RANGE_MODELS, for the two types the benchmarks export.
PER_CHANNEL_REDUCE_RANGE = {"bert": True, "gpt2": False}
# The task optimum's `auto` gives each from the hub (sentence-transformers' BERTs:
# feature-extraction; a decoder's text-generation, with past key values when the task was not
# given, which transformers.js's conversion does not give).
TASK = {"bert": "feature-extraction", "gpt2": "text-generation-with-past"}
# quantize.py's QUINT8_OPS: a graph with one of these gets uint8 weights.
UINT8_WEIGHT_OPS = {"Conv", "GroupQueryAttention", "MultiHeadAttention"}


def operators(model):
    found = set()

    def walk(graph):
        for node in graph.node:
            found.add(node.op_type)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g)

    walk(model.graph)
    return found


def quantize(model, path, per_channel, extra=None):
    """q8 of `model` into `path` (`extra`: options added to transformers.js's); what was used."""
    weights = QuantType.QUInt8 if operators(model) & UINT8_WEIGHT_OPS else QuantType.QInt8
    quantizer = ONNXQuantizer(
        model,
        per_channel,
        per_channel,
        mode=QuantizationMode.IntegerOps,
        static=False,
        weight_qType=weights,
        activation_qType=QuantType.QUInt8,
        tensors_range=None,
        nodes_to_quantize=[],
        nodes_to_exclude=[],
        op_types_to_quantize=set(IntegerOpsRegistry.keys()),
        extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True, **(extra or {})},
    )
    quantizer.quantize_model()
    onnx.save_model(quantizer.model.model, path)
    return {
        "quantizer": "onnxruntime.quantization ONNXQuantizer, IntegerOps, dynamic",
        "weights": "int8" if weights == QuantType.QInt8 else "uint8",
        "per_channel": per_channel,
        "reduce_range": per_channel,
        **({"extra_options": {k: str(v) for k, v in extra.items()}} if extra else {}),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("onnx_dir")
    args = parser.parse_args()
    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    model_type = config["model_type"]
    if model_type not in PER_CHANNEL_REDUCE_RANGE:
        sys.exit(f"{args.model_dir}: model_type {model_type!r}; the benchmarks convert bert and gpt2")
    heads, hidden = (
        (config["n_head"], config["n_embd"])
        if model_type == "gpt2"
        else (config["num_attention_heads"], config["hidden_size"])
    )
    per_channel = PER_CHANNEL_REDUCE_RANGE[model_type]
    os.makedirs(args.onnx_dir, exist_ok=True)
    path = lambda name: os.path.join(args.onnx_dir, name)  # noqa: E731

    with tempfile.TemporaryDirectory() as exported:
        main_export(model_name_or_path=args.model_dir, output=exported, task=TASK[model_type], do_validation=False)
        raw = os.path.join(exported, "model.onnx")
        slim = onnxslim.slim(raw)
        onnx.save_model(slim, path("model.onnx"))
        # The optimizer reads the exporter's own graph (its patterns are the exporter's; it
        # fails on the slimmed GPT-2's, whose nodes it can no longer sort).
        optimized = optimize_model(raw, model_type=model_type, num_heads=heads, hidden_size=hidden)
    graphs = {
        "model.onnx": {
            "made_by": f"optimum.exporters.onnx.main_export(task={TASK[model_type]!r}) on torch {torch.__version__}, then onnxslim.slim",
            "inputs": [i.name for i in slim.graph.input],
        }
    }
    graphs["model_quantized.onnx"] = {
        "from": "model.onnx",
        **quantize(onnx.load_model(path("model.onnx")), path("model_quantized.onnx"), per_channel),
    }
    fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    optimized.save_model_to_file(path("model_fused.onnx"))
    graphs["model_fused.onnx"] = {
        "from": "the exporter's graph, before onnxslim",
        "made_by": f"onnxruntime.transformers.optimizer.optimize_model(model_type={model_type!r}, num_heads={heads}, hidden_size={hidden})",
        "fused_operators": fused,
    }
    graphs["model_fused_quantized.onnx"] = {
        "from": "model_fused.onnx",
        # Shape inference knows no type for the fused (com.microsoft) operators' outputs: the
        # quantizer is told they are float, as its own error message advises.
        **quantize(
            onnx.load_model(path("model_fused.onnx")),
            path("model_fused_quantized.onnx"),
            per_channel,
            {"DefaultTensorType": onnx.TensorProto.FLOAT},
        ),
    }
    versions = {
        "optimum": optimum.version.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "onnx": onnx.__version__,
        "onnxslim": onnxslim.__version__,
    }
    made = {"command": f"bench/peer/convert.py {args.model_dir} {args.onnx_dir}", "tools": versions, "graphs": graphs}
    with open(path("graphs.json"), "w") as out:
        json.dump(made, out, indent=1)
    print(json.dumps(made))


if __name__ == "__main__":
    main()
