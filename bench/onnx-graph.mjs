// What the ONNX exporters of the benchmarks share (bench/onnx-bert.mjs, bench/onnx-gpt2.mjs): a
// graph under construction and the ModelProto it is written as (bench/protobuf.mjs, field
// numbers from onnx/onnx.proto; ir_version 8, opset 17), the safetensors reader (F64, F32, F16,
// BF16, whole or sharded), the 8-bit forms (the weights as onnxruntime's dynamic quantisation
// stores them), the pieces of a transformer layer both graphs build the same way, and the
// Python `tokenizers` that makes a tokenizer.json where a checkpoint has its vocabulary alone.
//
// With `new Graph(true)`, `matmul` and `lookup` write what onnxruntime's dynamic quantisation
// (ONNXQuantizer, IntegerOps, as transformers.js's scripts/quantize.py calls it for q8) makes of a
// MatMul with a constant weight and of an embedding table: DynamicQuantizeLinear (activations
// uint8, per tensor) -> MatMulInteger with the weight in int8 (symmetric; per output column with
// the reduced range [-64, 64] where transformers.js's conversion sets per_channel and
// reduce_range, as for BERT, and per tensor over [-127, 127] where it does not, as for GPT-2; int8
// weights for q8 where the graph has no Conv) -> Cast -> Mul by both scales; the table in uint8
// (per tensor, asymmetric) with Gather -> DequantizeLinear. MatMuls of two activations stay
// float. The benchmarks' full runs have the peer's own tools make these graphs instead
// (bench/peer/convert.py); the hand-written ones serve the smoke runs, whose tools CI does not
// install.
import { readFileSync, writeFileSync, mkdirSync, copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Writer } from './protobuf.mjs';

export const FLOAT = 1, UINT8 = 2, INT8 = 3, INT64 = 7;

/** The repository's root. */
export const root = fileURLToPath(new URL('..', import.meta.url));

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

/** A graph under construction: nodes and initializers in order; `quantized` gives the 8-bit forms
 * of `matmul` and `lookup`. */
export class Graph {
  /** `quantized`: the 8-bit graph; `perChannel`: its weights per output column in the reduced
   * range (false: per tensor, full range). */
  constructor(quantized = false, { perChannel = true } = {}) {
    this.nodes = []; this.inits = []; this.count = 0;
    this.quantized = quantized;
    this.perChannel = perChannel;
    // The activations already quantized: each once, however many products read it.
    this.quantizedOnce = new Set();
  }
  init(name, dims, type, data) { this.inits.push({ name, dims, type, data }); return name; }
  f(name, value) { return this.init(name, [], FLOAT, [value]); }
  i64(name, values) { return this.init(name, [values.length], INT64, values); }
  /** A node; returns its first output's name (generated unless given). */
  op(type, inputs, attrs = {}, outputs = null, domain = '') {
    const outs = outputs ?? [`${type.toLowerCase()}_${this.count++}`];
    this.nodes.push({ type, inputs, outputs: outs, attrs, domain });
    return outs[0];
  }

  /** `x` times the constant `weight` (`[in, out]`, row-major) stored as `name`; the product named
   * `outputs[0]` where given. */
  matmul(x, name, weight, out, outputs = null) {
    if (!this.quantized) return this.op('MatMul', [x, this.init(name, [weight.length / out, out], FLOAT, weight)], {}, outputs);
    const { q, scale, zero } = this.perChannel ? quantizeInt8Columns(weight, out) : quantizeInt8Tensor(weight);
    const wq = this.init(`${name}_quantized`, [weight.length / out, out], INT8, q);
    const dims = this.perChannel ? [out] : [];
    const ws = this.init(`${name}_scale`, dims, FLOAT, scale);
    const wz = this.init(`${name}_zero_point`, dims, INT8, zero);
    const [xq, xs, xz] = [`${x}_quantized`, `${x}_scale`, `${x}_zero_point`];
    if (!this.quantizedOnce.has(x)) this.op('DynamicQuantizeLinear', [x], {}, [xq, xs, xz]);
    this.quantizedOnce.add(x);
    const yi = this.op('MatMulInteger', [xq, wq, xz, wz]);
    const yf = this.op('Cast', [yi], { to: FLOAT });
    const s = this.op('Mul', [xs, ws]);
    return this.op('Mul', [yf, s], {}, outputs);
  }

