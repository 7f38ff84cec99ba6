// One pass cut across threads that share no memory, as the page's web workers would run it:
// each thread a wasm instance of its own (Node worker_threads), messages that copy or transfer
// their buffers, no SharedArrayBuffer. headlab's single-thread pass against the same pass cut
// into one shard per thread (src/cpu/head_shards.rs: heads; src/model/sharded.rs: heads and feed-forward
// units, two steps per layer), and onnxruntime-web's wasm backend with the same thread count, in
// one Node process, interleaved rounds, medians of per-round ratios. The threads: bench/split-pool.mjs.
//
//   node bench/split.mjs [ROUNDS] [smoke]     (bench/run.sh builds the wasm first)
//
// Rows: MHA forward at BERT-base (768 / 12) n = 128 (smoke) and n = 512, against onnxruntime-web
// with numThreads = the thread count (its two graphs, bench/onnx.mjs); the trained model's
// embedding of a 128-token sentence (smoke) and a 512-token one, headlab alone (its peer,
// transformers.js, is in bench/transformers.mjs). Threads: every logical core (at least 2).
// Each split output is compared with the single-thread one (largest |difference| relative to
// the largest value; more than the native tests' 2e-6 fails the run). SPLIT_NO_ORT=1 leaves
// onnxruntime-web out, so that its idle threads cannot take a core.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { availableParallelism, homedir } from 'node:os';
import { join } from 'node:path';
import { SPLIT_BOUND, SplitPool, assetPath } from './split-pool.mjs';
import { median, relativeDifference } from './stats.mjs';
import { cpuLine } from './machine.mjs';

const require = createRequire(import.meta.url);



async function main() {
  const rounds = Number(process.argv[2] ?? 9);
  const smoke = process.argv[3] === 'smoke';
  const threads = Math.max(2, availableParallelism());
  const { MhaCase, EncoderCase } = require('../target/bench-node/headlab.js');
  const pool = new SplitPool(threads);

  const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
  const ort = createRequire(join(toolsDir, 'package.json'))('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'error';
  const { mhaModel } = await import('./onnx.mjs');

  console.log(`One pass on ${threads} threads (worker_threads, no shared memory) against 1 thread; ${rounds} interleaved rounds; ${cpuLine()}; Node ${process.version}, onnxruntime-web ${ort.env.versions?.web ?? ''} with numThreads = ${threads}; ${new Date().toISOString().slice(0, 10)}`);
  console.log(`| pass | 1 thread ms | ${threads} threads ms | speed-up | ORT ${threads} threads ms | ORT fused ${threads} threads ms | headlab ${threads} / ORT | headlab ${threads} / ORT fused | split vs 1 thread |`);
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  const rows = [];

  for (const n of smoke ? [128] : [128, 512]) {
    const [d, h] = [768, 12];
    const c = new MhaCase(d, h, n);
    const x = c.x();
    const weights = { n, d, h, wQkv: c.w_qkv(), wO: c.w_o() };
    const session = (kind) => ort.InferenceSession.create(mhaModel(kind, weights), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    const noOrt = process.env.SPLIT_NO_ORT === '1';
    const plain = noOrt ? null : await session('plain');
    const fused = noOrt ? null : await session('fused').catch(() => null);
    const feedPlain = { x: new ort.Tensor('float32', x, [n, d]) };
    const feedFused = { x: new ort.Tensor('float32', x, [1, n, d]) };
    const runs = {
      one: async () => { c.forward(); return c.output(); },
      split: async () => { await pool.mha(c, d, h, n, x); return c.output(); },
      ort: plain ? async () => (await plain.run(feedPlain)).y.data : null,
      fused: fused ? async () => (await fused.run(feedFused)).y.data : null,
    };
    rows.push(await measure(`MHA forward, BERT-base 768/12, n = ${n}`, runs, rounds));
    await plain?.release();
    await fused?.release();
    c.free();
  }

  const model = new EncoderCase(readFileSync(assetPath));
  const words = 'the river bank was steep and she sat on it to watch the water run past the old mill'.split(' ');
  for (const n of smoke ? [128] : [128, 512]) {
    const text = Array.from({ length: n - 2 }, (_, i) => words[i % words.length]).join(' ');
    if (model.ids(text).length !== n) throw new Error(`a sentence meant to be ${n} tokens is ${model.ids(text).length}`);
    const runs = {
      one: async () => model.embed(text),
      split: () => pool.embed(model, text),
    };
    rows.push(await measure(`all-MiniLM-L6-v2 embedding, ${n} tokens`, runs, rounds));
  }
  model.free();
  await pool.close();

  // The targets of issue 14 on this machine, at the shapes they name.
  const bert = rows[0], minilm = rows.find((r) => r.name.includes('128 tokens'));
  const verdict = (ok) => (ok ? 'holds' : 'misses');
  console.log(`targets (${threads} threads): BERT-base n = 128 speed-up ${bert.speedup.toFixed(2)}x (>= 1.7: ${verdict(bert.speedup >= 1.7)}), headlab / ORT ${bert.vsOrt.toFixed(2)}x (<= 0.70: ${verdict(bert.vsOrt <= 0.7)}); MiniLM 128 tokens speed-up ${minilm.speedup.toFixed(2)}x (>= 1.7: ${verdict(minilm.speedup >= 1.7)})`);
}

/** Warm-up, the split output against the single-thread one, then interleaved timed rounds. */
async function measure(name, runs, rounds) {
  const active = Object.entries(runs).filter(([, run]) => run);
  const outputs = {};
  for (let warm = 0; warm < 3; warm++) for (const [k, run] of active) outputs[k] = await run();
  const diff = relativeDifference(outputs.split, outputs.one);
  if (!(diff <= SPLIT_BOUND)) throw new Error(`${name}: the split pass differs from the single-thread one by ${diff}`);
  const times = Object.fromEntries(active.map(([k]) => [k, []]));
  const ratio = { speedup: [], ort: [], fused: [] };
  for (let r = 0; r < rounds; r++) {
    for (const [k, run] of active) {
      const t0 = performance.now();
      await run();
      times[k].push(performance.now() - t0);
    }
    ratio.speedup.push(times.one.at(-1) / times.split.at(-1));
    if (times.ort) ratio.ort.push(times.split.at(-1) / times.ort.at(-1));
    if (times.fused) ratio.fused.push(times.split.at(-1) / times.fused.at(-1));
  }
  const ms = (k) => (times[k]?.length ? median(times[k]).toFixed(2) : '-');
  const rt = (k) => (ratio[k].length ? median(ratio[k]).toFixed(2) : '-');
  console.log(`| ${name} | ${ms('one')} | ${ms('split')} | ${rt('speedup')}x | ${ms('ort')} | ${ms('fused')} | ${rt('ort')} | ${rt('fused')} | ${diff.toExponential(1)} |`);
  return { name, speedup: median(ratio.speedup), vsOrt: ratio.ort.length ? median(ratio.ort) : NaN };
}

await main();
