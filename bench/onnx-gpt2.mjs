// Exports a GPT-2-family checkpoint folder to ONNX, as a folder transformers.js loads with
// `allowRemoteModels = false` (`AutoModelForCausalLM.from_pretrained(name, { dtype: 'fp32' | 'q8' })`,
// `env.localModelPath` the folder above OUT_DIR): for the decoder benchmarks against headlab's own
// implementation. Any folder the page loads as GPT-2 (config.json with model_type gpt2;
// model.safetensors in F32, F16 or BF16, whole or sharded, its names with GPT2LMHeadModel's
// `transformer.` prefix or without; vocab.json + merges.txt or tokenizer.json):
//
//   node bench/onnx-gpt2.mjs MODEL_DIR [OUT_DIR]
//     OUT_DIR: default target/transformers/<MODEL_DIR's last name>; printed on stdout
//
// writes OUT_DIR/onnx/model.onnx (fp32) and OUT_DIR/onnx/model_quantized.onnx (8-bit, the file
// transformers.js picks by default for wasm, `dtype: 'q8'`), and copies config.json and the
// tokenizer files next to them. A folder with vocab.json + merges.txt alone gets the tokenizer.json
// Python `tokenizers`' ByteLevelBPE makes of them (no prefix space, the config's bos/eos token as
// special tokens), as a Hugging Face conversion would; one without tokenizer_config.json gets a
// minimal one (GPT2Tokenizer, those tokens, n_positions as model_max_length).
// bench/onnx-gpt2-check.mjs loads both files with transformers.js and compares them with the
// float64 reference of scripts/make-checkpoints.sh's folders.
//
// The fp32 graph is GPT-2 (pre-LayerNorm, causal) from standard ops (opset 17), one full forward
// pass without a key/value cache: what a benchmark of forward passes (`await model({ input_ids,
// attention_mask })`) runs; transformers.js 4 feeds past_key_values only to a graph that has them.
// (`model.generate()` does not work with it: after the first step transformers.js's loop passes
// only the newest token, with the whole attention mask, counting on the cache for the rest.)
// Embeddings wte[input_ids] + wpe[0 .. seq); per layer LayerNorm ln_1, the Conv1D
// c_attn (weight [in, out], so x @ W as stored) as one MatMul split into q, k, v, heads of
// n_embd / n_head, scores q k^T / sqrt(d_k) plus a mask that is 0 where key j <= query i and
// attention_mask[j] is 1 and float32's lowest elsewhere (Trilu of ones times the attention mask),
// Softmax, weighted values, heads merged, c_proj, residual; LayerNorm ln_2, c_fc, gelu_new as
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), c_proj, residual; LayerNorm ln_f; logits =
// x @ wte^T (the tied head as a constant MatMul weight; lm_head.weight instead where the config
// unties it). Inputs input_ids, attention_mask (int64, batch x sequence); output logits (float,
// batch x sequence x vocabulary). Sizes and LayerNorm epsilon come from config.json (n_embd,
// n_head, n_layer, n_inner or 4 n_embd, vocab_size, layer_norm_epsilon or 1e-5).
//
// The 8-bit graph is what onnxruntime's dynamic quantisation (as transformers.js's
// scripts/quantize.py calls it for q8) makes of that graph, written directly (bench/onnx-graph.mjs,
// shared with bench/onnx-bert.mjs): every MatMul with a constant weight (the four Conv1Ds of each
// layer and the head) becomes DynamicQuantizeLinear (activations uint8, per tensor) ->
// MatMulInteger with the weight in int8 (symmetric, per tensor over [-127, 127]: transformers.js's
// scripts/convert.py lists gpt2 among the models it quantizes without per_channel and
// reduce_range) ->
// Cast -> Mul by both scales; wte and wpe become uint8 tables (per tensor, asymmetric) with
// Gather -> DequantizeLinear. MatMuls of two activations (scores, weighted values) stay float.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Graph, FLOAT, INT64, copyPresent, readCheckpointTensors, root, tokenizerWithPython, transpose, writeModels } from './onnx-graph.mjs';

/** The sizes the graph needs, from config.json; GPT-2 only. */
export function gpt2Shape(dir) {
  const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  if (c.model_type !== 'gpt2') throw new Error(`${dir}: model_type ${c.model_type}; the export writes GPT-2's graph`);
  const act = c.activation_function ?? 'gelu_new';
  // gelu_pytorch_tanh is the same function.
  if (act !== 'gelu_new' && act !== 'gelu_pytorch_tanh') throw new Error(`${dir}: activation_function ${act}; the export writes gelu_new`);
  const d = c.n_embd, heads = c.n_head;
  if (d % heads !== 0) throw new Error(`${dir}: n_embd ${d} is not a multiple of n_head ${heads}`);
  return {
    d, heads, dk: d / heads, layers: c.n_layer, ffn: c.n_inner ?? 4 * d, vocab: c.vocab_size,
    eps: c.layer_norm_epsilon ?? 1e-5, tied: c.tie_word_embeddings ?? true,
  };
}

