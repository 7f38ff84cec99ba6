// The 8-bit path (src/cpu/int8.rs) where a reader runs it: both of the page's wasm builds loaded
// into one page of headless Chromium (its V8 lowers relaxed SIMD's integer dot product to the
// CPU's own; Node 20's does not, so bench/transformers.mjs's 8-bit columns understate it), beside
// transformers.js on onnxruntime-web's wasm backend in the same page (fp32 and its default q8,
// the ONNX export bench/onnx-bert.mjs makes in target/transformers/), rounds interleaved.
// bench/run.sh builds both of headlab's builds into target/bench-web/ first.
//   node bench/int8.mjs [ROUNDS] [smoke]
// (default 7 rounds; smoke: 2 rounds, 128 tokens only, 1 s of warm-up)
// Two measures: one dense layer's product in f32 and in 8 bits at MiniLM's shapes (128 tokens),
// and the trained model's sentence, text to normalised embedding, on every side, with each
// embedding's cosine to headlab's f16 one (itself 1 - 6e-7 from the float64 reference:
// bench/transformers.mjs). transformers.js runs on one thread here: the page is not
// cross-origin isolated, so onnxruntime-web has no threads (as in a handbook's iframe).
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { extname, join } from 'node:path';
import { homedir } from 'node:os';
import { launch, openPage, root, serveDist } from '../tests/e2e/harness.mjs';
import { cpuLine } from './machine.mjs';