  /** The rows `ids` of the embedding table `{ shape, data }`, stored as `name`. */
  lookup(name, { shape, data }, ids) {
    if (!this.quantized) return this.op('Gather', [this.init(name, shape, FLOAT, data), ids]);
    const { q, scale, zero } = quantizeUint8(data);
    const gq = this.op('Gather', [this.init(`${name}_quantized`, shape, UINT8, q), ids]);
    return this.op('DequantizeLinear', [gq, this.f(`${name}_scale`, scale), this.init(`${name}_zero_point`, [], UINT8, [zero])]);
  }

  /** LayerNormalization over the last axis with `${name}.weight` and `${name}.bias`. */
  layerNorm(x, name, weight, bias, epsilon, outputs = null) {
    return this.op('LayerNormalization',
      [x, this.init(`${name}.weight`, [weight.length], FLOAT, weight), this.init(`${name}.bias`, [bias.length], FLOAT, bias)],
      { axis: -1, epsilon }, outputs);
  }

  /** `{ seq, positions }`: input_ids' length (a scalar) and 0 .. seq (int64). */
  positions() {
    const seq = this.op('Gather', [this.op('Shape', ['input_ids']), this.init('one_index', [], INT64, [1])], { axis: 0 });
    const positions = this.op('Range', [this.init('zero_i64', [], INT64, [0]), seq, this.init('one_i64', [], INT64, [1])]);
    return { seq, positions };
  }

  /** attention_mask as float, `[batch, 1, 1, seq]`. */
  maskFloat() {
    return this.op('Cast', [this.op('Unsqueeze', ['attention_mask', this.i64('mask_axes', [1, 2])])], { to: FLOAT });
  }

  /** What the scores get added: 0 where `allowed` (float) is 1, float32's lowest where it is 0. */
  maskAdd(allowed) {
    return this.op('Mul', [this.op('Sub', [this.f('one_f', 1), allowed]), this.f('mask_min', -3.4028234663852886e38)]);
  }

  /** Attention of heads `q` (`[b, h, s, dk]`), `k` (`[b, h, dk, s]`), `v` (`[b, h, s, dk]`): scores
   * divided by `scale` (sqrt dk), `mask` added, softmax, weighted values, heads merged by
   * Reshape to `merged` (`[0, 0, d]`). */
  attend(q, k, v, scale, mask, merged) {
    const scores = this.op('Add', [this.op('Div', [this.op('MatMul', [q, k]), scale]), mask]);
    const probs = this.op('Softmax', [scores], { axis: -1 });
    return this.op('Reshape', [this.op('Transpose', [this.op('MatMul', [probs, v])], { perm: [0, 2, 1, 3] }), merged]);
  }

