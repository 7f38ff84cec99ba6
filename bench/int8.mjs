// The 8-bit path (src/cpu/int8.rs) where a reader runs it: both of the page's wasm builds loaded
// into one page of headless Chromium (its V8 lowers relaxed SIMD's integer dot product to the
// CPU's own; Node 20's does not, so bench/transformers.mjs's 8-bit columns understate it), timed
// side by side with rounds interleaved. bench/run.sh builds both into target/bench-web/ first.
//   node bench/int8.mjs [ROUNDS] [smoke]
// (default 7 rounds; smoke: 2 rounds, 128 tokens only)
// Two measures: one dense layer's product in f32 and in 8 bits at MiniLM's shapes (128 tokens),
// and the trained model's sentence, text to embedding, at f16 and 8 bits, with the cosine
// between the two embeddings.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { launch, openPage, root, serveDist } from '../tests/e2e/harness.mjs';
import { cpuLine } from './machine.mjs';

const rounds = Number(process.argv[2] ?? 7);
const smoke = process.argv[3] === 'smoke';
const types = { js: 'text/javascript', wasm: 'application/wasm', bin: 'application/octet-stream' };

const app = await serveDist({
  extra: async (path) => {
    if (path === '/bench.html') return { type: 'text/html', body: '<!doctype html><meta charset="utf-8"><title>8-bit</title>' };
    const build = /^\/(simd128|relaxed)\/(headlab(?:_bg)?\.(js|wasm))$/.exec(path);
    if (build) return { type: types[build[3]], body: await readFile(join(root, 'target/bench-web', build[1], build[2])) };
    if (path === '/model/minilm-f16.bin') return { type: types.bin, body: await readFile(join(root, 'target/model/minilm-f16.bin')) };
    return null;
  },
});
const browser = await launch({ webgpu: false });
try {
  const { page } = await openPage(browser, `${app.base}/bench.html`);
  const result = await page.evaluate(async ({ rounds, smoke }) => {
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const bytes = new Uint8Array(await (await fetch('/model/minilm-f16.bin')).arrayBuffer());
    const words = 'the river bank was steep and she sat on it to watch the water run past the old mill after rain'.split(' ');
    const out = { products: [], rows: [], agent: navigator.userAgent };
    for (const build of ['simd128', 'relaxed']) {
      const m = await import(`/${build}/headlab.js`);
      await m.default({ module_or_path: `/${build}/headlab_bg.wasm` });
      for (const [n, k, o] of smoke ? [[128, 384, 1536]] : [[128, 384, 384], [128, 384, 1536], [128, 1536, 384]]) {
        m.bench_int8_product(n, k, o, 3);
        out.products.push(`${build}: ${m.bench_int8_product(n, k, o, rounds * 3)}`);
      }
      const f16 = new m.TrainedCase(bytes);
      const int8 = new m.TrainedCase(bytes);
      int8.set_precision('int8');
      for (const n of smoke ? [128] : [8, 32, 128, 512]) {
        const text = Array.from({ length: n - 2 }, (_, i) => words[i % words.length]).join(' ');
        const times = { f16: [], int8: [] };
        const sides = [['f16', f16], ['int8', int8]];
        for (const [, model] of sides) { const t0 = performance.now(); do model.embed(text); while (performance.now() - t0 < 1000); }
        for (let r = 0; r < rounds; r++) {
          for (const [name, model] of r % 2 ? sides.slice().reverse() : sides) {
            const t0 = performance.now();
            model.embed(text);
            times[name].push(performance.now() - t0);
          }
        }
        const [a, b] = [f16.embed(text), int8.embed(text)];
        let ab = 0, aa = 0, bb = 0;
        for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
        out.rows.push({ build, n: f16.ids(text).length, f16: median(times.f16), int8: median(times.int8), ratio: median(times.int8.map((t, i) => t / times.f16[i])), cos: ab / Math.sqrt(aa * bb) });
      }
    }
    return out;
  }, { rounds, smoke });
  console.log(`The 8-bit path in headless Chromium (${/Chrom(e|ium)\/[\d.]+/.exec(result.agent)?.[0]}), one thread, ${rounds} interleaved rounds; ${cpuLine()}; ${new Date().toISOString().slice(0, 10)}`);
  console.log('\nOne dense layer, y = x W^T + b, median milliseconds:');
  for (const line of result.products) console.log(`- ${line}`);
  console.log('\nall-MiniLM-L6-v2, one sentence, text to embedding:');
  console.log('| build | tokens | f16 ms | 8-bit ms | 8-bit / f16 | cosine 8-bit to f16 |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of result.rows) console.log(`| ${r.build} | ${r.n} | ${r.f16.toFixed(1)} | ${r.int8.toFixed(1)} | ${r.ratio.toFixed(2)} | ${r.cos.toFixed(5)} |`);
  const low = Math.min(...result.rows.map((r) => r.cos));
  if (!(low >= 0.999)) {
    console.log(`the 8-bit embedding's cosine to the f16 model's fell to ${low}`);
    process.exitCode = 1;
  }
} finally {
  await browser.close();
  app.server.close();
}
