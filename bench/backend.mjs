// The right backend per input, in the browser: the built page (dist/) in headless Chromium with
// its WebGPU adapter (SwiftShader here, whatever the machine has elsewhere), each pass timed as
// the page times it, with the page choosing (?backend= absent) against the CPU kernel and the GPU
// forced, in the same run, rounds interleaved.
//   node bench/backend.mjs [ROUNDS] [smoke|trained]
// (default 3 rounds; smoke: one round, BERT-base at 16 tokens and the short sentence only;
// trained: the trained model's table alone)
// Two tables: the synthetic layer's forward pass (BERT-base at 16, 128 and 512 tokens), and the
// trained model's 72-pass importance sweep of a sentence of 16 and of 128 words (the GPU forced
// only at 16 words in the full run: on a software adapter it takes minutes).
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';
import { median } from './stats.mjs';
import { cpuLine } from './machine.mjs';

const rounds = Number(process.argv[2] ?? 3);
const smoke = process.argv[3] === 'smoke';
const trainedOnly = process.argv[3] === 'trained';
const modes = ['auto', 'cpu', 'gpu'];
const query = (mode) => (mode === 'auto' ? '' : `&backend=${mode}`);

const app = await serveDist();
const browser = await launch({ webgpu: true });

/** BERT-base at `seq` tokens in a fresh page: the milliseconds of a pass once the page is warm
 * (it computes `seq + 1` tokens, then `seq` again, and that pass is read), where it ran, and the
 * milliseconds from the request to the first pass shown (the calibration included, for `auto`). */
async function layerPass(mode, seq) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const t0 = performance.now();
  const { page } = await openPage(context, `${app.base}/?preset=bert-base&seq=${seq}${query(mode)}`);
  const shown = (n) => page.waitForFunction(([m, n]) => {
    const t = document.querySelector('[data-testid=timing]')?.textContent ?? '';
    return /^Forward pass on/.test(t) && t.includes(` ${n} tokens.`) && !t.includes('while the GPU starts')
      && (m !== 'auto' || t.includes('Chosen by measurement'));
  }, [mode, n], { timeout: 600000, polling: 50 });
  await shown(seq);
  const ready = performance.now() - t0;
  for (const n of [seq + 1, seq]) {
    await page.getByTestId('seq-number').fill(String(n));
    await page.getByTestId('seq-number').press('Enter');
    await shown(n);
  }
  const timing = await page.getByTestId('timing').textContent();
  await context.close();
  const ms = Number(/: ([\d.]+) ms/.exec(timing)?.[1] ?? NaN);
  return { ms, on: timing.startsWith('Forward pass on WebGPU') ? 'GPU' : 'CPU', ready };
}

/** A page with the trained model, loaded and idle. */
async function trainedPage(mode) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const { page } = await openPage(context, `${app.base}/?preset=minilm${query(mode)}`);
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 300000 });
  await page.waitForFunction(() => !document.querySelector('[data-testid=trained-prune-k]')?.disabled, null, { timeout: 900000, polling: 200 });
  return { context, page };
}

/** Seconds for the importance sweep (72 passes) of a new sentence of `words` words. */
async function sweep(page, words, variant) {
  const base = 'the river bank was steep and the water ran fast under the old stone bridge near town'.split(' ');
  const sentence = Array.from({ length: words }, (_, i) => base[(i + variant) % base.length]).join(' ') + '.';
  await page.getByTestId('text').fill(sentence);
  const t0 = performance.now();
  await page.getByTestId('text').blur();
  await page.waitForFunction(() => document.querySelector('[data-testid=trained-prune-k]')?.disabled, null, { timeout: 60000, polling: 20 });
  await page.waitForFunction(() => !document.querySelector('[data-testid=trained-prune-k]')?.disabled, null, { timeout: 900000, polling: 100 });
  return { s: (performance.now() - t0) / 1000, on: await page.getByTestId('trained-backend').textContent() };
}

console.log(`${cpuLine()}; Chromium headless with its WebGPU adapter; ${rounds} round(s)`);
console.log('');
console.log('| BERT-base, tokens | page chose | its pass | CPU kernel | GPU forced | chosen / faster | request to that pass: chosen, CPU |');
console.log('|---:|---|---:|---:|---:|---:|---:|');
for (const seq of smoke ? [16] : trainedOnly ? [] : [16, 128, 512]) {
  const got = Object.fromEntries(modes.map((m) => [m, []]));
  for (let r = 0; r < rounds; r++) for (const m of modes) got[m].push(await layerPass(m, seq));
  const ms = (m) => median(got[m].map((p) => p.ms));
  const ready = (m) => median(got[m].map((p) => p.ready)) / 1000;
  const on = [...new Set(got.auto.map((p) => p.on))].join(', then ');
  const best = Math.min(ms('cpu'), ms('gpu'));
  console.log(`| ${seq} | ${on} | ${ms('auto').toFixed(1)} ms | ${ms('cpu').toFixed(1)} ms | ${ms('gpu').toFixed(1)} ms | ${(ms('auto') / best).toFixed(2)}x | ${ready('auto').toFixed(1)} s, ${ready('cpu').toFixed(1)} s |`);
}

console.log('');
console.log('| trained model: importance sweep (72 passes) | page chose | chosen | CPU kernel | GPU forced | chosen / faster |');
console.log('|---|---|---:|---:|---:|---:|');
// The page that forces the GPU runs alone, after: on a software adapter its passes (and the roles
// it computes on load) would take the cores from the two measured side by side.
const pages = { auto: await trainedPage('auto'), cpu: await trainedPage('cpu') };
const rows = [];
for (const words of smoke ? [16] : [16, 128]) {
  const got = { auto: [], cpu: [] };
  for (let r = 0; r < rounds; r++) for (const m of ['auto', 'cpu']) got[m].push(await sweep(pages[m].page, words, r));
  rows.push({ words, got });
}
for (const p of Object.values(pages)) await p.context.close();
let gpu16 = NaN;
if (!smoke) {
  const gpu = await trainedPage('gpu');
  gpu16 = (await sweep(gpu.page, 16, 0)).s;
  await gpu.context.close();
}
for (const { words, got } of rows) {
  const s = (m) => median(got[m].map((x) => x.s));
  const on = /Running on the (GPU|CPU kernel)/.exec(got.auto[0].on)?.[1] ?? '?';
  const forced = words === 16 ? gpu16 : NaN;
  const best = Number.isNaN(forced) ? s('cpu') : Math.min(s('cpu'), forced);
  const gpu = Number.isNaN(forced) ? 'not run' : `${forced.toFixed(1)} s (1 run)`;
  console.log(`| ${words} words | ${on} | ${s('auto').toFixed(2)} s | ${s('cpu').toFixed(2)} s | ${gpu} | ${(s('auto') / best).toFixed(2)}x |`);
}
await browser.close();
app.server.close();
