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
// transformers.js's scripts/quantize.py calls it for q8) makes of that graph, written here
// directly: every MatMul with a constant weight becomes DynamicQuantizeLinear (activations uint8,
// per tensor) -> MatMulInteger with the weight in int8 (per output column, symmetric, reduced
// range [-64, 64]: transformers.js's conversion sets per_channel and reduce_range for BERT, and
// picks int8 weights for q8 where the graph has no Conv) -> Cast -> Mul by both scales; each embedding table becomes uint8 (per tensor, asymmetric) with
// Gather -> DequantizeLinear. MatMuls of two activations (scores, weighted values) stay float.
import { readFileSync, writeFileSync, mkdirSync, copyFileSync, existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { homedir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Writer } from './protobuf.mjs';

const FLOAT = 1, UINT8 = 2, INT8 = 3, INT64 = 7;

/** TensorProto: dims=1, data_type=2, name=8, raw_data=9 (little-endian). */
function tensorFields(w, name, dims, type, data) {
  dims.forEach((d) => w.int(1, d));
  w.int(2, type);
  w.string(8, name);
  let raw;
  if (type === FLOAT) raw = new Uint8Array(Float32Array.from(data).buffer);
  else if (type === INT64) raw = new Uint8Array(BigInt64Array.from(data, BigInt).buffer);
  else if (type === UINT8) raw = Uint8Array.from(data);
  else if (type === INT8) raw = new Uint8Array(Int8Array.from(data).buffer);
  w.raw(9, raw);
}

/** A graph under construction: nodes and initializers in order. */
class Graph {
  constructor() { this.nodes = []; this.inits = []; this.count = 0; }
  init(name, dims, type, data) { this.inits.push({ name, dims, type, data }); return name; }
  f(name, value) { return this.init(name, [], FLOAT, [value]); }
  i64(name, values) { return this.init(name, [values.length], INT64, values); }
  /** A node; returns its first output's name (generated unless given). */
  op(type, inputs, attrs = {}, outputs = null, domain = '') {
    const outs = outputs ?? [`${type.toLowerCase()}_${this.count++}`];
    this.nodes.push({ type, inputs, outputs: outs, attrs, domain });
    return outs[0];
  }
}

function nodeFields(w, { type, inputs, outputs, attrs, domain }, index) {
  inputs.forEach((i) => w.string(1, i));
  outputs.forEach((o) => w.string(2, o));
  w.string(3, `${type}_${index}`);
  w.string(4, type);
  for (const [name, value] of Object.entries(attrs)) {
    w.message(5, (a) => {
      a.string(1, name);
      if (Array.isArray(value)) { value.forEach((v) => a.int(8, v)); a.int(20, 7); } // INTS
      else if (Number.isInteger(value) && name !== 'epsilon') { a.int(3, value); a.int(20, 2); } // INT
      else { a.float(2, value); a.int(20, 1); } // FLOAT
    });
  }
  if (domain) w.string(7, domain);
}

/** ValueInfoProto with symbolic dims (strings: dim_param=2) and fixed ones (numbers: dim_value=1). */
function valueInfo(w, name, type, dims) {
  w.string(1, name);
  w.message(2, (t) => t.message(1, (tt) => {
    tt.int(1, type);
    tt.message(2, (s) => dims.forEach((d) => s.message(1, (dim) => (typeof d === 'string' ? dim.string(2, d) : dim.int(1, d)))));
  }));
}

function model(graph, name, d) {
  const m = new Writer();
  m.int(1, 8); // ir_version 8
  m.string(2, 'headlab');
  m.message(7, (g) => {
    graph.nodes.forEach((n, i) => g.message(1, (w) => nodeFields(w, n, i)));
    g.string(2, name);
    graph.inits.forEach((t) => g.message(5, (w) => tensorFields(w, t.name, t.dims, t.type, t.data)));
    for (const input of ['input_ids', 'attention_mask', 'token_type_ids']) {
      g.message(11, (v) => valueInfo(v, input, INT64, ['batch_size', 'sequence_length']));
    }
    g.message(12, (v) => valueInfo(v, 'last_hidden_state', FLOAT, ['batch_size', 'sequence_length', d]));
  });
  m.message(8, (o) => o.string(1, '').int(2, 17)); // opset_import: ai.onnx 17
  return m.bytes();
}

/** An IEEE half (`bits`) as a number. */
function half(bits) {
  const sign = bits & 0x8000 ? -1 : 1, exp = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** The float tensors of one safetensors file as f32 (F64 rounded; F16, BF16 widened), by name. */
function readSafetensorsFile(path) {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    // Integer tensors (position_ids buffers some exports keep) are not weights.
    if (name === '__metadata__' || /^(I|U)\d+$|^BOOL$/.test(t.dtype)) continue;
    const [a, b] = t.data_offsets;
    const bytes = buf.subarray(8 + n + a, 8 + n + b);
    const copy = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
    let data;
    if (t.dtype === 'F32') data = new Float32Array(copy);
    else if (t.dtype === 'F64') data = Float32Array.from(new Float64Array(copy));
    else if (t.dtype === 'F16') data = Float32Array.from(new Uint16Array(copy), half);
    else if (t.dtype === 'BF16') {
      // bf16 is the top half of an f32's bits.
      const top = new Uint16Array(copy), bits = new Uint32Array(top.length);
      for (let i = 0; i < top.length; i++) bits[i] = top[i] << 16;
      data = new Float32Array(bits.buffer);
    }
    else throw new Error(`${path}: tensor ${name} is ${t.dtype}; the export reads F64, F32, F16 and BF16`);
    out[name] = { shape: t.shape, data };
  }
  return out;
}

/**
 * The tensors of a checkpoint folder (model.safetensors, or the shards its index names) under
 * BERT's own names: a BertFor... prefix (`bert.`) dropped, LayerNorm's gamma/beta read as
 * weight/bias.
 */
export function readCheckpoint(dir) {
  const index = join(dir, 'model.safetensors.index.json');
  const files = existsSync(index)
    ? [...new Set(Object.values(JSON.parse(readFileSync(index, 'utf8')).weight_map))]
    : ['model.safetensors'];
  const out = {};
  for (const f of files) {
    for (const [name, t] of Object.entries(readSafetensorsFile(join(dir, f)))) {
      const plain = name.replace(/^bert\./, '').replace(/LayerNorm\.gamma$/, 'LayerNorm.weight').replace(/LayerNorm\.beta$/, 'LayerNorm.bias');
      out[plain] = t;
    }
  }
  return out;
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

/** `[out, in]` row-major to `[in, out]`. */
function transpose({ shape: [rows, cols], data }) {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = data[r * cols + c];
  return t;
}

/**
 * int8 per output column of `w` (`[in, out]`, row-major), symmetric with the reduced range
 * [-64, 64] (`per_channel` and `reduce_range`, which transformers.js's conversion sets for BERT):
 * scale = max|column| / 64, zero point 0.
 */
function quantizeInt8Columns(w, out) {
  const rows = w.length / out;
  const scale = new Float32Array(out);
  for (let c = 0; c < out; c++) {
    let absmax = 0;
    for (let r = 0; r < rows; r++) absmax = Math.max(absmax, Math.abs(w[r * out + c]));
    scale[c] = absmax > 0 ? absmax / 64 : 1;
  }
  const q = new Int8Array(w.length);
  for (let i = 0; i < w.length; i++) q[i] = Math.max(-64, Math.min(64, roundEven(Math.fround(w[i] / scale[i % out]))));
  return { q, scale, zero: new Int8Array(out) };
}

/** uint8 per tensor, asymmetric over [min(w, 0), max(w, 0)]. */
function quantizeUint8(data) {
  let lo = 0, hi = 0;
  for (const v of data) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const scale = hi > lo ? (hi - lo) / 255 : 1;
  const zero = Math.max(0, Math.min(255, roundEven(-lo / scale)));
  const q = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) q[i] = Math.max(0, Math.min(255, roundEven(data[i] / scale) + zero));
  return { q, scale: Math.fround(scale), zero };
}

/** Round half to even, as numpy's rint. */
function roundEven(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The BERT graph of `w`; `quantized` gives the 8-bit form. */
function bertGraph(w, { d: D, heads: HEADS, dk: DK, layers: LAYERS, eps: LN_EPS, act }, quantized) {
  const g = new Graph();
  const quantizedOnce = new Set();
  // A constant weight for the right of a MatMul (`[in, out]`), and the product with it.
  const matmul = (x, name, weightT) => {
    if (!quantized) return g.op('MatMul', [x, g.init(name, [weightT.length / weightT.out, weightT.out], FLOAT, weightT)]);
    const { q, scale, zero } = quantizeInt8Columns(weightT, weightT.out);
    const wq = g.init(`${name}_quantized`, [weightT.length / weightT.out, weightT.out], INT8, q);
    const ws = g.init(`${name}_scale`, [weightT.out], FLOAT, scale);
    const wz = g.init(`${name}_zero_point`, [weightT.out], INT8, zero);
    // Each activation is quantized once, however many products read it (Q, K and V share one).
    const [xq, xs, xz] = [`${x}_quantized`, `${x}_scale`, `${x}_zero_point`];
    if (!quantizedOnce.has(x)) g.op('DynamicQuantizeLinear', [x], {}, [xq, xs, xz]);
    quantizedOnce.add(x);
    const yi = g.op('MatMulInteger', [xq, wq, xz, wz]);
    const yf = g.op('Cast', [yi], { to: FLOAT });
    const s = g.op('Mul', [xs, ws]);
    return g.op('Mul', [yf, s]);
  };
  const linear = (x, prefix) => {
    const weight = w[`${prefix}.weight`];
    const t = transpose(weight);
    t.out = weight.shape[0];
    return g.op('Add', [g.init(`${prefix}.bias`, [weight.shape[0]], FLOAT, w[`${prefix}.bias`].data), matmul(x, `${prefix}.weight_T`, t)]);
  };
  // An embedding table looked up by `ids`.
  const lookup = (name, ids) => {
    const { shape, data } = w[name];
    if (!quantized) return g.op('Gather', [g.init(name, shape, FLOAT, data), ids]);
    const { q, scale, zero } = quantizeUint8(data);
    const gq = g.op('Gather', [g.init(`${name}_quantized`, shape, UINT8, q), ids]);
    return g.op('DequantizeLinear', [gq, g.f(`${name}_scale`, scale), g.init(`${name}_zero_point`, [], UINT8, [zero])]);
  };
  const norm = (x, prefix) => g.op('LayerNormalization',
    [x, g.init(`${prefix}.weight`, [D], FLOAT, w[`${prefix}.weight`].data), g.init(`${prefix}.bias`, [D], FLOAT, w[`${prefix}.bias`].data)],
    { axis: -1, epsilon: LN_EPS });

  // Embeddings: word[input_ids] + token_type[token_type_ids] + position[0 .. seq).
  const seq = g.op('Gather', [g.op('Shape', ['input_ids']), g.init('one_index', [], INT64, [1])], { axis: 0 });
  const positions = g.op('Range', [g.init('zero_i64', [], INT64, [0]), seq, g.init('one_i64', [], INT64, [1])]);
  const words = lookup('embeddings.word_embeddings.weight', 'input_ids');
  const types = lookup('embeddings.token_type_embeddings.weight', 'token_type_ids');
  const pos = lookup('embeddings.position_embeddings.weight', positions);
  let x = norm(g.op('Add', [g.op('Add', [words, types]), pos]), 'embeddings.LayerNorm');

  // The mask added to the scores: 0 where attention_mask is 1, float32's lowest where it is 0.
  const maskF = g.op('Cast', [g.op('Unsqueeze', ['attention_mask', g.i64('mask_axes', [1, 2])])], { to: FLOAT });
  const maskAdd = g.op('Mul', [g.op('Sub', [g.f('one_f', 1), maskF]), g.f('mask_min', -3.4028234663852886e38)]);
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
    const scores = g.op('Add', [g.op('Div', [g.op('MatMul', [q, k]), scale]), maskAdd]);
    const probs = g.op('Softmax', [scores], { axis: -1 });
    const ctx = g.op('Reshape', [g.op('Transpose', [g.op('MatMul', [probs, v])], { perm: [0, 2, 1, 3] }), merged]);
    x = norm(g.op('Add', [linear(ctx, p + 'attention.output.dense'), x]), p + 'attention.output.LayerNorm');
    const h = linear(x, p + 'intermediate.dense');
    const gelu = act === 'gelu'
      ? g.op('Mul', [g.op('Mul', [h, g.op('Add', [g.op('Erf', [g.op('Div', [h, sqrt2])]), g.f(`one_${l}`, 1)])]), halfValue])
      // gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      : g.op('Mul', [g.op('Mul', [h, g.op('Add', [g.op('Tanh', [g.op('Mul', [g.op('Add', [h, g.op('Mul', [g.op('Mul', [g.op('Mul', [h, h]), h]), g.f(`cubic_${l}`, 0.044715)])]), g.f(`tanh_scale_${l}`, Math.sqrt(2 / Math.PI))])]), g.f(`one_${l}`, 1)])]), halfValue]);
    const last = l === LAYERS - 1;
    const y = g.op('Add', [linear(gelu, p + 'output.dense'), x]);
    x = g.op('LayerNormalization',
      [y, g.init(`${p}output.LayerNorm.weight`, [D], FLOAT, w[`${p}output.LayerNorm.weight`].data),
        g.init(`${p}output.LayerNorm.bias`, [D], FLOAT, w[`${p}output.LayerNorm.bias`].data)],
      { axis: -1, epsilon: LN_EPS }, last ? ['last_hidden_state'] : null);
  }
  return g;
}

const root = fileURLToPath(new URL('..', import.meta.url));

/** tokenizer.json for a folder that has vocab.txt alone: Python `tokenizers`' BertWordPiece on
 * it, with the casing tokenizer_config.json says (the venv scripts/install-tools.sh test makes). */
function tokenizerFromVocab(modelDir, out) {
  const python = join(process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools'), 'venv/bin/python');
  const config = join(modelDir, 'tokenizer_config.json');
  const lower = existsSync(config) ? JSON.parse(readFileSync(config, 'utf8')).do_lower_case ?? true : true;
  execFileSync(python, ['-c', 'import sys; from tokenizers import BertWordPieceTokenizer as T; '
    + 'T(sys.argv[1], lowercase=sys.argv[3] == "1", strip_accents=None).save(sys.argv[2])',
  join(modelDir, 'vocab.txt'), out, lower ? '1' : '0']);
}

/** Writes the folder; returns its path. */
export function exportBert(modelDir, outDir) {
  const shape = bertShape(modelDir);
  const w = readCheckpoint(modelDir);
  mkdirSync(join(outDir, 'onnx'), { recursive: true });
  writeFileSync(join(outDir, 'onnx/model.onnx'), model(bertGraph(w, shape, false), 'bert_fp32', shape.d));
  writeFileSync(join(outDir, 'onnx/model_quantized.onnx'), model(bertGraph(w, shape, true), 'bert_q8', shape.d));
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json']) {
    if (existsSync(join(modelDir, f))) copyFileSync(join(modelDir, f), join(outDir, f));
  }
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