const rounds = Number(process.argv[2] ?? 7);
const smoke = process.argv[3] === 'smoke';
const types = { js: 'text/javascript', wasm: 'application/wasm', bin: 'application/octet-stream' };
const byExtension = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
// transformers.js and the onnxruntime-web it depends on, as scripts/install-tools.sh installs them.
const transformersDir = join(process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools'), 'node_modules/@huggingface/transformers');
const exportDir = join(root, 'target/transformers');
const peer = existsSync(join(exportDir, 'all-MiniLM-L6-v2/onnx/model_quantized.onnx')) && existsSync(join(transformersDir, 'dist/transformers.web.js'));
if (!peer) console.log('transformers.js or its export is missing (scripts/install-tools.sh, node bench/onnx-bert.mjs): headlab alone');
// Its bare imports, resolved for the browser.
const importMap = { imports: { 'onnxruntime-web/webgpu': '/ort/ort.webgpu.bundle.min.mjs', 'onnxruntime-common': '/ort-common/index.js' } };
const folders = [
  ['/tjs/', join(transformersDir, 'dist')],
  ['/ort/', join(transformersDir, 'node_modules/onnxruntime-web/dist')],
  ['/ort-common/', join(transformersDir, 'node_modules/onnxruntime-common/dist/esm')],
  ['/models/', exportDir],
];

const app = await serveDist({
  extra: async (path) => {
    if (path === '/bench.html') return { type: 'text/html', body: `<!doctype html><meta charset="utf-8"><script type="importmap">${JSON.stringify(importMap)}</script><title>8-bit</title>` };
    for (const [prefix, dir] of folders) {
      if (path.startsWith(prefix)) {
        const file = join(dir, decodeURIComponent(path.slice(prefix.length)));
        if (!file.startsWith(dir) || !existsSync(file)) return { type: 'text/plain', body: '' };
        return { type: byExtension[extname(file)] ?? 'application/octet-stream', body: await readFile(file) };
      }
    }
    const build = /^\/(simd128|relaxed)\/(headlab(?:_bg)?\.(js|wasm))$/.exec(path);
    if (build) return { type: types[build[3]], body: await readFile(join(root, 'target/bench-web', build[1], build[2])) };
    if (path === '/model/minilm-f16.bin') return { type: types.bin, body: await readFile(join(root, 'target/model/minilm-f16.bin')) };
    return null;
  },
});
const browser = await launch({ webgpu: false });
try {
  const { page } = await openPage(browser, `${app.base}/bench.html`);
  const result = await page.evaluate(async ({ rounds, smoke, peer }) => {
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const cosine = (a, b) => {
      let ab = 0, aa = 0, bb = 0;
      for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
      return ab / Math.sqrt(aa * bb);
    };
    const bytes = new Uint8Array(await (await fetch('/model/minilm-f16.bin')).arrayBuffer());
    const words = 'the river bank was steep and she sat on it to watch the water run past the old mill after rain'.split(' ');
    const out = { products: [], rows: [], agent: navigator.userAgent };
    // Every side embeds a text: name -> async (text) => Float32Array.
    const sides = {};
    let tokens;
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
      sides[`${build} f16`] = async (text) => f16.embed(text);
      sides[`${build} 8-bit`] = async (text) => int8.embed(text);
      tokens ??= (text) => f16.ids(text).length;
    }
    if (peer) {
      const { pipeline, env } = await import('/tjs/transformers.web.js');
      Object.assign(env, { allowRemoteModels: false, allowLocalModels: true, localModelPath: '/models/', useBrowserCache: false });
      Object.assign(env.backends.onnx.wasm, { wasmPaths: '/ort/', numThreads: 1, proxy: false });
      for (const dtype of ['fp32', 'q8']) {
        const pipe = await pipeline('feature-extraction', 'all-MiniLM-L6-v2', { dtype, device: 'wasm' });
        sides[`transformers.js ${dtype}`] = async (text) => (await pipe(text, { pooling: 'mean', normalize: true })).data;
      }
    }
    const names = Object.keys(sides);
    for (const n of smoke ? [128] : [8, 32, 128, 512]) {
      const text = Array.from({ length: n - 2 }, (_, i) => words[i % words.length]).join(' ');
      const times = Object.fromEntries(names.map((k) => [k, []]));
      const embeddings = {};
      for (const k of names) {
        const t0 = performance.now();
        do embeddings[k] = await sides[k](text); while (performance.now() - t0 < (smoke ? 1000 : 4000));
      }
      for (let r = 0; r < rounds; r++) {
        for (let j = 0; j < names.length; j++) {
          const k = names[(r + j) % names.length];
          const t0 = performance.now();
          await sides[k](text);
          times[k].push(performance.now() - t0);
        }
      }
      const ratio = (a, b) => median(times[a].map((t, i) => t / times[b][i]));
      out.rows.push({
        n: tokens(text),
        ms: Object.fromEntries(names.map((k) => [k, median(times[k])])),
        vsF16: Object.fromEntries(['simd128', 'relaxed'].map((b) => [b, ratio(`${b} 8-bit`, `${b} f16`)])),
        vsQ8: peer ? Object.fromEntries(['simd128', 'relaxed'].map((b) => [b, ratio(`${b} 8-bit`, 'transformers.js q8')])) : null,
        cos: Object.fromEntries(names.map((k) => [k, cosine(embeddings[k], embeddings['relaxed f16'])])),
      });
    }
    return { ...out, names };
  }, { rounds, smoke, peer });
  console.log(`The 8-bit path in headless Chromium (${/Chrom(e|ium)\/[\d.]+/.exec(result.agent)?.[0]}), one thread, ${rounds} interleaved rounds; ${cpuLine()}; ${new Date().toISOString().slice(0, 10)}`);
  console.log('\nOne dense layer, y = x W^T + b, median milliseconds:');
  for (const line of result.products) console.log(`- ${line}`);
  console.log('\nall-MiniLM-L6-v2, one sentence, text to normalised embedding, median ms (cosine to headlab f16):');
  console.log(`| tokens | ${result.names.join(' | ')} | simd128 8-bit / f16 | relaxed 8-bit / f16 |${peer ? ' simd128 8-bit / q8 | relaxed 8-bit / q8 |' : ''}`);
  console.log(`|---:|${'---:|'.repeat(result.names.length + (peer ? 4 : 2))}`);
  for (const r of result.rows) {
    const cells = result.names.map((k) => `${r.ms[k].toFixed(1)} (${r.cos[k].toFixed(5)})`);
    const vs = [r.vsF16.simd128, r.vsF16.relaxed, ...(peer ? [r.vsQ8.simd128, r.vsQ8.relaxed] : [])].map((x) => x.toFixed(2));
    console.log(`| ${r.n} | ${cells.join(' | ')} | ${vs.join(' | ')} |`);
  }
  if (peer) {
    const at128 = result.rows.find((r) => r.n === 128)?.vsQ8.relaxed;
    const worst = Math.max(...result.rows.map((r) => r.vsQ8.relaxed));
    console.log(`targets, relaxed SIMD 8-bit against transformers.js q8 (1 thread): 128 tokens ${at128?.toFixed(2)}x (<= 0.70: ${at128 <= 0.7 ? 'holds' : 'misses'}); every length at most ${worst.toFixed(2)}x (<= 1.0: ${worst <= 1 ? 'holds' : 'misses'})`);
  }
  const low = Math.min(...result.rows.flatMap((r) => [r.cos['simd128 8-bit'], r.cos['relaxed 8-bit']]));
  if (!(low >= 0.999)) {
    console.log(`the 8-bit embedding's cosine to the f16 model's fell to ${low}`);
    process.exitCode = 1;
  }
} finally {
  await browser.close();
  app.server.close();
}
