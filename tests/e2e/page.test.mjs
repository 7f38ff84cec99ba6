// End-to-end test of the built page (`trunk build --release` -> dist/) in Debian's headless
// Chromium, driven by playwright-core. Run with `node --test tests/e2e/`; scripts/test.sh does.
// Screenshots land in target/e2e/ as test artifacts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { artifacts, drawnHeatmaps, launch, openPage, serveDist, text } from './harness.mjs';

let server, base, browser, noGpuBrowser;

before(async () => {
  ({ server, base } = await serveDist());
  browser = await launch({ webgpu: true });
  noGpuBrowser = await launch({ webgpu: false });
});

after(async () => {
  await browser?.close();
  await noGpuBrowser?.close();
  server?.close();
});

/** Opens the page at `query`, failing the test on any uncaught error or off-origin request. */
const open = (query = '', viewport = { width: 1400, height: 1000 }, via = browser) =>
  openPage(via, `${base}/${query}`, { viewport });

test('the CPU page draws every head, names the backend, and drift follows toggles', async () => {
  const { page, problems } = await open('?backend=cpu');
  await page.getByTestId('heatmap-11').waitFor();
  assert.equal(await page.locator('canvas.heatmap').count(), 12);
  assert.equal(await drawnHeatmaps(page, 16), 12, 'all 12 BERT-base heads drawn at 16x16');
  assert.match(await text(page, 'backend-badge'), /CPU · wasm simd128/);
  assert.match(await text(page, 'timing'), /Forward pass on CPU · wasm simd128( \+ relaxed SIMD)?: [\d.]+ ms .* d_model 768, 12 heads of d_k = 64, 16 tokens/);
  assert.equal(await text(page, 'drift-cosine'), '1.000000');
  assert.equal(await text(page, 'drift-active'), '12 of 12');
  await page.screenshot({ path: join(artifacts, 'page.png'), fullPage: true });

  await page.getByTestId('head-toggle-3').click();
  await page.waitForFunction(() => /^0\.\d{3,6}$/.test(document.querySelector('[data-testid=drift-cosine]')?.textContent ?? ''));
  const cosine = Number(await text(page, 'drift-cosine'));
  const rel = Number(await text(page, 'drift-rel-l2'));
  assert.ok(cosine > 0 && cosine < 1, `cosine ${cosine}`);
  assert.ok(rel > 0 && rel < 1, `relative L2 ${rel}`);
  assert.equal(await text(page, 'drift-active'), '11 of 12');
  assert.equal(await page.getByTestId('head-toggle-3').getAttribute('aria-pressed'), 'false');
  assert.equal(await page.getByTestId('token-drift').locator('li').count(), 16);

  // Pruning more heads moves the output further; restoring all returns to no drift.
  for (const h of [0, 5, 7]) await page.getByTestId(`head-toggle-${h}`).click();
  assert.equal(await text(page, 'drift-active'), '8 of 12');
  assert.ok(Number(await text(page, 'drift-rel-l2')) > rel, 'four heads pruned drift more than one');
  await page.screenshot({ path: join(artifacts, 'page-pruned.png'), fullPage: true });
  await page.getByTestId('restore-all').click();
  assert.equal(await text(page, 'drift-cosine'), '1.000000');
  assert.deepEqual(problems, []);
  await page.close();
});

