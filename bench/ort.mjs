// headlab's wasm simd128 multi-head attention against onnxruntime-web's wasm backend, in one
// Node process, single thread, same inputs and weights, interleaved rounds.
//   node bench/ort.mjs [ROUNDS] [SHAPES]     (bench/run.sh builds the wasm first)
// SHAPES: "all" (Transformer 512/8, BERT-base 768/12, GPT-2 Large 1280/20 at n = 16, 64, 128,
// 512) or "smoke" (BERT-base at n = 128). Prints a Markdown table: median times, the median of
// per-round time ratios (headlab / onnxruntime), GFLOP/s, and each output's error against the
// naive f64 oracle.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { mhaModel } from './onnx.mjs';
import { median } from './stats.mjs';

const require = createRequire(import.meta.url);
const { MhaCase } = require('../target/bench-node/headlab.js');
const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const ort = createRequire(join(toolsDir, 'package.json'))('onnxruntime-web');
ort.env.wasm.numThreads = 1;
ort.env.wasm.simd = true;
ort.env.wasm.proxy = false;
ort.env.logLevel = 'error';

const rounds = Number(process.argv[2] ?? 15);
const shapes = process.argv[3] === 'smoke'
  ? [['BERT-base', 768, 12, [128]]]
  : [['Transformer', 512, 8, [16, 64, 128, 512]], ['BERT-base', 768, 12, [16, 64, 128, 512]],
    ['GPT-2 Large', 1280, 20, [16, 64, 128, 512]]];


console.log(`MHA forward, single thread, ${rounds} interleaved rounds; Node ${process.version}, onnxruntime-web ${ort.env.versions?.web ?? ''}`);
console.log('| shape | n | headlab ms | ORT ms | ORT fused ms | headlab / ORT | headlab / ORT fused | headlab GFLOP/s | error headlab | error ORT | error ORT fused |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const [name, d, h, lengths] of shapes) {
  for (const n of lengths) {
    const c = new MhaCase(d, h, n);
    const x = c.x();
    const weights = { n, d, h, wQkv: c.w_qkv(), wO: c.w_o() };
    const plain = await ort.InferenceSession.create(mhaModel('plain', weights), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    let fused = null;
    try {
      fused = await ort.InferenceSession.create(mhaModel('fused', weights), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    } catch (e) {
      console.error(`fused Attention op unavailable: ${e.message}`);
    }
    const feedPlain = { x: new ort.Tensor('float32', x, [n, d]) };
    const feedFused = { x: new ort.Tensor('float32', x, [1, n, d]) };
    const runs = {
      headlab: async () => { c.forward(); return c.output(); },
      ort: async () => (await plain.run(feedPlain)).y.data,
      fused: fused ? async () => (await fused.run(feedFused)).y.data : null,
    };
    // Warm-up, then the outputs compared with the oracle.
    const outputs = {};
    for (const [k, run] of Object.entries(runs)) if (run) outputs[k] = await run();
    const reference = c.oracle();
    const error = (k) => (outputs[k] ? MhaCase.error(outputs[k], reference).toExponential(1) : '-');
    const times = { headlab: [], ort: [], fused: [] };
    const ratio = { ort: [], fused: [] };
    for (let r = 0; r < rounds; r++) {
      for (const [k, run] of Object.entries(runs)) {
        if (!run) continue;
        const t0 = performance.now();
        await run();
        times[k].push(performance.now() - t0);
      }
      ratio.ort.push(times.headlab.at(-1) / times.ort.at(-1));
      if (fused) ratio.fused.push(times.headlab.at(-1) / times.fused.at(-1));
    }
    const ms = (k) => (times[k].length ? median(times[k]).toFixed(2) : '-');
    const rt = (k) => (ratio[k].length ? median(ratio[k]).toFixed(2) : '-');
    const gflops = (c.flops() / 1e6 / median(times.headlab)).toFixed(1);
    console.log(`| ${name} ${d}/${h} | ${n} | ${ms('headlab')} | ${ms('ort')} | ${ms('fused')} | ${rt('ort')} | ${rt('fused')} | ${gflops} | ${error('headlab')} | ${error('ort')} | ${error('fused')} |`);
    await plain.release();
    await fused?.release();
    c.free();
  }
}

// Where the time goes at the shape the target is set for.
const c = new MhaCase(768, 12, 128);
console.log();
console.log(c.profile(rounds));
c.free();
