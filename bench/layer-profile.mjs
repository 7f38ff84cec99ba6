// Where an 8-bit layer's time goes, in headless Chromium (whose V8 lowers relaxed SIMD's integer
// dot product to the CPU's own, where Node 20's does not): one dense layer's product at MiniLM's
// shapes (128 tokens) in f32, 8 and 12 bits, two products of 8 output channels (almost all of
// their time is quantizing the 128 rows of activations), then a layer's stages at each length
// (bench_layer_profile, the trained model at 8 bits). For trying a kernel change: copy a build
// aside, rebuild, and run this on each build in turn.
//   node bench/layer-profile.mjs [ROUNDS] [BUILD_DIR] [LENGTHS] [--shapes=NxKxM,...]
// (default 9 rounds, target/bench-web/relaxed as bench/run.sh builds it, lengths 128,512, none
// with `-`; --shapes= the dense products to time instead of MiniLM's, rows x inputs x outputs).
// The page is cross-origin isolated, so performance.now() counts in microseconds, not 100 us steps.
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { launch, openPage, root, serveDist } from '../tests/e2e/harness.mjs';
import { cpuLine } from './machine.mjs';

const args = process.argv.slice(2);
const [roundsArg, buildArg, lengthsArg] = args.filter((a) => !a.startsWith('--'));
const rounds = Number(roundsArg ?? 9);
const build = resolve(root, buildArg ?? 'target/bench-web/relaxed');
const lengths = lengthsArg === '-' ? [] : (lengthsArg ?? '128,512').split(',').map(Number);
const shapes = (args.find((a) => a.startsWith('--shapes='))?.slice(9) ?? '128x384x384,128x384x1536,128x1536x384,128x384x8,128x1536x8')
  .split(',')
  .map((s) => s.split('x').map(Number));
if (shapes.some((s) => s.length !== 3 || s.some((v) => !Number.isInteger(v) || v < 1))) {
  throw new Error(`--shapes= takes rows x inputs x outputs, e.g. 128x384x384: ${shapes.join(' ')}`);
}
const types = { js: 'text/javascript', wasm: 'application/wasm', bin: 'application/octet-stream' };
const isolated = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

async function answer(path) {
  if (path === '/profile.html') return { type: 'text/html', body: '<!doctype html><meta charset="utf-8"><title>layer profile</title>' };
  const file = /^\/build\/(headlab(?:_bg)?\.(js|wasm))$/.exec(path);
  if (file) return { type: types[file[2]], body: await readFile(join(build, file[1])) };
  if (path === '/model/minilm-f16.bin') return { type: types.bin, body: await readFile(join(root, 'target/model/minilm-f16.bin')) };
  return null;
}
const app = await serveDist({
  extra: async (path) => {
    const own = await answer(path);
    return own && { ...own, headers: isolated };
  },
});
const browser = await launch({ webgpu: false });
try {
  const { page } = await openPage(browser, `${app.base}/profile.html`);
  const result = await page.evaluate(async ({ rounds, lengths, shapes }) => {
    const m = await import('/build/headlab.js');
    await m.default({ module_or_path: '/build/headlab_bg.wasm' });
    const bytes = new Uint8Array(await (await fetch('/model/minilm-f16.bin')).arrayBuffer());
    const lines = [];
    // The 8-bit form as the page picks it: timed, then again once the engine's optimized code is in.
    m.bench_int8_product(128, 384, 384, 3);
    await new Promise((resolve) => setTimeout(resolve, 500));
    lines.push(`(the 8-bit products in the ${m.bench_dot_form('retime')} form: src/cpu/int8.rs DotForm)`);
    for (const [n, k, o] of shapes) {
      m.bench_int8_product(n, k, o, 3);
      lines.push(`- ${m.bench_int8_product(n, k, o, rounds * 3)}`);
    }
    for (const n of lengths) lines.push('', m.bench_layer_profile(bytes, new Uint32Array([n]), rounds, 'int8'));
    return { lines, agent: navigator.userAgent };
  }, { rounds, lengths, shapes });
  console.log(`${build} in headless Chromium (${/Chrom(e|ium)\/[\d.]+/.exec(result.agent)?.[0]}), one thread, ${rounds} rounds; ${cpuLine()}; ${new Date().toISOString().slice(0, 10)}`);
  console.log('\nOne dense layer, y = x W^T + b, median milliseconds (the products of 8 channels: mostly the rows\' quantization):');
  console.log(result.lines.join('\n'));
} finally {
  await browser.close();
  app.server.close();
}