/**
 * The float tensors of a checkpoint folder without GPT2LMHeadModel's `transformer.` prefix, less
 * the attention's causal-mask buffers (`attn.bias`, `attn.masked_bias`) old checkpoints keep.
 */
export function readGpt2Checkpoint(dir) {
  return readCheckpointTensors(dir, (name) => (/\.attn\.(bias|masked_bias)$/.test(name) ? null : name.replace(/^transformer\./, '')));
}

/** Checks that the tensors the graph reads are there, in the config's shapes. */
function checkShapes(w, { d, layers, ffn, vocab, tied }, dir) {
  const want = { 'wte.weight': [vocab, d], 'ln_f.weight': [d], 'ln_f.bias': [d] };
  if (!tied) want['lm_head.weight'] = [vocab, d];
  for (let l = 0; l < layers; l++) {
    const p = `h.${l}.`;
    for (const n of ['ln_1', 'ln_2']) Object.assign(want, { [`${p}${n}.weight`]: [d], [`${p}${n}.bias`]: [d] });
    for (const [n, inp, out] of [['attn.c_attn', d, 3 * d], ['attn.c_proj', d, d], ['mlp.c_fc', d, ffn], ['mlp.c_proj', ffn, d]]) {
      Object.assign(want, { [`${p}${n}.weight`]: [inp, out], [`${p}${n}.bias`]: [out] });
    }
  }
  for (const [name, shape] of Object.entries(want)) {
    if (!w[name]) throw new Error(`${dir}: no tensor ${name} (nor transformer.${name})`);
    if (w[name].shape.join() !== shape.join()) throw new Error(`${dir}: ${name} is [${w[name].shape}], the config says [${shape}]`);
  }
  if (!w['wpe.weight'] || w['wpe.weight'].shape[1] !== d) throw new Error(`${dir}: no wpe.weight of width ${d}`);
}

/** The GPT-2 graph of `w`; `quantized` gives the 8-bit form. */
function gpt2Graph(w, { d: D, heads: HEADS, dk: DK, layers: LAYERS, vocab: VOCAB, eps: LN_EPS, tied }, quantized) {
  // transformers.js's conversion lists gpt2 among the models quantized per tensor, full range.
  const g = new Graph(quantized, { perChannel: false });
  // A Conv1D: weight `[in, out]`, the MatMul's right as stored.
  const conv1d = (x, prefix) => {
    const { shape: [, out], data } = w[`${prefix}.weight`];
    return g.op('Add', [g.matmul(x, `${prefix}.weight`, data, out), g.init(`${prefix}.bias`, [out], FLOAT, w[`${prefix}.bias`].data)]);
  };
  const norm = (x, prefix, outputs = null) => g.layerNorm(x, prefix, w[`${prefix}.weight`].data, w[`${prefix}.bias`].data, LN_EPS, outputs);

  // Embeddings: wte[input_ids] + wpe[0 .. seq).
  const { seq, positions } = g.positions();
  let x = g.op('Add', [g.lookup('wte.weight', w['wte.weight'], 'input_ids'), g.lookup('wpe.weight', w['wpe.weight'], positions)]);

  // The mask added to the scores, [batch, 1, seq, seq]: 0 where key j <= query i (the lower
  // triangle of a seq x seq of ones) and attention_mask[j] is 1, float32's lowest elsewhere.
  const seq1 = g.op('Unsqueeze', [seq, g.i64('axis_0', [0])]);
  const square = g.op('Concat', [seq1, seq1], { axis: 0 });
  const causal = g.op('Trilu', [g.op('Expand', [g.f('causal_one', 1), square])], { upper: 0 });
  const maskAdd = g.maskAdd(g.op('Mul', [causal, g.maskFloat()]));
  const qkvSplit = g.i64('qkv_split', [D, D, D]);
  const heads = g.i64('heads_shape', [0, 0, HEADS, DK]);
  const merged = g.i64('merged_shape', [0, 0, D]);
  const scale = g.f('sqrt_dk', Math.sqrt(DK));
  const halfValue = g.f('half', 0.5);

  for (let l = 0; l < LAYERS; l++) {
    const p = `h.${l}.`;
    const [q, k, v] = [`${p}q`, `${p}k`, `${p}v`];
    g.op('Split', [conv1d(norm(x, p + 'ln_1'), p + 'attn.c_attn'), qkvSplit], { axis: -1 }, [q, k, v]);
    const split = (t, perm) => g.op('Transpose', [g.op('Reshape', [t, heads])], { perm });
    const ctx = g.attend(split(q, [0, 2, 1, 3]), split(k, [0, 2, 3, 1]), split(v, [0, 2, 1, 3]), scale, maskAdd, merged);
    x = g.op('Add', [x, conv1d(ctx, p + 'attn.c_proj')]);
    const h = conv1d(norm(x, p + 'ln_2'), p + 'mlp.c_fc');
    x = g.op('Add', [x, conv1d(g.geluTanh(h, l, halfValue), p + 'mlp.c_proj')]);
  }
  // The head: wte (or an untied lm_head.weight), `[vocab, d]`, transposed to the MatMul's right.
  const head = tied ? w['wte.weight'] : w['lm_head.weight'];
  g.matmul(norm(x, 'ln_f'), 'lm_head.weight_T', transpose(head), VOCAB, ['logits']);
  return g;
}

