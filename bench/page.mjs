// The trained model's timings in the page, two builds side by side in one run (say, the page
// before and after a change): the first heatmap after a cold load, a head toggle, the 72-head
// importance sweep at 128 and 500 words, and the first complete pruning curve. Headless Chromium
// without WebGPU (the CPU kernel on the page's two workers); the builds alternate round by round
// so both see the same machine.
//   node bench/page.mjs DIST_A DIST_B [ROUNDS] [curve]   (default 2 rounds; `curve` adds the
//                                                         first complete curve to each round)
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';
import { cpuLine } from './machine.mjs';

const [distA, distB, roundsArg, curveArg] = process.argv.slice(2);
if (!distA || !distB) {
  console.error('usage: node bench/page.mjs DIST_A DIST_B [ROUNDS] [curve]');
  process.exit(2);
}
const rounds = Number(roundsArg ?? 2);
const words = (n) => Array.from({ length: n }, (_, i) => ['the', 'bank', 'by', 'river', 'was', 'steep', 'and', 'she', 'sat', 'on', 'it', 'watching', 'water'][i % 13]).join(' ');

/** Milliseconds until `predicate` (run in the page) is true, polled every 10 ms. */
async function until(page, predicate, arg, timeout = 300000) {
  const t0 = Date.now();
  await page.waitForFunction(predicate, arg, { polling: 10, timeout });
  return Date.now() - t0;
}

const drawn = () => {
  const c = document.querySelector('[data-testid=trained-heatmap-0]');
  if (!c || c.width < 2) return false;
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  for (let i = 4; i < px.length; i += 4) if (px[i] !== px[0]) return true;
  return false;
};
const ranked = () => /Removing each head alone/.test(document.querySelector('[data-testid=importance-status]')?.textContent ?? '');

async function sweep(page, n) {
  await page.getByTestId('text').fill(words(n));
  const t0 = Date.now();
  await page.getByTestId('text').dispatchEvent('change');
  await page.waitForFunction(() => !/Removing each head alone/.test(document.querySelector('[data-testid=importance-status]').textContent), null, { polling: 10 });
  await page.waitForFunction(ranked, null, { polling: 10, timeout: 300000 });
  return Date.now() - t0;
}

const firstCurve = () => {
  const c = JSON.parse(document.querySelector('[data-testid=task-chart]')?.dataset.curves ?? '{}');
  const ks = [0, 14, 18, 29, 36, 54, 72];
  const orders = ['iterative', 'one-shot', 'random-0', 'random-1', 'random-2', 'random-3', 'random-4'];
  const at = (o, k) => k === 0 || k === 72 ? Object.values(c.points ?? {}).some((p) => p.some((q) => q[0] === k)) : (c.points?.[o] ?? []).some((p) => p[0] === k);
  return c.one_per_layer != null && orders.every((o) => ks.every((k) => at(o, k)));
};

async function measure(browser, base, withCurve) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const { page, problems } = await openPage(context, `${base}/?preset=minilm&backend=cpu`);
  const t = {};
  t.heatmap = await until(page, drawn);
  await page.waitForFunction(ranked, null, { polling: 10, timeout: 120000 });
  const before = await page.getByTestId('trained-cosine').getAttribute('data-value');
  const t0 = Date.now();
  await page.getByTestId('grid-0-3').click();
  await page.waitForFunction((b) => { const v = document.querySelector('[data-testid=trained-cosine]').dataset.value; return v && v !== b; }, before, { polling: 5 });
  t.toggle = Date.now() - t0;
  await page.getByTestId('grid-0-3').click();
  t.sweep128 = await sweep(page, 126);
  t.sweep500 = await sweep(page, 500);
  if (withCurve) {
    await page.getByTestId('text').fill('He sat on the bank of the river and watched the water.');
    await page.getByTestId('text').dispatchEvent('change');
    await page.waitForFunction(ranked, null, { polling: 10, timeout: 120000 });
    await page.waitForFunction(() => /Compute the pruning curves/.test(document.querySelector('[data-testid=task-run]')?.textContent ?? ''), null, { timeout: 60000 });
    const c0 = Date.now();
    await page.getByTestId('task-run').click();
    await page.waitForFunction(firstCurve, null, { polling: 100, timeout: 600000 });
    t.curve = Date.now() - c0;
  }
  if (problems.length) console.error(problems);
  await context.close();
  return t;
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];
const a = await serveDist({ dist: distA });
const b = await serveDist({ dist: distB });
const browser = await launch({ webgpu: false });
const results = { a: [], b: [] };
for (let r = 0; r < rounds; r++) {
  // Alternate which build goes first.
  for (const [name, app] of r % 2 ? [['b', b], ['a', a]] : [['a', a], ['b', b]]) {
    const t = await measure(browser, app.base, curveArg === 'curve');
    results[name].push(t);
    console.error(`round ${r + 1} ${name}: ${JSON.stringify(t)}`);
  }
}
await browser.close();
a.server.close();
b.server.close();
console.log(`${cpuLine()}; Chromium headless, no WebGPU (CPU kernel, two workers); medians of ${rounds} rounds, ms`);
console.log(`| timing | ${distA} | ${distB} | B / A |\n|---|---:|---:|---:|`);
for (const key of ['heatmap', 'toggle', 'sweep128', 'sweep500', 'curve']) {
  const va = results.a.map((t) => t[key]).filter((v) => v != null);
  const vb = results.b.map((t) => t[key]).filter((v) => v != null);
  if (!va.length) continue;
  console.log(`| ${key} | ${median(va)} | ${median(vb)} | ${(median(vb) / median(va)).toFixed(2)} |`);
}
