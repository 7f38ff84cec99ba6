// headlab's wasm multi-head attention against onnxruntime-web's wasm backend, in one Node
// process, single thread, same inputs and weights, interleaved rounds.
//   node --experimental-wasm-relaxed-simd bench/ort.mjs [ROUNDS] [SHAPES]
// (bench/run.sh builds the wasm first). Both of the page's builds run where Node validates relaxed
// SIMD (the flag; bench/builds.mjs): simd128, and relaxed SIMD, which Chromium and Firefox load.
// SHAPES: "all" (Transformer 512/8, BERT-base 768/12, GPT-2 Large 1280/20 at n = 16, 64, 128,
// 512) or "smoke" (BERT-base at n = 128). Prints a Markdown table: median times, the median of
// per-round time ratios (headlab / onnxruntime), GFLOP/s, and each output's error against the
// naive f64 oracle, for each build.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { mhaModel } from './onnx.mjs';
import { interleaved, median } from './stats.mjs';
import { buildsNote, headlabBuilds } from './builds.mjs';
import { cpuLine } from './machine.mjs';

const builds = headlabBuilds();
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


console.log(`MHA forward, single thread, ${rounds} interleaved rounds; ${cpuLine()}; Node ${process.version}, onnxruntime-web ${ort.env.versions?.web ?? ''}`);
console.log(buildsNote(builds));
// Per build: its time, its ratios to both graphs, its GFLOP/s and its error.
const perBuild = (f) => builds.map((b) => f(b.label)).join(' | ');
console.log(`| shape | n | ${perBuild((l) => `headlab ${l} ms`)} | ORT ms | ORT fused ms | ${perBuild((l) => `${l} / ORT | ${l} / ORT fused`)} | ${perBuild((l) => `${l} GFLOP/s`)} | ${perBuild((l) => `error ${l}`)} | error ORT | error ORT fused |`);
console.log(`|---|---:|${'---:|'.repeat(2 + builds.length * 5 + 2)}`);
for (const [name, d, h, lengths] of shapes) {
  for (const n of lengths) {
    // The same seeded shape in every build: the same inputs and weights.
    const cases = builds.map((b) => new b.lib.MhaCase(d, h, n));
    const c = cases[0];
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
      ...Object.fromEntries(builds.map((b, i) => [b.name, async () => { cases[i].forward(); return cases[i].output(); }])),
      ort: async () => (await plain.run(feedPlain)).y.data,
      fused: fused ? async () => (await fused.run(feedFused)).y.data : null,
    };
    // Warm-up, then the outputs compared with the oracle.
    const outputs = {};
    for (const [k, run] of Object.entries(runs)) if (run) outputs[k] = await run();
    const reference = c.oracle();
    const error = (k) => (outputs[k] ? builds[0].lib.MhaCase.error(outputs[k], reference).toExponential(1) : '-');
    // ratio[build][graph]: medians of per-round ratios.
    const active = Object.fromEntries(Object.entries(runs).filter(([, run]) => run));
    const pairs = builds.flatMap((b) => [[b.name, 'ort'], ...(fused ? [[b.name, 'fused']] : [])]);
    const { times: measured, ratios } = await interleaved(active, rounds, pairs);
    const times = Object.fromEntries(Object.keys(runs).map((k) => [k, measured[k] ?? []]));
    const ratio = Object.fromEntries(builds.map((b) => [b.name, { ort: ratios[`${b.name}/ort`], fused: ratios[`${b.name}/fused`] ?? [] }]));
    const ms = (k) => (times[k].length ? median(times[k]).toFixed(2) : '-');
    const rt = (b, k) => (ratio[b][k].length ? median(ratio[b][k]).toFixed(2) : '-');
    const gflops = (b) => (c.flops() / 1e6 / median(times[b])).toFixed(1);
    const each = (f) => builds.map((b) => f(b.name)).join(' | ');
    console.log(`| ${name} ${d}/${h} | ${n} | ${each(ms)} | ${ms('ort')} | ${ms('fused')} | ${each((b) => `${rt(b, 'ort')} | ${rt(b, 'fused')}`)} | ${each(gflops)} | ${each(error)} | ${error('ort')} | ${error('fused')} |`);
    await plain.release();
    await fused?.release();
    cases.forEach((x) => x.free());
  }
}

// Where the time goes at the shape the target is set for, in each build.
for (const b of builds) {
  const c = new b.lib.MhaCase(768, 12, 128);
  console.log();
  console.log(c.profile(rounds));
  c.free();
}