  /** gelu_new, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), its constants named for layer
   * `l` and 0.5 the graph's `half`. */
  geluTanh(h, l, half) {
    return this.op('Mul', [this.op('Mul', [h, this.op('Add', [this.op('Tanh', [this.op('Mul', [this.op('Add', [h, this.op('Mul', [this.op('Mul', [this.op('Mul', [h, h]), h]), this.f(`cubic_${l}`, 0.044715)])]), this.f(`tanh_scale_${l}`, Math.sqrt(2 / Math.PI))])]), this.f(`one_${l}`, 1)])]), half]);
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

/** The ModelProto of `graph`, named `name`, with `inputs` and `outputs` as `[{ name, type, dims }]`. */
export function model(graph, name, inputs, outputs) {
  const m = new Writer();
  m.int(1, 8); // ir_version 8
  m.string(2, 'headlab');
  m.message(7, (g) => {
    graph.nodes.forEach((n, i) => g.message(1, (w) => nodeFields(w, n, i)));
    g.string(2, name);
    graph.inits.forEach((t) => g.message(5, (w) => tensorFields(w, t.name, t.dims, t.type, t.data)));
    inputs.forEach((v) => g.message(11, (w) => valueInfo(w, v.name, v.type, v.dims)));
    outputs.forEach((v) => g.message(12, (w) => valueInfo(w, v.name, v.type, v.dims)));
  });
  m.message(8, (o) => o.string(1, '').int(2, 17)); // opset_import: ai.onnx 17
  return m.bytes();
}

/**
 * OUT_DIR/onnx/model.onnx from `build(false)` and OUT_DIR/onnx/model_quantized.onnx from
 * `build(true)` (graphs named `${name}_fp32` and `${name}_q8`), one at a time.
 */
export function writeModels(outDir, name, build, inputs, outputs) {
  mkdirSync(join(outDir, 'onnx'), { recursive: true });
  writeFileSync(join(outDir, 'onnx/model.onnx'), model(build(false), `${name}_fp32`, inputs, outputs));
  writeFileSync(join(outDir, 'onnx/model_quantized.onnx'), model(build(true), `${name}_q8`, inputs, outputs));
}

/** Copies those of `files` that `from` has into `to`. */
export function copyPresent(from, to, files) {
  for (const f of files) if (existsSync(join(from, f))) copyFileSync(join(from, f), join(to, f));
}

/** An IEEE half (`bits`) as a number. */
export function half(bits) {
  const sign = bits & 0x8000 ? -1 : 1, exp = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** The float tensors of one safetensors file as f32 (F64 rounded; F16, BF16 widened), by name. */
export function readSafetensorsFile(path) {
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
 * The float tensors of a checkpoint folder (model.safetensors, or the shards its index names),
 * each under `rename(name)`; a tensor `rename` maps to null is left out.
 */
export function readCheckpointTensors(dir, rename) {
  const index = join(dir, 'model.safetensors.index.json');
  const files = existsSync(index)
    ? [...new Set(Object.values(JSON.parse(readFileSync(index, 'utf8')).weight_map))]
    : ['model.safetensors'];
  const out = {};
  for (const f of files) {
    for (const [name, t] of Object.entries(readSafetensorsFile(join(dir, f)))) {
      const plain = rename(name);
      if (plain != null) out[plain] = t;
    }
  }
  return out;
}

/** `[out, in]` row-major to `[in, out]`. */
export function transpose({ shape: [rows, cols], data }) {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = data[r * cols + c];
  return t;
}

/**
 * int8 per output column of `w` (`[in, out]`, row-major), symmetric with the reduced range
 * [-64, 64] (`per_channel` and `reduce_range`, which transformers.js's conversion sets):
 * scale = max|column| / 64, zero point 0.
 */
export function quantizeInt8Columns(w, out) {
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

/**
 * int8 per tensor, symmetric over the full range [-127, 127] (neither `per_channel` nor
 * `reduce_range`: transformers.js's conversion for GPT-2): scale = max|w| / 127, zero point 0.
 */
export function quantizeInt8Tensor(w) {
  let absmax = 0;
  for (const v of w) absmax = Math.max(absmax, Math.abs(v));
  const scale = absmax > 0 ? Math.fround(absmax / 127) : 1;
  const q = new Int8Array(w.length);
  for (let i = 0; i < w.length; i++) q[i] = Math.max(-127, Math.min(127, roundEven(Math.fround(w[i] / scale))));
  return { q, scale: [scale], zero: [0] };
}

/** uint8 per tensor, asymmetric over [min(w, 0), max(w, 0)]. */
export function quantizeUint8(data) {
  let lo = 0, hi = 0;
  for (const v of data) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const scale = hi > lo ? (hi - lo) / 255 : 1;
  const zero = Math.max(0, Math.min(255, roundEven(-lo / scale)));
  const q = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) q[i] = Math.max(0, Math.min(255, roundEven(data[i] / scale) + zero));
  return { q, scale: Math.fround(scale), zero };
}

/** Round half to even, as numpy's rint. */
export function roundEven(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Runs `code` (Python that saves a tokenizer.json, given `args` as sys.argv[1:]) in the tools'
 * venv, which has Python `tokenizers` (scripts/install-tools.sh test makes it): how a folder with
 * its vocabulary alone gets the tokenizer.json a Hugging Face conversion would give it.
 */
export function tokenizerWithPython(code, args) {
  const python = join(process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools'), 'venv/bin/python');
  execFileSync(python, ['-c', code, ...args]);
}