test('presets and the sequence slider recompute and redraw', async () => {
  const { page, problems } = await open('?preset=gpt2-large&seq=24');
  await page.getByTestId('heatmap-19').waitFor();
  assert.equal(await drawnHeatmaps(page, 24), 20);
  await page.getByTestId('preset').selectOption({ label: 'Transformer (orig.) — 512/8, d_k 64' });
  await page.waitForFunction(() => document.querySelectorAll('canvas.heatmap').length === 8);
  await page.getByTestId('seq-slider').fill('40');
  await page.waitForFunction(() => document.querySelector('canvas.heatmap')?.width === 40);
  assert.equal(await drawnHeatmaps(page, 40), 8);
  assert.match(page.url(), /preset=transformer&seq=40/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('bad configurations explain themselves and the page keeps working', async () => {
  const cases = [
    ['?preset=custom&d_model=768&heads=7', /768 is not divisible by 7 heads.*try 6 or 8 heads/],
    ['?seq=0', /at least one token/],
    ['?seq=100000', /100000 tokens is over this page's limit of 1024/],
    ['?preset=gpt3&seq=512', /weights are generated, not stored.*over the 1.00 GiB.*use fewer tokens/],
  ];
  for (const [query, message] of cases) {
    const { page, problems } = await open(query);
    const error = page.getByTestId('config-error');
    await error.waitFor();
    assert.match(await error.textContent(), message, query);
    assert.equal(await page.locator('canvas.heatmap').count(), 0, query);
    assert.equal(await page.getByTestId('panic-banner').isHidden(), true, query);
    assert.deepEqual(problems, [], query);
    await page.close();
  }
  // Garbage in the URL gives a note and defaults, and the settings can be fixed in place.
  const { page, problems } = await open('?seq=abc&preset=%F0%9F%92%A5');
  assert.match(await text(page, 'url-notes'), /seq=abc is not a whole number.*preset=💥 is not a known model/s);
  await page.getByTestId('heatmap-11').waitFor();
  await page.getByTestId('preset').selectOption('custom');
  await page.getByTestId('custom-heads').fill('7');
  await page.getByTestId('custom-heads').press('Enter');
  await page.getByTestId('config-error').waitFor();
  await page.getByTestId('custom-heads').fill('8');
  await page.getByTestId('custom-heads').press('Enter');
  await page.getByTestId('heatmap-7').waitFor();
  assert.equal(await drawnHeatmaps(page, 16), 8);
  assert.deepEqual(problems, []);
  await page.close();
});

test('GPT-3 runs with its weights generated on the fly, with progress, and pruning works', async () => {
  const { page, problems } = await open('?preset=gpt3&seq=16', { width: 1400, height: 1000 }, noGpuBrowser);
  await page.getByTestId('pass-progress').waitFor();
  assert.match(await text(page, 'timing'), /generating its 2.25 GiB of weights on the fly/);
  await page.getByTestId('heatmap-95').waitFor({ timeout: 60000 });
  assert.equal(await drawnHeatmaps(page, 16), 96);
  assert.match(await text(page, 'timing'), /Forward pass on CPU · wasm simd128( \+ relaxed SIMD)? \(weights generated on the fly\): [\d.]+ ms .* d_model 12288, 96 heads of d_k = 128, 16 tokens/);
  assert.equal(await page.getByTestId('pass-progress').count(), 0, 'the progress bar goes when the pass is done');
  await page.getByTestId('head-toggle-7').click();
  assert.equal(await text(page, 'drift-active'), '95 of 96');
  await assertMatchesCpuCore(page, 'GPT-3, head 7 off');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a phone-width screen gets one readable column', async () => {
  const { page, problems } = await open('', { width: 390, height: 844 });
  await page.getByTestId('heatmap-11').waitFor();
  await page.screenshot({ path: join(artifacts, 'page-phone.png'), fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  assert.deepEqual(problems, []);
  await page.close();
});

/** Every heatmap's RGBA bytes, concatenated (runs in the page). */
const heatmapPixels = () => [...document.querySelectorAll('canvas.heatmap')]
  .flatMap((c) => [...c.getContext('2d').getImageData(0, 0, c.width, c.height).data]);

/** Drift numbers after pruning `heads` on the page at `query`, once the badge names `backend`. */
async function driftAfterPruning(query, backend, numHeads, heads) {
  const { page, problems } = await open(query);
  await page.waitForFunction((b) => (document.querySelector('[data-testid=backend-badge]')?.textContent ?? '').startsWith(b), backend);
  // The first heatmaps may come from the CPU while the GPU starts: wait for the backend's own pass.
  await page.waitForFunction((b) => {
    const timing = document.querySelector('[data-testid=timing]')?.textContent ?? '';
    return timing.startsWith(`Forward pass on ${b}`) && !timing.includes('while the GPU starts');
  }, backend);
  await page.getByTestId(`heatmap-${numHeads - 1}`).waitFor();
  assert.equal(await drawnHeatmaps(page, 24), numHeads);
  for (const h of heads) await page.getByTestId(`head-toggle-${h}`).click();
  const numbers = { cosine: Number(await text(page, 'drift-cosine')), rel: Number(await text(page, 'drift-rel-l2')) };
  return { page, problems, numbers };
}

test('by default the page times both backends and runs each pass where it was faster, and says so', async () => {
  // SwiftShader's software WebGPU is far slower than the CPU kernel: the page must measure that
  // and run on the CPU kernel, the synthetic layer and the trained model alike.
  const { page, problems } = await open('?preset=bert-base&seq=16');
  await page.waitForFunction(() => /Chosen by measurement/.test(document.querySelector('[data-testid=timing]')?.textContent ?? ''), null, { timeout: 60000 });
  const timing = await text(page, 'timing');
  console.log(`BERT-base, 16 tokens, automatic: ${timing}`);
  assert.match(timing, /^Forward pass on CPU · wasm simd128( \+ relaxed SIMD)?: .* Chosen by measurement, faster here than on the GPU: about [\d.]+ ms against [\d.]+ (ms|s) \(timed on this machine\)/);
  assert.match(await text(page, 'backend-badge'), /^CPU · wasm simd128( \+ relaxed SIMD)? · measured faster here$/);
  assert.match(await page.getByTestId('backend-badge').getAttribute('title'), /^faster here than on the GPU: about/);
  assert.equal(await page.getByTestId('backend-note').count(), 0, 'a measured choice is not a failure');
  // Another length of the same shape is placed on the same measurement; another shape is measured.
  await page.getByTestId('seq-number').fill('64');
  await page.getByTestId('seq-number').press('Enter');
  await page.waitForFunction(() => /64 tokens\. Chosen by measurement, faster here than on the GPU/.test(document.querySelector('[data-testid=timing]')?.textContent ?? ''), null, { timeout: 60000 });
  // The trained model is measured too, for its own shape.
  await page.getByTestId('preset').selectOption('trained');
  await page.waitForFunction(() => /Running on the CPU kernel \(wasm simd128[^)]*\), faster here than on the GPU: about/.test(document.querySelector('[data-testid=trained-backend]')?.textContent ?? ''), null, { timeout: 120000 });
  console.log(`trained model, automatic: ${await text(page, 'trained-backend')}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('WebGPU, asked for with ?backend=gpu, gives the CPU path\'s numbers', async () => {
  const presets = [['transformer', 8], ['bert-base', 12], ['gpt2-small', 12], ['bert-large', 16], ['gpt2-medium', 16],
    ['gpt2-large', 20]];
  for (const [preset, numHeads] of presets) {
    const query = `?preset=${preset}&seq=24`;
    const gpu = await driftAfterPruning(`${query}&backend=gpu`, 'WebGPU', numHeads, [1, 4]);
    const cpu = await driftAfterPruning(`${query}&backend=cpu`, 'CPU', numHeads, [1, 4]);
    console.log(`${preset}: badge "${await text(gpu.page, 'backend-badge')}", drift`, gpu.numbers, 'vs CPU', cpu.numbers);
    assert.ok(Math.abs(gpu.numbers.cosine - cpu.numbers.cosine) < 2e-5, preset);
    assert.ok(Math.abs(gpu.numbers.rel - cpu.numbers.rel) < 2e-4, preset);
    assert.ok(gpu.numbers.rel > 0, preset);
    // Same heatmaps: every pixel within one colour step (weights differ by ~1e-6 relative).
    const [a, b] = await Promise.all([gpu.page, cpu.page].map((p) => p.evaluate(heatmapPixels)));
    assert.ok(a.length === b.length && a.length >= numHeads * 24 * 24 * 4, preset);
    const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
    assert.ok(worst <= 1, `${preset}: heatmap pixels differ by up to ${worst}`);
    console.log(`${preset}: ${a.length / 4} heatmap pixels, largest colour difference GPU vs CPU: ${worst}`);
    assert.match(await text(gpu.page, 'timing'), /Forward pass on WebGPU/);
    if (preset === 'gpt2-large') await gpu.page.screenshot({ path: join(artifacts, 'page-webgpu.png'), fullPage: true });
    assert.deepEqual(gpu.problems, [], preset);
    assert.deepEqual(cpu.problems, [], preset);
    await gpu.page.close();
    await cpu.page.close();
  }
});

test('without WebGPU the page runs on the CPU and says why', async () => {
  const { page, problems } = await open('?backend=gpu', undefined, noGpuBrowser);
  await page.getByTestId('heatmap-11').waitFor();
  // The first heatmaps may be drawn while the page still looks for a GPU.
  await page.waitForFunction(() => !/preparing the GPU/.test(document.querySelector('[data-testid=backend-badge]')?.textContent ?? 'preparing the GPU'));
  assert.match(await text(page, 'backend-badge'), /^CPU · wasm simd128/);
  assert.match(await text(page, 'backend-note'), /not using the GPU: this browser does not offer WebGPU/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a lost GPU device switches to the CPU and keeps the reader\'s settings', async () => {
  const { page, problems } = await open('?preset=gpt2-small&seq=20&backend=gpu');
  await page.waitForFunction(() => (document.querySelector('[data-testid=backend-badge]')?.textContent ?? '').startsWith('WebGPU'));
  await page.getByTestId('heatmap-11').waitFor();
  await page.getByTestId('head-toggle-6').click();
  const before = await text(page, 'drift-cosine');
  assert.equal(await page.evaluate(() => window.wasmBindings.simulate_gpu_loss()), true);
  // The next forward pass (a new sequence length) meets the lost device.
  await page.getByTestId('seq-number').fill('21');
  await page.getByTestId('seq-number').press('Enter');
  await page.waitForFunction(() => (document.querySelector('[data-testid=backend-badge]')?.textContent ?? '').startsWith('CPU'));
  await page.waitForFunction(() => document.querySelector('canvas.heatmap')?.width === 21);
  assert.match(await text(page, 'backend-note'), /switched to the CPU because the GPU device was lost/);
  assert.equal(await page.getByTestId('head-toggle-6').getAttribute('aria-pressed'), 'false', 'pruned head kept');
  assert.match(page.url(), /preset=gpt2-small&seq=21/);
  assert.notEqual(await text(page, 'drift-cosine'), '1.000000');
  assert.ok(before.length > 0);
  assert.deepEqual(problems, []);
  await page.close();
});

/** Which heads the page shows as pruned. */
/** The trained model's pruned cosine at full precision (the text is rounded to the digits the
 * f16 weights support). */
const cosineValue = async (page) => Number(await page.getByTestId('trained-cosine').getAttribute('data-value'));

const prunedHeads = (page) => page.evaluate(() => [...document.querySelectorAll('[data-testid^=head-toggle-]')]
  .filter((b) => b.getAttribute('aria-pressed') === 'false').map((b) => Number(b.dataset.testid.split('-')[2])));

/** Asserts the page's drift numbers equal the CPU core's for the page's own settings. */
async function assertMatchesCpuCore(page, what) {
  const query = new URL(page.url()).search;
  const pruned = await prunedHeads(page);
  const expected = await page.evaluate(([q, p]) => window.wasmBindings.cpu_core_drift(q, new Uint32Array(p)), [query, pruned]);
  const shown = `${await text(page, 'drift-cosine')} ${await text(page, 'drift-rel-l2')}`;
  const [ec, er] = expected.split(' ').map(Number);
  const [sc, sr] = shown.split(' ').map(Number);
  assert.ok(Math.abs(ec - sc) <= 2e-6 && Math.abs(er - sr) <= 2e-4, `${what}: page shows "${shown}", CPU core "${expected}"`);
}

for (const backend of ['cpu', 'gpu']) {
  test(`explainer on the ${backend.toUpperCase()} backend: every preset, toggles and the prune slider match the CPU core`, async () => {
    const presets = [['transformer', 8], ['bert-base', 12], ['gpt2-small', 12], ['bert-large', 16], ['gpt2-medium', 16],
      ['gpt2-large', 20]];
    for (const [preset, numHeads] of presets) {
      const { page, problems } = await open(`?preset=${preset}&seq=12&backend=${backend}`);
      // The first heatmaps may come from the CPU while the GPU starts: wait for the chosen
      // backend's own pass before comparing numbers.
      await page.waitForFunction((b) => {
        const timing = document.querySelector('[data-testid=timing]')?.textContent ?? '';
        return timing.startsWith(`Forward pass on ${b}`) && !timing.includes('while the GPU starts');
      }, backend === 'gpu' ? 'WebGPU' : 'CPU');
      await page.getByTestId(`heatmap-${numHeads - 1}`).waitFor();
      await page.getByTestId(`importance-${numHeads - 1}`).locator('.num').waitFor();
      assert.match(await text(page, 'backend-badge'), backend === 'gpu' ? /^WebGPU/ : /^CPU/);
      assert.match(await text(page, 'chart-summary'), /d_k = \d+ \/ \d+ = 64, inside the 64\.\.128 band/);
      await page.getByTestId('head-toggle-1').click();
      await assertMatchesCpuCore(page, `${preset}, head 1 off`);
      // "Prune the k least important": the pruned heads are those ranked last.
      const k = Math.round(numHeads * 0.4);
      await page.getByTestId('prune-k').fill(String(k));
      await page.waitForFunction((k) => (document.querySelector('[data-testid=drift-active]')?.textContent ?? '').startsWith(`${k.n - k.k} of`), { k, n: numHeads });
      const pruned = await prunedHeads(page);
      assert.equal(pruned.length, k);
      for (const h of pruned) {
        const rank = Number((await page.getByTestId(`importance-${h}`).textContent()).split('#')[1]);
        assert.ok(rank > numHeads - k, `${preset}: head ${h} (rank ${rank}) is not among the ${k} least important`);
      }
      await assertMatchesCpuCore(page, `${preset}, ${k} least important pruned`);
      const ranked = Number(await text(page, 'drift-rel-l2'));
      await page.getByTestId('prune-random').click();
      await assertMatchesCpuCore(page, `${preset}, ${k} random pruned`);
      assert.equal((await prunedHeads(page)).length, k);
      assert.ok(ranked > 0);
      assert.deepEqual(problems, [], preset);
      await page.close();
    }
  });
}

test('the chart names a point on hover, heads enlarge with labels, and the batched claim is measured', async () => {
  const { page, problems } = await open('?preset=bert-base&seq=10&backend=cpu');
  await page.getByTestId('heatmap-11').waitFor();
  // Hover GPT-3's point: canvas pixels from data-points, scaled to the page.
  const chart = page.getByTestId('config-chart');
  const points = Object.fromEntries((await chart.getAttribute('data-points')).split('|')
    .map((p) => p.split('@')).map(([label, xy]) => [label, xy.split(',').map(Number)]));
  assert.deepEqual(Object.keys(points).slice(0, 5), ['Transformer (orig.)', 'BERT-base / GPT-2 Small',
    'BERT-large / GPT-2 Medium', 'GPT-2 Large', 'GPT-3 (175B)']);
  const box = await chart.boundingBox();
  const [x, y] = points['GPT-3 (175B)'];
  const [cw, ch] = await chart.evaluate((c) => [c.width, c.height]);
  await page.mouse.move(box.x + (x * box.width) / cw, box.y + (y * box.height) / ch);
  assert.equal(await text(page, 'chart-hover'), 'GPT-3 (175B): d_model 12288, 96 heads, d_k = 128');

  await page.getByTestId('heatmap-4').click();
  const detail = page.getByTestId('head-detail');
  await detail.waitFor();
  assert.equal(await detail.locator('.key-labels li').count(), 10);
  const big = await page.getByTestId('detail-heatmap').boundingBox();
  await page.mouse.move(big.x + big.width * 0.95, big.y + big.height * 0.05);
  assert.match(await text(page, 'detail-hover'), /^query t0 ".*" → key t9 ".*": weight 0\.\d{4}$/);
  await page.getByTestId('close-detail').click();
  assert.equal(await page.getByTestId('head-detail').count(), 0);

  await page.getByTestId('measure-batched').click();
  await page.waitForFunction(() => /Ratio/.test((document.querySelector('[data-testid=batched-result]')?.textContent ?? '')), null, { timeout: 60000 });
  const ratio = Number((await text(page, 'batched-result')).match(/Ratio (\d+\.\d+)/)[1]);
  console.log(`batched vs one head on the CPU, BERT-base n = 10: ${await text(page, 'batched-result')}`);
  assert.ok(ratio > 0.2 && ratio < 5, `ratio ${ratio}`);
  assert.match(await text(page, 'pruning-claim'), /Pruning the 2 least important of 12 heads \(20 %\) moves it by 0\.\d{3}/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('charts are drawn at their laid-out size times the device pixel ratio, and again when it changes', async () => {
  const { page, problems } = await openPage(browser, `${base}/?preset=bert-base&seq=12&backend=cpu`,
    { viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 2 });
  await page.getByTestId('heatmap-11').waitFor();
  /** Each chart's backing size against its CSS size times 2, once they agree. */
  const sharp = (id) => page.waitForFunction((id) => {
    const c = document.querySelector(`[data-testid=${id}]`);
    return c.clientWidth > 0 && c.width === Math.round(c.clientWidth * 2) ? [c.width, c.clientWidth] : null;
  }, id).then((h) => h.jsonValue());
  const [wide] = await sharp('config-chart');
  await sharp('drift-chart');
  // Wide: the key from numbers to names is drawn in the chart (and kept for screen readers).
  assert.equal(await page.getByTestId('chart-key').getAttribute('class'), 'chart-key sr-only');
  await page.locator('.chart-panel').screenshot({ path: join(artifacts, 'chart-dpr2.png') });
  // A phone's width: the canvas follows, and the key moves under the chart.
  await page.setViewportSize({ width: 390, height: 900 });
  await page.waitForFunction((wide) => document.querySelector('[data-testid=config-chart]').width < wide, wide);
  const [narrow, css] = await sharp('config-chart');
  assert.ok(narrow < wide && css < 390, `${narrow} backing pixels for ${css} CSS pixels`);
  await page.waitForFunction(() => !document.querySelector('[data-testid=chart-key]').classList.contains('sr-only'));
  assert.equal(await page.getByTestId('chart-key').locator('li').count(), 5);
  await page.locator('.chart-panel').screenshot({ path: join(artifacts, 'chart-phone-dpr2.png') });
  assert.deepEqual(problems, []);
  await page.close();
});

test('light and dark themes apply, with screenshots of each', async () => {
  for (const theme of ['light', 'dark']) {
    const { page, problems } = await open(`?preset=bert-base&seq=16&theme=${theme}`, { width: 1600, height: 1100 });
    await page.getByTestId('heatmap-11').waitFor();
    await page.getByTestId('prune-k').fill('4');
    await page.getByTestId('heatmap-2').click();
    await page.waitForTimeout(300);
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme);
    const bg = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    assert.equal(bg, theme === 'dark' ? 'rgb(22, 22, 24)' : 'rgb(251, 251, 250)', theme);
    await page.screenshot({ path: join(artifacts, `explainer-${theme}.png`), fullPage: true });
    assert.deepEqual(problems, [], theme);
    await page.close();
  }
});

test('the trained model loads lazily with progress, shows real heads, and pruning moves its embedding', async () => {
  const { page, problems } = await open('?preset=bert-base&seq=8&backend=cpu');
  const asset = [];
  page.on('request', (r) => r.url().endsWith('minilm-f16.bin') && asset.push(r.url()));
  await page.getByTestId('heatmap-11').waitFor();
  assert.equal(asset.length, 0, 'the synthetic page must not download the model');
  await page.getByTestId('preset').selectOption('trained');
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  assert.equal(asset.length, 1);
  assert.match(page.url(), /preset=minilm&.*text=He%20sat%20on%20the%20bank/);
  assert.equal(await text(page, 'tokens'), '[CLS]hesatonthebankoftheriverandwatchedthewater.[SEP]');
  // Layer 1, head 2 of this model attends to the previous token: its heatmap's bright pixels sit
  // just below the diagonal.
  const offDiagonal = await page.evaluate(() => {
    const c = document.querySelector('[data-testid=trained-heatmap-2]');
    const n = c.width, px = c.getContext('2d').getImageData(0, 0, n, n).data;
    let hits = 0;
    for (let i = 1; i < n; i++) {
      let best = 0;
      for (let j = 1; j < n; j++) if (px[(i * n + j) * 4 + 1] > px[(i * n + best) * 4 + 1]) best = j;
      if (best === i - 1) hits++;
    }
    return hits / (n - 1);
  });
  assert.ok(offDiagonal > 0.7, `previous-token head: ${offDiagonal}`);
  assert.equal(await text(page, 'trained-cosine'), '1.000000');
  await page.getByTestId('grid-1-5').click();
  await page.getByTestId('grid-4-6').click();
  await page.waitForFunction(() => /^0\.\d{3,6}$/.test((document.querySelector('[data-testid=trained-cosine]')?.textContent ?? '')));
  const cosine = await cosineValue(page);
  assert.ok(cosine > 0.9 && cosine < 1, `cosine after pruning 2 heads: ${cosine}`);
  assert.match(await text(page, 'trained-check'), /Full model: "The financial institution approved my loan\."/);
  // Half the heads, least important first: the embedding barely moves, as the contrast says.
  await page.waitForFunction(() => !document.querySelector('[data-testid=trained-prune-k]').disabled);
  await page.getByTestId('trained-prune-k').fill('36');
  await page.waitForFunction(() => (document.querySelector('[data-testid=trained-cosine]')?.parentElement.textContent ?? '').includes('36 of 72')
    && /^0\.\d{3,6}$/.test((document.querySelector('[data-testid=trained-cosine]')?.textContent ?? '')));
  const half = await cosineValue(page);
  const claimed = (await text(page, 'trained-contrast')).match(/still leaves the embedding at cosine (\d\.\d+)/)[1];
  console.log(`trained model, 36 least important heads pruned: cosine ${half}; ${await text(page, 'trained-contrast')}`);
  // The same pass, the same number, shown to the digits the f16 weights support (a drift of
  // about 0.1: three decimals).
  assert.equal(await text(page, 'trained-cosine'), claimed);
  assert.equal(claimed, half.toFixed(3));
  // Without layer 1's heads the model loses the context and picks the sentence sharing "bank".
  await page.getByTestId('trained-restore').click();
  for (let h = 0; h < 12; h++) await page.getByTestId(`grid-0-${h}`).click();
  await page.waitForFunction(() => /Pruned: "We sat on the grassy bank by the river\."/.test((document.querySelector('[data-testid=trained-check]')?.textContent ?? '')));
  assert.match(await text(page, 'trained-check'), /the answer flipped/);
  await page.getByTestId('text').fill('The cat sat on the mat.');
  await page.getByTestId('text').blur();
  await page.waitForFunction(() => (document.querySelector('[data-testid=tokens]')?.textContent ?? '').includes('mat'));
  await page.screenshot({ path: join(artifacts, 'trained.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});

test('a failed model download says so and can be retried', async () => {
  const { page, problems } = await open('?preset=minilm');
  // (The page was opened with the route not yet blocked; block it and reload.)
  await page.route('**/minilm-f16.bin', (route) => route.abort());
  await page.reload();
  await page.getByTestId('model-error').waitFor();
  assert.match(await text(page, 'model-error'), /Could not load the model: the download failed/);
  await page.unroute('**/minilm-f16.bin');
  await page.getByTestId('model-error').getByRole('button').click();
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  // A truncated file is refused with its reason, never half-loaded.
  await page.route('**/minilm-f16.bin', (route) => route.fulfill({ body: Buffer.from('HEADLAB-MINILM1\n\x10\x00\x00\x00short') }));
  await page.reload();
  await page.getByTestId('model-error').waitFor();
  assert.match(await text(page, 'model-error'), /incomplete/);
  const unexpected = problems.filter((p) => !/ERR_FAILED|Failed to load resource/.test(p));
  assert.deepEqual(unexpected, []);
  await page.close();
});

test('the trained model runs on WebGPU where the page has it, with the CPU kernel\'s numbers', async () => {
  const results = {};
  for (const backend of ['gpu', 'cpu']) {
    const { page, problems } = await open(`?preset=minilm&backend=${backend}`);
    await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
    assert.match(await text(page, 'trained-backend'), backend === 'gpu' ? /Running on the GPU \(WebGPU\)/ : /Running on the CPU kernel/);
    for (const id of ['grid-0-3', 'grid-2-7', 'grid-5-0']) await page.getByTestId(id).click();
    await page.waitForFunction(() => (document.querySelector('[data-testid=trained-cosine]')?.parentElement.textContent ?? '').includes('3 of 72')
      && /^0\.\d{3,6}$/.test((document.querySelector('[data-testid=trained-cosine]')?.textContent ?? '')), null, { timeout: 120000 });
    results[backend] = await cosineValue(page);
    // On SwiftShader the GPU's passes share this machine's two cores with the page's workers.
    await page.waitForFunction(() => /Pruned:/.test((document.querySelector('[data-testid=trained-check]')?.textContent ?? '')), null, { timeout: 120000 });
    assert.deepEqual(problems, [], backend);
    await page.close();
  }
  console.log('trained model, 3 heads pruned: cosine on WebGPU', results.gpu, 'on the CPU', results.cpu);
  assert.ok(Math.abs(results.gpu - results.cpu) < 2e-5, JSON.stringify(results));
});

test('pruned heads travel in the link, and a reload restores the same numbers', async () => {
  const { page, problems } = await open('?preset=bert-base&seq=8&backend=cpu&pruned=1,4,99,x');
  await page.getByTestId('heatmap-11').waitFor();
  assert.match(await text(page, 'url-notes'), /pruned= names heads that do not exist here \(99, x\)/);
  assert.deepEqual(await prunedHeads(page), [1, 4]);
  assert.equal(await text(page, 'drift-active'), '10 of 12');
  await page.getByTestId('head-toggle-5').click();
  await page.waitForFunction(() => /pruned=1,4,5/.test(location.search));
  const numbers = `${await text(page, 'drift-cosine')} ${await text(page, 'drift-rel-l2')}`;
  await page.reload();
  await page.getByTestId('heatmap-11').waitFor();
  await page.waitForFunction(() => (document.querySelector('[data-testid=drift-active]')?.textContent ?? '') === '9 of 12');
  assert.deepEqual(await prunedHeads(page), [1, 4, 5]);
  assert.equal(`${await text(page, 'drift-cosine')} ${await text(page, 'drift-rel-l2')}`, numbers);
  await assertMatchesCpuCore(page, 'restored from the link');

  await page.goto(`${base}/?preset=minilm&backend=cpu&pruned=0,13&layer=2`);
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  assert.match(await page.getByTestId('trained-cosine').locator('..').textContent(), /2 of 72 heads pruned/);
  assert.equal(await page.getByTestId('grid-1-1').getAttribute('aria-pressed'), 'false');
  assert.equal(await page.getByTestId('layer').inputValue(), '2');
  assert.deepEqual(problems.filter((p) => !p.includes('favicon')), []);
  await page.close();
});
