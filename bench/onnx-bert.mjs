// Exports a BERT checkpoint folder to ONNX, as a folder transformers.js loads with
// `allowRemoteModels = false` (bench/transformers.mjs): the trained model (all-MiniLM-L6-v2, from
// the checksum-verified safetensors) by default, or any BERT folder the page loads (config.json,
// model.safetensors in F32, F16 or BF16, whole or sharded; the tests' random BERT-base-shaped one
// for the benchmark at BERT-base's shape):
//
//   node bench/onnx-bert.mjs [MODEL_DIR] [OUT_DIR]
//     MODEL_DIR: default scripts/fetch-model.sh's directory
//     OUT_DIR:   default target/transformers/<MODEL_DIR's last name> (all-MiniLM-L6-v2 for MiniLM)
//
// writes OUT_DIR/onnx/model.onnx (fp32) and OUT_DIR/onnx/model_quantized.onnx (8-bit, the file
// transformers.js picks by default for wasm, `dtype: 'q8'`), and copies config.json,
// tokenizer.json, tokenizer_config.json and special_tokens_map.json next to them (a folder with
// vocab.txt alone gets the tokenizer.json that Python `tokenizers` makes of it, as a Hugging Face
// conversion would).
//
// The fp32 graph is BERT from standard ops (opset 17), the shape a PyTorch export has: embeddings
// (word + position + token type), LayerNormalization, the config's layers of self-attention with
// the attention mask added to the scores, GELU as x/sqrt 2 -> Erf -> +1 -> *x -> *0.5 (the pattern
// onnxruntime fuses; `gelu_new` as its tanh form), LayerNormalization; inputs input_ids,
// attention_mask, token_type_ids (int64, batch x sequence), output last_hidden_state (pooling is
// transformers.js's job). Sizes, activation and LayerNorm epsilon come from config.json.
//
// The 8-bit graph is what onnxruntime's dynamic quantisation (ONNXQuantizer, IntegerOps, as
// transformers.js's scripts/quantize.py calls it for q8) makes of that graph, written directly
// (bench/onnx-graph.mjs, which the GPT-2 export shares): every MatMul with a constant weight
// becomes DynamicQuantizeLinear (activations uint8, per tensor) -> MatMulInteger with the weight
// in int8 (per output column, symmetric, reduced range [-64, 64]: transformers.js's conversion sets
// per_channel and reduce_range for BERT, and picks int8 weights for q8 where the graph has no
// Conv) -> Cast -> Mul by both scales; each embedding table becomes uint8 (per tensor,
// asymmetric) with Gather -> DequantizeLinear. MatMuls of two activations (scores, weighted
// values) stay float.
import { readFileSync, existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Graph, INT64, FLOAT, copyPresent, readCheckpointTensors, root, tokenizerWithPython, transpose, writeModels } from './onnx-graph.mjs';

/**
 * The tensors of a checkpoint folder (model.safetensors, or the shards its index names) under
 * BERT's own names: a BertFor... prefix (`bert.`) dropped, LayerNorm's gamma/beta read as
 * weight/bias.
 */
export function readCheckpoint(dir) {
  return readCheckpointTensors(dir, (name) => name.replace(/^bert\./, '').replace(/LayerNorm\.gamma$/, 'LayerNorm.weight').replace(/LayerNorm\.beta$/, 'LayerNorm.bias'));
}

/** The sizes the graph needs, from config.json; BERT only (what the benchmarks compare). */
export function bertShape(dir) {
  const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  if (c.model_type !== 'bert') throw new Error(`${dir}: model_type ${c.model_type}; the export writes BERT's graph`);
  const act = c.hidden_act ?? 'gelu';
  if (act !== 'gelu' && act !== 'gelu_new') throw new Error(`${dir}: hidden_act ${act}; the export writes gelu and gelu_new`);
  const d = c.hidden_size, heads = c.num_attention_heads;
  return { d, heads, dk: d / heads, layers: c.num_hidden_layers, eps: c.layer_norm_eps ?? 1e-12, act };
}

