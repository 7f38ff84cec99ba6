// Relaxed SIMD in the browser: the CPU kernel built twice, with simd128 only (the page's build)
// and with relaxed SIMD (`f32x4.relaxed_madd` in the matrix product's micro-kernel), loaded into
// one page of headless Chromium and timed side by side, rounds interleaved. bench/run.sh builds
// both into target/bench-web/ first.
//   node bench/relaxed.mjs [ROUNDS] [smoke]
// (default 5 rounds; smoke: 2 rounds, the attention forward only)
// Two measures: the multi-head attention forward at BERT-base, 128 tokens (5 passes a sample),
// and one quality evaluation of the trained model (454 sentences, the pruning curves' unit).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { launch, openPage, root, serveDist } from '../tests/e2e/harness.mjs';
import { cpuLine } from './machine.mjs';
import { RELAXED_PROBE } from './builds.mjs';

const rounds = Number(process.argv[2] ?? 5);
const smoke = process.argv[3] === 'smoke';
const builds = ['simd128', 'relaxed'];
const types = { js: 'text/javascript', wasm: 'application/wasm', bin: 'application/octet-stream', tsv: 'text/plain' };

const app = await serveDist({
  extra: async (path) => {
    if (path === '/bench.html') return { type: 'text/html', body: '<!doctype html><meta charset="utf-8"><title>relaxed SIMD</title>' };
    const build = /^\/(simd128|relaxed)\/(headlab(?:_bg)?\.(js|wasm))$/.exec(path);
    if (build) return { type: types[build[3]], body: await readFile(join(root, 'target/bench-web', build[1], build[2])) };
    const data = /^\/model\/(minilm-f16\.bin|sts-pairs\.tsv)$/.exec(path);
    if (data) return { type: types[data[1].split('.').pop()], body: await readFile(join(root, 'target/model', data[1])) };
    return null;
  },
});
const browser = await launch({ webgpu: false });
const { page } = await openPage(browser, `${app.base}/bench.html`);

const result = await page.evaluate(async ({ builds, rounds, smoke, probe }) => {
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const mods = {};
  for (const b of builds) {
    mods[b] = await import(`/${b}/headlab.js`);
    await mods[b].default({ module_or_path: `/${b}/headlab_bg.wasm` });
  }
  // Does this engine validate a module with a relaxed-SIMD instruction (i8x16.relaxed_swizzle)?
  const relaxed = WebAssembly.validate(new Uint8Array(probe));
  const cases = Object.fromEntries(builds.map((b) => [b, new mods[b].MhaCase(768, 12, 128)]));
  const forward = { simd128: [], relaxed: [] };
  const ratios = [];
  for (let r = 0; r <= rounds; r++) {
    for (const b of builds) {
      const t0 = performance.now();
      for (let k = 0; k < 5; k++) cases[b].forward();
      if (r > 0) forward[b].push((performance.now() - t0) / 5);
    }
    if (r > 0) ratios.push(forward.relaxed.at(-1) / forward.simd128.at(-1));
  }
  const error = Object.fromEntries(builds.map((b) => [b, mods[b].MhaCase.error(cases[b].output(), cases[b].oracle())]));
  const out = { relaxed, forward: Object.fromEntries(builds.map((b) => [b, median(forward[b])])), ratio: median(ratios), error };
  if (smoke) return out;
  const asset = new Uint8Array(await (await fetch('/model/minilm-f16.bin')).arrayBuffer());
  const pairs = new Uint8Array(await (await fetch('/model/sts-pairs.tsv')).arrayBuffer());
  const evals = { simd128: [], relaxed: [] };
  const evalRatios = [];
  const quality = {};
  for (let r = 0; r < Math.min(rounds, 3); r++) {
    for (const b of builds) {
      const line = mods[b].bench_evaluation(asset, pairs, new Uint32Array([]), 1);
      evals[b].push(Number(/in (\d+) ms/.exec(line)[1]));
      quality[b] = /quality ([\d.]+)/.exec(line)[1];
    }
    evalRatios.push(evals.relaxed.at(-1) / evals.simd128.at(-1));
  }
  return { ...out, evaluation: Object.fromEntries(builds.map((b) => [b, median(evals[b])])), evalRatio: median(evalRatios), quality };
}, { builds, rounds, smoke, probe: Array.from(RELAXED_PROBE) });

const version = browser.version();
console.log(`${cpuLine()}; headless Chromium ${version}; relaxed SIMD validates: ${result.relaxed}; ${rounds} interleaved rounds, medians`);
console.log('| measure | simd128 (what WebKit loads) | relaxed SIMD (what Chromium and Firefox load) | relaxed / simd128 (median of per-round ratios) | error to the f64 oracle or quality |');
console.log('|---|---:|---:|---:|---|');
console.log(`| MHA forward, BERT-base, 128 tokens | ${result.forward.simd128.toFixed(2)} ms | ${result.forward.relaxed.toFixed(2)} ms | ${result.ratio.toFixed(2)}x | ${result.error.simd128.toExponential(1)} and ${result.error.relaxed.toExponential(1)} |`);
if (result.evaluation) {
  console.log(`| trained model, one quality evaluation (454 sentences) | ${(result.evaluation.simd128 / 1000).toFixed(2)} s | ${(result.evaluation.relaxed / 1000).toFixed(2)} s | ${result.evalRatio.toFixed(2)}x | quality ${result.quality.simd128} and ${result.quality.relaxed} |`);
}
await browser.close();
app.server.close();