/** The token the config's `key` (bos_token_id, eos_token_id) names, as text, if the vocabulary has it. */
const specialToken = (config, vocab, key) => Object.keys(vocab).find((t) => vocab[t] === config[key]);

/** The tokenizer files of OUT_DIR: tokenizer.json made from vocab.json + merges.txt where the
 * folder has no tokenizer.json, and a minimal tokenizer_config.json where it has none. */
function tokenizerFiles(modelDir, outDir) {
  const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
  const made = !existsSync(join(modelDir, 'tokenizer.json'));
  const vocab = made
    ? JSON.parse(readFileSync(join(modelDir, 'vocab.json'), 'utf8'))
    : JSON.parse(readFileSync(join(modelDir, 'tokenizer.json'), 'utf8')).model.vocab;
  const bos = specialToken(config, vocab, 'bos_token_id'), eos = specialToken(config, vocab, 'eos_token_id');
  if (made) {
    if (!existsSync(join(modelDir, 'merges.txt'))) throw new Error(`${modelDir}: neither tokenizer.json nor vocab.json + merges.txt`);
    const special = [...new Set([bos, eos].filter(Boolean))];
    tokenizerWithPython('import sys, json; from tokenizers import ByteLevelBPETokenizer as T; '
      + 't = T(sys.argv[1], sys.argv[2], add_prefix_space=False); t.add_special_tokens(json.loads(sys.argv[4])); t.save(sys.argv[3])',
    [join(modelDir, 'vocab.json'), join(modelDir, 'merges.txt'), join(outDir, 'tokenizer.json'), JSON.stringify(special)]);
  }
  if (!existsSync(join(outDir, 'tokenizer_config.json'))) {
    const n = config.n_positions ?? config.n_ctx;
    const tokens = Object.fromEntries([['bos_token', bos], ['eos_token', eos], ['unk_token', eos]].filter(([, t]) => t != null));
    writeFileSync(join(outDir, 'tokenizer_config.json'), JSON.stringify({
      tokenizer_class: 'GPT2Tokenizer', add_prefix_space: false, ...(n ? { model_max_length: n } : {}), ...tokens,
    }, null, 1) + '\n');
  }
}

/** Writes the folder; returns its path. */
export function exportGpt2(modelDir, outDir) {
  const shape = gpt2Shape(modelDir);
  const w = readGpt2Checkpoint(modelDir);
  checkShapes(w, shape, modelDir);
  const inputs = ['input_ids', 'attention_mask'].map((name) => ({ name, type: INT64, dims: ['batch_size', 'sequence_length'] }));
  const outputs = [{ name: 'logits', type: FLOAT, dims: ['batch_size', 'sequence_length', shape.vocab] }];
  writeModels(outDir, 'gpt2', (quantized) => gpt2Graph(w, shape, quantized), inputs, outputs);
  copyPresent(modelDir, outDir, ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json',
    'special_tokens_map.json', 'vocab.json', 'merges.txt']);
  tokenizerFiles(modelDir, outDir);
  return outDir;
}

/** Where a model folder's export goes by default. */
export const exportDir = (modelDir) => join(root, 'target/transformers', basename(resolve(modelDir)));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [modelDir, out] = process.argv.slice(2);
  if (!modelDir) {
    console.error('usage: node bench/onnx-gpt2.mjs MODEL_DIR [OUT_DIR]');
    process.exit(2);
  }
  const outDir = out ?? exportDir(modelDir);
  exportGpt2(modelDir, outDir);
  console.log(outDir);
}