/** The BERT graph of `w`; `quantized` gives the 8-bit form. */
function bertGraph(w, { d: D, heads: HEADS, dk: DK, layers: LAYERS, eps: LN_EPS, act }, quantized) {
  const g = new Graph(quantized);
  // A dense layer (PyTorch's Linear: weight `[out, in]`, so its transpose is the MatMul's right).
  const linear = (x, prefix) => {
    const weight = w[`${prefix}.weight`];
    return g.op('Add', [g.init(`${prefix}.bias`, [weight.shape[0]], FLOAT, w[`${prefix}.bias`].data), g.matmul(x, `${prefix}.weight_T`, transpose(weight), weight.shape[0])]);
  };
  const lookup = (name, ids) => g.lookup(name, w[name], ids);
  const norm = (x, prefix, outputs = null) => g.layerNorm(x, prefix, w[`${prefix}.weight`].data, w[`${prefix}.bias`].data, LN_EPS, outputs);

  // Embeddings: word[input_ids] + token_type[token_type_ids] + position[0 .. seq).
  const { positions } = g.positions();
  const words = lookup('embeddings.word_embeddings.weight', 'input_ids');
  const types = lookup('embeddings.token_type_embeddings.weight', 'token_type_ids');
  const pos = lookup('embeddings.position_embeddings.weight', positions);
  let x = norm(g.op('Add', [g.op('Add', [words, types]), pos]), 'embeddings.LayerNorm');

  // The mask added to the scores: 0 where attention_mask is 1, float32's lowest where it is 0.
  const maskAdd = g.maskAdd(g.maskFloat());
  const heads = g.i64('heads_shape', [0, 0, HEADS, DK]);
  const merged = g.i64('merged_shape', [0, 0, D]);
  const scale = g.f('sqrt_dk', Math.sqrt(DK));
  const sqrt2 = g.f('sqrt_2', Math.SQRT2);
  const halfValue = g.f('half', 0.5);

  for (let l = 0; l < LAYERS; l++) {
    const p = `encoder.layer.${l}.`;
    const split = (name, perm) => g.op('Transpose', [g.op('Reshape', [linear(x, p + name), heads])], { perm });
    const q = split('attention.self.query', [0, 2, 1, 3]);
    const k = split('attention.self.key', [0, 2, 3, 1]);
    const v = split('attention.self.value', [0, 2, 1, 3]);
    const ctx = g.attend(q, k, v, scale, maskAdd, merged);
    x = norm(g.op('Add', [linear(ctx, p + 'attention.output.dense'), x]), p + 'attention.output.LayerNorm');
    const h = linear(x, p + 'intermediate.dense');
    const gelu = act === 'gelu'
      ? g.op('Mul', [g.op('Mul', [h, g.op('Add', [g.op('Erf', [g.op('Div', [h, sqrt2])]), g.f(`one_${l}`, 1)])]), halfValue])
      : g.geluTanh(h, l, halfValue);
    const last = l === LAYERS - 1;
    const y = g.op('Add', [linear(gelu, p + 'output.dense'), x]);
    x = norm(y, p + 'output.LayerNorm', last ? ['last_hidden_state'] : null);
  }
  return g;
}

/** tokenizer.json for a folder that has vocab.txt alone: Python `tokenizers`' BertWordPiece on
 * it, with the casing tokenizer_config.json says. */
function tokenizerFromVocab(modelDir, out) {
  const config = join(modelDir, 'tokenizer_config.json');
  const lower = existsSync(config) ? JSON.parse(readFileSync(config, 'utf8')).do_lower_case ?? true : true;
  tokenizerWithPython('import sys; from tokenizers import BertWordPieceTokenizer as T; '
    + 'T(sys.argv[1], lowercase=sys.argv[3] == "1", strip_accents=None).save(sys.argv[2])',
  [join(modelDir, 'vocab.txt'), out, lower ? '1' : '0']);
}

/** Writes the folder; returns its path. */
export function exportBert(modelDir, outDir) {
  const shape = bertShape(modelDir);
  const w = readCheckpoint(modelDir);
  const inputs = ['input_ids', 'attention_mask', 'token_type_ids'].map((name) => ({ name, type: INT64, dims: ['batch_size', 'sequence_length'] }));
  const outputs = [{ name: 'last_hidden_state', type: FLOAT, dims: ['batch_size', 'sequence_length', shape.d] }];
  writeModels(outDir, 'bert', (quantized) => bertGraph(w, shape, quantized), inputs, outputs);
  copyPresent(modelDir, outDir, ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json']);
  if (!existsSync(join(modelDir, 'tokenizer.json'))) tokenizerFromVocab(modelDir, join(outDir, 'tokenizer.json'));
  return outDir;
}

/** Where a model folder's export goes: the built-in model's under its page name. */
export const exportDir = (modelDir, builtIn) => join(root, 'target/transformers', builtIn ? 'all-MiniLM-L6-v2' : basename(modelDir));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const builtIn = process.argv[2] == null;
  const modelDir = process.argv[2] ?? execFileSync(join(root, 'scripts/fetch-model.sh'), { encoding: 'utf8' }).trim();
  const outDir = process.argv[3] ?? exportDir(modelDir, builtIn);
  exportBert(modelDir, outDir);
  console.log(outDir);
}
