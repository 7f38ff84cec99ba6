// Checks bench/onnx-gpt2.mjs's exports as the decoder benchmarks run them: transformers.js
// (`AutoModelForCausalLM`, `AutoTokenizer`) on its own onnxruntime-web, WebAssembly backend, one
// thread (bench/peer.mjs), local folders only, against the float64 reference that
// scripts/make-checkpoints.sh writes into each test checkpoint (reference.json, from
// tests/reference/decoders.py).
//
//   node bench/onnx-gpt2-check.mjs MODEL_DIR... [--rounds=N]
//     each MODEL_DIR exported to target/transformers/<its last name> first where that export is
//     missing or older than the folder's files
//
// For each folder: the tokenizer's ids for reference.json's `tokens` texts; then for fp32
// (model.onnx) and q8 (model_quantized.onnx), each `forward` case's ids run once as
// `model({ input_ids, attention_mask: ones })`, the last position's logits compared with
// `next_logits` (largest |difference| / largest |reference|, and the cosine) and each position's
// loss -log softmax(logits[t])[ids[t + 1]] with `losses` (largest |difference|, and that over the
// largest reference loss); and the median time of ROUNDS (default 5) forward passes of the
// longest case after one pass of warm-up. Exits 1 where the tokenizer differs, either of fp32's
// relative differences is 1e-5 or more, or q8's cosine is 0.99 or less.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exportDir } from './onnx-gpt2.mjs';
import { transformersOn } from './peer.mjs';
import { median } from './stats.mjs';

const args = process.argv.slice(2);
const rounds = Number(args.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 5);
const folders = args.filter((a) => !a.startsWith('--')).map((a) => resolve(a));
if (!folders.length) {
  console.error('usage: node bench/onnx-gpt2-check.mjs MODEL_DIR... [--rounds=N]');
  process.exit(2);
}

/** The export of `folder`, made (bench/onnx-gpt2.mjs, in its own process) when missing or stale. */
function exported(folder) {
  const out = exportDir(folder);
  const newest = Math.max(...readdirSync(folder).map((f) => statSync(join(folder, f)).mtimeMs));
  const file = join(out, 'onnx/model_quantized.onnx');
  if (!existsSync(file) || statSync(file).mtimeMs < newest) {
    execFileSync(process.execPath, [fileURLToPath(new URL('onnx-gpt2.mjs', import.meta.url)), folder, out], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return out;
}

const cosine = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
};
const maxAbs = (a) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
const maxDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

/** -log softmax(row t)[ids[t + 1]] for each t but the last, in float64. */
function losses(logits, ids, vocab) {
  const out = [];
  for (let t = 0; t + 1 < ids.length; t++) {
    const row = logits.subarray(t * vocab, (t + 1) * vocab);
    let max = -Infinity;
    for (const v of row) max = Math.max(max, v);
    let sum = 0;
    for (const v of row) sum += Math.exp(v - max);
    out.push(max + Math.log(sum) - row[ids[t + 1]]);
  }
  return out;
}

const exports = folders.map(exported);
// Every export lies in target/transformers, which is transformers.js's localModelPath.
const modelsDir = dirname(exports[0]);
if (exports.some((e) => dirname(e) !== modelsDir)) throw new Error('the exports are in different folders');
const { transformers: { AutoModelForCausalLM, AutoTokenizer, Tensor }, ortVersion, options } = await transformersOn('web', 1, modelsDir);
console.log(`transformers.js on ${ortVersion}, 1 thread; ${rounds} timed passes of each folder's longest case`);
let failed = false;
const fail = (what) => { failed = true; return `${what} FAILS`; };

for (const [i, folder] of folders.entries()) {
  const name = basename(exports[i]);
  const reference = JSON.parse(readFileSync(join(folder, 'reference.json'), 'utf8'));
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  const wrong = reference.tokens.filter(({ text, ids }) => JSON.stringify(tokenizer.encode(text)) !== JSON.stringify(ids));
  console.log(`${name}: tokenizer ${reference.tokens.length - wrong.length}/${reference.tokens.length} texts' ids as the reference's${wrong.length ? ` (${fail('first differing: ' + JSON.stringify(wrong[0].text))})` : ''}`);
  for (const [dtype, file] of [['fp32', 'model.onnx'], ['q8', 'model_quantized.onnx']]) {
    const model = await AutoModelForCausalLM.from_pretrained(name, options(dtype));
    const run = async (ids) => {
      const n = ids.length;
      const input_ids = new Tensor('int64', BigInt64Array.from(ids, BigInt), [1, n]);
      const attention_mask = new Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]);
      return (await model({ input_ids, attention_mask })).logits;
    };
    const size = statSync(join(exports[i], 'onnx', file)).size;
    console.log(`  ${dtype} (${file}, ${(size / 1e6).toFixed(2)} MB):`);
    for (const c of reference.forward) {
      const logits = await run(c.ids);
      const vocab = logits.dims[2];
      if (logits.dims.join() !== [1, c.ids.length, c.next_logits.length].join()) throw new Error(`logits of shape [${logits.dims}] for ${c.ids.length} tokens`);
      const last = Float64Array.from(logits.data.subarray((c.ids.length - 1) * vocab));
      const rel = maxDiff(last, c.next_logits) / maxAbs(c.next_logits);
      const cos = cosine(last, c.next_logits);
      const lossDiff = c.losses.length ? maxDiff(losses(logits.data, c.ids, vocab), c.losses) : null;
      const lossRel = c.losses.length ? lossDiff / maxAbs(c.losses) : 0;
      const verdict = dtype === 'fp32'
        ? (rel < 1e-5 && lossRel < 1e-5 ? 'ok' : fail('relative difference >= 1e-5'))
        : (cos > 0.99 ? 'ok' : fail('cosine <= 0.99'));
      const mean = c.losses.reduce((a, b) => a + b, 0) / c.losses.length;
      console.log(`    ${c.ids.length} tokens: next logits max|diff|/max|ref| ${rel.toExponential(2)}, cosine ${cos.toFixed(7)}; losses `
        + `${lossDiff == null ? '(none: one token)' : `max|diff| ${lossDiff.toExponential(2)}, /max|ref| ${lossRel.toExponential(2)} (reference mean ${mean.toFixed(3)})`}: ${verdict}`);
    }
    const longest = reference.forward.reduce((a, b) => (b.ids.length > a.ids.length ? b : a)).ids;
    await run(longest);
    const times = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      await run(longest);
      times.push(performance.now() - t0);
    }
    console.log(`    one forward pass of ${longest.length} tokens: ${median(times).toFixed(1)} ms (median of ${rounds})`);
    await model.dispose();
  }
}
if (failed) process.exitCode = 1;
