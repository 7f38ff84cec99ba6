// Builds ONNX models of the multi-head attention forward that headlab computes, for the
// onnxruntime-web comparison (bench/ort.mjs). The protobuf writer of bench/protobuf.mjs stands in
// for the `onnx` package: only the fields these graphs use (field numbers from onnx/onnx.proto).
//
//   plain: y = concat_h(softmax(x Wq_h (x Wk_h)^T / sqrt(d_k)) x Wv_h) Wo, from standard ops
//   fused: the same with com.microsoft's Attention op (QKV projection, all heads) and one MatMul
// Weights are initializers, so onnxruntime may pre-pack them as it does for a deployed model.

import { Writer } from './protobuf.mjs';

const FLOAT = 1;
const INT64 = 7;

/** TensorProto: dims=1, data_type=2, name=8, raw_data=9 (little-endian). */
function tensor(w, name, dims, values, type = FLOAT) {
  for (const d of dims) w.int(1, d);
  w.int(2, type);
  w.string(8, name);
  const raw = type === FLOAT ? new Uint8Array(Float32Array.from(values).buffer)
    : new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer);
  w.raw(9, raw);
}

/** ValueInfoProto for a float tensor of fixed shape: name=1, type=2 -> tensor_type=1 -> elem_type=1, shape=2 -> dim=1 -> dim_value=1. */
function valueInfo(w, name, dims) {
  w.string(1, name);
  w.message(2, (t) => t.message(1, (tt) => {
    tt.int(1, FLOAT);
    tt.message(2, (s) => dims.forEach((d) => s.message(1, (dim) => dim.int(1, d))));
  }));
}

/** GraphProto.node=1 -> NodeProto: input=1, output=2, name=3, op_type=4, attribute=5, domain=7. AttributeProto: name=1, i=3, ints=8, type=20. */
function node(graph, op, inputs, outputs, attrs = {}, domain = '') {
  graph.message(1, (w) => nodeFields(w, op, inputs, outputs, attrs, domain));
}

function nodeFields(w, op, inputs, outputs, attrs, domain) {
  inputs.forEach((i) => w.string(1, i));
  outputs.forEach((o) => w.string(2, o));
  w.string(3, `${op}_${outputs[0]}`);
  w.string(4, op);
  for (const [name, value] of Object.entries(attrs)) {
    w.message(5, (a) => {
      a.string(1, name);
      if (Array.isArray(value)) {
        value.forEach((v) => a.int(8, v));
        a.int(20, 7); // INTS
      } else {
        a.int(3, value);
        a.int(20, 2); // INT
      }
    });
  }
  if (domain) w.string(7, domain);
}

/**
 * The model bytes for `kind` ('plain' or 'fused') at n tokens, d_model d, h heads, with weights
 * wQkv (d x 3d, columns [Q | K | V]) and wO (d x d), both row-major Float32Arrays.
 */
export function mhaModel(kind, { n, d, h, wQkv, wO }) {
  const dk = d / h;
  const model = new Writer();
  model.int(1, 8); // ir_version
  model.string(2, 'headlab-bench');
  model.message(7, (g) => {
    g.string(2, `mha_${kind}`);
    if (kind === 'plain') {
      node(g, 'MatMul', ['x', 'w_qkv'], ['qkv']);
      node(g, 'Reshape', ['qkv', 'shape_qkv'], ['qkv4']);
      node(g, 'Transpose', ['qkv4'], ['qkv_t'], { perm: [1, 2, 0, 3] }); // 3 x h x n x dk
      node(g, 'Gather', ['qkv_t', 'i0'], ['q'], { axis: 0 });
      node(g, 'Gather', ['qkv_t', 'i1'], ['k'], { axis: 0 });
      node(g, 'Gather', ['qkv_t', 'i2'], ['v'], { axis: 0 });
      node(g, 'Transpose', ['k'], ['k_t'], { perm: [0, 2, 1] });
      node(g, 'MatMul', ['q', 'k_t'], ['scores_raw']);
      node(g, 'Mul', ['scores_raw', 'scale'], ['scores']);
      node(g, 'Softmax', ['scores'], ['probs'], { axis: -1 });
      node(g, 'MatMul', ['probs', 'v'], ['heads']);
      node(g, 'Transpose', ['heads'], ['heads_t'], { perm: [1, 0, 2] });
      node(g, 'Reshape', ['heads_t', 'shape_concat'], ['concat']);
      node(g, 'MatMul', ['concat', 'w_o'], ['y']);
      g.message(5, (t) => tensor(t, 'w_qkv', [d, 3 * d], wQkv));
      g.message(5, (t) => tensor(t, 'w_o', [d, d], wO));
      g.message(5, (t) => tensor(t, 'shape_qkv', [4], [n, 3, h, dk], INT64));
      g.message(5, (t) => tensor(t, 'shape_concat', [2], [n, d], INT64));
      for (const i of [0, 1, 2]) g.message(5, (t) => tensor(t, `i${i}`, [], [i], INT64));
      g.message(5, (t) => tensor(t, 'scale', [], [1 / Math.sqrt(dk)]));
      g.message(11, (v) => valueInfo(v, 'x', [n, d]));
      g.message(12, (v) => valueInfo(v, 'y', [n, d]));
    } else {
      node(g, 'Attention', ['x', 'w_qkv', 'b_qkv'], ['concat'], { num_heads: h }, 'com.microsoft');
      node(g, 'MatMul', ['concat', 'w_o'], ['y']);
      g.message(5, (t) => tensor(t, 'w_qkv', [d, 3 * d], wQkv));
      g.message(5, (t) => tensor(t, 'b_qkv', [3 * d], new Float32Array(3 * d)));
      g.message(5, (t) => tensor(t, 'w_o', [d, d], wO));
      g.message(11, (v) => valueInfo(v, 'x', [1, n, d]));
      g.message(12, (v) => valueInfo(v, 'y', [1, n, d]));
    }
  });
  model.message(8, (o) => o.string(1, '').int(2, 17)); // opset_import: ai.onnx 17
  if (kind === 'fused') model.message(8, (o) => o.string(1, 'com.microsoft').int(2, 1));
  return model.bytes();
}
