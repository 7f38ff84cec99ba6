// End-to-end test of the built page (`trunk build --release` -> dist/) in Debian's headless
// Chromium, driven by playwright-core. Run with `node --test tests/e2e/`; scripts/test.sh does.
// Screenshots land in target/e2e/ as test artifacts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { artifacts, suite } from './harness.mjs';
import { watchStates } from './pages.mjs';

const app = suite({ gpu: true, noGpu: true });

test('the CPU page draws every head, names the backend, and drift follows toggles', async () => {
  const { page, problems, lab: { heads, drift, status } } = await app.open('?backend=cpu');
  await heads.heatmap(11).waitFor();
  assert.equal(await heads.canvases.count(), 12);
  assert.equal(await heads.drawn(16), 12, 'all 12 BERT-base heads drawn at 16x16');
  assert.match(await status.badge.textContent(), /CPU · wasm simd128/);
  assert.match(await status.timing.textContent(), /Forward pass on CPU · wasm simd128( \+ relaxed SIMD)?: [\d.]+ ms .* d_model 768, 12 heads of d_k = 64, 16 tokens/);
  assert.equal(await drift.cosine.textContent(), '1.000000');
  assert.equal(await drift.active.textContent(), '12 of 12');
  await page.screenshot({ path: join(artifacts, 'page.png'), fullPage: true });

  await heads.toggle(3).click();
  await drift.cosine.waitText(/^0\.\d{3,6}$/);
  const cosine = Number(await drift.cosine.textContent());
  const rel = Number(await drift.relL2.textContent());
  assert.ok(cosine > 0 && cosine < 1, `cosine ${cosine}`);
  assert.ok(rel > 0 && rel < 1, `relative L2 ${rel}`);
  assert.equal(await drift.active.textContent(), '11 of 12');
  assert.equal(await heads.toggle(3).getAttribute('aria-pressed'), 'false');
  assert.equal(await drift.tokenRows.count(), 16);

  // Pruning more heads moves the output further; restoring all returns to no drift.
  for (const h of [0, 5, 7]) await heads.toggle(h).click();
  assert.equal(await drift.active.textContent(), '8 of 12');
  assert.ok(Number(await drift.relL2.textContent()) > rel, 'four heads pruned drift more than one');
  await page.screenshot({ path: join(artifacts, 'page-pruned.png'), fullPage: true });
  await drift.restoreAll.click();
  assert.equal(await drift.cosine.textContent(), '1.000000');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a long sequence: the token list and the flow picture build what their boxes show, and follow a scroll and a toggle', async () => {
  const { page, problems, lab: { heads, drift, flow } } = await app.open('?preset=custom&d_model=64&heads=4&seq=512&backend=cpu');
  await heads.heatmap(3).waitFor();
  await flow.waitDrawn();
  await drift.tokenRows.first().waitFor();
  // What each box shows: the rows (by their place in the list) and the token columns in view.
  const shown = () => page.evaluate(([list, picture]) => {
    const box = document.querySelector(list);
    const b = box.getBoundingClientRect();
    const rows = [...box.querySelectorAll('li')].filter((li) => { const r = li.getBoundingClientRect(); return r.bottom > b.top + 1 && r.top < b.bottom - 1; });
    const flowBox = document.querySelector(picture);
    const f = flowBox.getBoundingClientRect();
    const cells = [...flowBox.querySelectorAll('rect')].filter((c) => { const r = c.getBoundingClientRect(); return r.right > f.left + 1 && r.left < f.right - 1; });
    return { built: box.querySelectorAll('li').length, rows: rows.map((li) => Number(li.getAttribute('aria-posinset'))),
      last: rows.at(-1)?.querySelector('.word').textContent, set: rows[0]?.getAttribute('aria-setsize'), top: box.scrollTop,
      rects: flowBox.querySelectorAll('rect').length, tips: cells.map((c) => c.parentNode.querySelector('title').textContent), left: flowBox.scrollLeft };
  }, [`[data-testid=${drift.tokenDrift.testId}]`, `[data-testid=${flow.picture.testId}]`]);
  const atStart = await shown();
  assert.equal(atStart.set, '512');
  assert.equal(atStart.rows[0], 1);
  assert.ok(atStart.built < 100, `${atStart.built} rows built of 512`);
  assert.ok(atStart.rects < 2 * 100, `${atStart.rects} flow cells built of ${2 * 512}`);
  assert.ok(atStart.tips.length > 0 && atStart.tips.every((t) => t.startsWith('after ') || t.startsWith('input')), atStart.tips[0]);
  // Scrolled to the end, each box shows the last token, and the list's rows are in order.
  await page.evaluate(([list, picture]) => { document.querySelector(list).scrollTop = 1e6; document.querySelector(picture).scrollLeft = 1e6; },
    [`[data-testid=${drift.tokenDrift.testId}]`, `[data-testid=${flow.picture.testId}]`]);
  await page.waitForFunction((list) => document.querySelector(`${list} li:last-child`)?.getAttribute('aria-posinset') === '512', `[data-testid=${drift.tokenDrift.testId}]`);
  const atEnd = await shown();
  assert.equal(atEnd.rows.at(-1), 512);
  assert.deepEqual(atEnd.rows, atEnd.rows.map((_, i) => atEnd.rows[0] + i), 'consecutive rows');
  assert.ok(atEnd.tips.some((t) => t.includes(`, ${atEnd.last}: `)), `the last token "${atEnd.last}" in the flow's view: ${atEnd.tips.slice(-2)}`);
  assert.ok(atEnd.built < 100 && atEnd.rects < 2 * 100);
  // A head toggled redraws both at the same place, with the pruned drift.
  await heads.toggle(1).click();
  await drift.active.waitText('3 of 4');
  await page.waitForFunction((list) => [...document.querySelectorAll(`${list} .num`)].some((n) => Number(n.textContent) > 0), `[data-testid=${drift.tokenDrift.testId}]`);
  const toggled = await shown();
  assert.equal(toggled.top, atEnd.top);
  assert.equal(toggled.left, atEnd.left);
  assert.deepEqual(toggled.rows, atEnd.rows);
  assert.deepEqual(problems, []);
  await page.close();
});

test('presets and the sequence slider recompute and redraw', async () => {
  const { page, problems, lab: { heads, settings } } = await app.open('?preset=gpt2-large&seq=24');
  await heads.heatmap(19).waitFor();
  assert.equal(await heads.drawn(24), 20);
  await settings.preset.selectOption({ label: 'Transformer (orig.) — 512/8, d_k 64' });
  await heads.waitCount(8);
  await settings.seqSlider.fill('40');
  await heads.waitWidth(40);
  assert.equal(await heads.drawn(40), 8);
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
    const { page, problems, lab: { heads, status } } = await app.open(query);
    const error = status.configError;
    await error.waitFor();
    assert.match(await error.textContent(), message, query);
    assert.equal(await heads.canvases.count(), 0, query);
    assert.equal(await status.panicBanner.isHidden(), true, query);
    assert.deepEqual(problems, [], query);
    await page.close();
  }
  // Garbage in the URL gives a note and defaults, and the settings can be fixed in place.
  const { page, problems, lab: { heads, settings, status } } = await app.open('?seq=abc&preset=%F0%9F%92%A5');
  assert.match(await status.urlNotes.textContent(), /seq=abc is not a whole number.*preset=💥 is not a known model/s);
  await heads.heatmap(11).waitFor();
  await settings.preset.selectOption('custom');
  await settings.setCustomHeads('7');
  await status.configError.waitFor();
  await settings.setCustomHeads('8');
  await heads.heatmap(7).waitFor();
  assert.equal(await heads.drawn(16), 8);
  assert.deepEqual(problems, []);
  await page.close();
});

test('GPT-3 runs with its weights generated on the fly, with progress, and pruning works', async () => {
  const { page, problems, lab } = await app.open('?preset=gpt3&seq=16', { viewport: { width: 1400, height: 1000 }, via: app.noGpuBrowser });
  const { heads, drift, status } = lab;
  await status.passProgress.waitFor();
  assert.match(await status.timing.textContent(), /generating its 2.25 GiB of weights on the fly/);
  await heads.heatmap(95).waitFor({ timeout: 60000 });
  assert.equal(await heads.drawn(16), 96);
  assert.match(await status.timing.textContent(), /Forward pass on CPU · wasm simd128( \+ relaxed SIMD)? \(weights generated on the fly\): [\d.]+ ms .* d_model 12288, 96 heads of d_k = 128, 16 tokens/);
  assert.equal(await status.passProgress.count(), 0, 'the progress bar goes when the pass is done');
  await heads.toggle(7).click();
  assert.equal(await drift.active.textContent(), '95 of 96');
  await assertMatchesCpuCore(page, lab, 'GPT-3, head 7 off');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a phone-width screen gets one readable column', async () => {
  const { page, problems, lab: { heads } } = await app.open('', { viewport: { width: 390, height: 844 } });
  await heads.heatmap(11).waitFor();
  await page.screenshot({ path: join(artifacts, 'page-phone.png'), fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  assert.deepEqual(problems, []);
  await page.close();
});

test("at a laptop's widths no panel runs under another, on the synthetic page and the trained model's", async () => {
  for (const [query, ready] of [['?preset=bert-base&seq=12&backend=cpu', (lab) => lab.heads.heatmap(11).waitFor()], ['?preset=minilm&backend=cpu', (lab) => lab.trained.waitReady({ timeout: 60000 })]]) {
    const { page, problems, lab } = await app.open(query, { viewport: { width: 1000, height: 800 } });
    await ready(lab);
    for (const width of [1000, 1100, 1200, 1366, 1600]) {
      await page.setViewportSize({ width, height: 800 });
      const rects = await page.evaluate(() => [...document.querySelectorAll('.panels section.panel')]
        .map((p) => { const r = p.getBoundingClientRect(); return { name: p.className, left: r.left, right: r.right, top: r.top, bottom: r.bottom }; }));
      assert.ok(rects.length >= 2, `${query} at ${width} px: ${rects.length} panels`);
      for (const a of rects) {
        for (const b of rects) {
          const overlap = a !== b && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
          assert.ok(!overlap, `${query} at ${width} px: "${a.name}" (${a.left}-${a.right}) overlaps "${b.name}" (${b.left}-${b.right})`);
        }
      }
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${query} at ${width} px: the page is ${overflow}px wider than the window`);
    }
    assert.deepEqual(problems, []);
    await page.close();
  }
});

/** Drift numbers after pruning `heads` on the page at `query`, once the badge names `backend`. */
async function driftAfterPruning(query, backend, numHeads, heads) {
  const { page, problems, lab } = await app.open(query);
  await lab.status.waitBadge(backend);
  // The first heatmaps may come from the CPU while the GPU starts: wait for the backend's own pass.
  await lab.status.waitPassOn(backend);
  await lab.heads.heatmap(numHeads - 1).waitFor();
  assert.equal(await lab.heads.drawn(24), numHeads);
  for (const h of heads) await lab.heads.toggle(h).click();
  const numbers = { cosine: Number(await lab.drift.cosine.textContent()), rel: Number(await lab.drift.relL2.textContent()) };
  return { page, problems, lab, numbers };
}

test('by default the page times both backends and runs each pass where it was faster, and says so', async () => {
  // SwiftShader's software WebGPU is far slower than the CPU kernel: the page must measure that
  // and run on the CPU kernel, the synthetic layer and the trained model alike.
  const { page, problems, lab: { settings, status, trained } } = await app.open('?preset=bert-base&seq=16');
  await status.timing.waitText(/Chosen by measurement/, { timeout: 60000 });
  const timing = await status.timing.textContent();
  console.log(`BERT-base, 16 tokens, automatic: ${timing}`);
  assert.match(timing, /^Forward pass on CPU · wasm simd128( \+ relaxed SIMD)?: .* Chosen by measurement, faster here than on the GPU: about [\d.]+ ms against [\d.]+ (ms|s) \(timed on this machine\)/);
  assert.match(await status.badge.textContent(), /^CPU · wasm simd128( \+ relaxed SIMD)? · measured faster here$/);
  assert.match(await status.badge.getAttribute('title'), /^faster here than on the GPU: about/);
  assert.equal(await status.note.count(), 0, 'a measured choice is not a failure');
  // Another length of the same shape is placed on the same measurement; another shape is measured.
  await settings.setSeq('64');
  await status.timing.waitText(/64 tokens\. Chosen by measurement, faster here than on the GPU/, { timeout: 60000 });
  // The trained model is measured too, for its own shape.
  await settings.preset.selectOption('trained');
  await trained.backend.waitText(/Running on the CPU kernel \(wasm simd128[^)]*\), faster here than on the GPU: about/, { timeout: 120000 });
  console.log(`trained model, automatic: ${await trained.backend.textContent()}`);
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
    console.log(`${preset}: badge "${await gpu.lab.status.badge.textContent()}", drift`, gpu.numbers, 'vs CPU', cpu.numbers);
    assert.ok(Math.abs(gpu.numbers.cosine - cpu.numbers.cosine) < 2e-5, preset);
    assert.ok(Math.abs(gpu.numbers.rel - cpu.numbers.rel) < 2e-4, preset);
    assert.ok(gpu.numbers.rel > 0, preset);
    // Same heatmaps: every pixel within one colour step (weights differ by ~1e-6 relative).
    const [a, b] = await Promise.all([gpu.lab, cpu.lab].map((lab) => lab.heads.pixels()));
    assert.ok(a.length === b.length && a.length >= numHeads * 24 * 24 * 4, preset);
    const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
    assert.ok(worst <= 1, `${preset}: heatmap pixels differ by up to ${worst}`);
    console.log(`${preset}: ${a.length / 4} heatmap pixels, largest colour difference GPU vs CPU: ${worst}`);
    assert.match(await gpu.lab.status.timing.textContent(), /Forward pass on WebGPU/);
    if (preset === 'gpt2-large') await gpu.page.screenshot({ path: join(artifacts, 'page-webgpu.png'), fullPage: true });
    assert.deepEqual(gpu.problems, [], preset);
    assert.deepEqual(cpu.problems, [], preset);
    await gpu.page.close();
    await cpu.page.close();
  }
});

test('without WebGPU the page runs on the CPU and says why', async () => {
  const { page, problems, lab: { heads, status } } = await app.open('?backend=gpu', { via: app.noGpuBrowser });
  await heads.heatmap(11).waitFor();
  // The first heatmaps may be drawn while the page still looks for a GPU.
  await status.badge.waitTextNot(/preparing the GPU/);
  assert.match(await status.badge.textContent(), /^CPU · wasm simd128/);
  assert.match(await status.note.textContent(), /not using the GPU: this browser does not offer WebGPU/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a lost GPU device switches to the CPU and keeps the reader\'s settings', async () => {
  const { page, problems, lab: { heads, drift, settings, status } } = await app.open('?preset=gpt2-small&seq=20&backend=gpu');
  await status.waitBadge('WebGPU');
  await heads.heatmap(11).waitFor();
  await heads.toggle(6).click();
  const before = await drift.cosine.textContent();
  assert.equal(await page.evaluate(() => window.wasmBindings.simulate_gpu_loss()), true);
  // The next forward pass (a new sequence length) meets the lost device.
  await settings.setSeq('21');
  await status.waitBadge('CPU');
  await heads.waitWidth(21);
  assert.match(await status.note.textContent(), /switched to the CPU because the GPU device was lost/);
  assert.equal(await heads.toggle(6).getAttribute('aria-pressed'), 'false', 'pruned head kept');
  assert.match(page.url(), /preset=gpt2-small&seq=21/);
  assert.notEqual(await drift.cosine.textContent(), '1.000000');
  assert.ok(before.length > 0);
  assert.deepEqual(problems, []);
  await page.close();
});

/** Asserts the page's drift numbers equal the CPU core's for the page's own settings. */
async function assertMatchesCpuCore(page, lab, what) {
  const query = new URL(page.url()).search;
  const pruned = await lab.heads.pruned();
  const expected = await page.evaluate(([q, p]) => window.wasmBindings.cpu_core_drift(q, new Uint32Array(p)), [query, pruned]);
  const shown = `${await lab.drift.cosine.textContent()} ${await lab.drift.relL2.textContent()}`;
  const [ec, er] = expected.split(' ').map(Number);
  const [sc, sr] = shown.split(' ').map(Number);
  assert.ok(Math.abs(ec - sc) <= 2e-6 && Math.abs(er - sr) <= 2e-4, `${what}: page shows "${shown}", CPU core "${expected}"`);
}

for (const backend of ['cpu', 'gpu']) {
  test(`explainer on the ${backend.toUpperCase()} backend: every preset, toggles and the prune slider match the CPU core`, async () => {
    const presets = [['transformer', 8], ['bert-base', 12], ['gpt2-small', 12], ['bert-large', 16], ['gpt2-medium', 16],
      ['gpt2-large', 20]];
    for (const [preset, numHeads] of presets) {
      const { page, problems, lab } = await app.open(`?preset=${preset}&seq=12&backend=${backend}`);
      const { chart, drift, heads, status } = lab;
      // The first heatmaps may come from the CPU while the GPU starts: wait for the chosen
      // backend's own pass before comparing numbers.
      await status.waitPassOn(backend === 'gpu' ? 'WebGPU' : 'CPU');
      await heads.heatmap(numHeads - 1).waitFor();
      await heads.waitImportance(numHeads - 1);
      assert.match(await status.badge.textContent(), backend === 'gpu' ? /^WebGPU/ : /^CPU/);
      assert.match(await chart.summary.textContent(), /d_k = \d+ \/ \d+ = 64, inside the 64\.\.128 band/);
      await heads.toggle(1).click();
      await assertMatchesCpuCore(page, lab, `${preset}, head 1 off`);
      // "Prune the k least important": the pruned heads are those ranked last.
      const k = Math.round(numHeads * 0.4);
      await drift.pruneK.fill(String(k));
      await drift.active.waitText(new RegExp(`^${numHeads - k} of`));
      const pruned = await heads.pruned();
      assert.equal(pruned.length, k);
      for (const h of pruned) {
        const rank = await heads.rank(h);
        assert.ok(rank > numHeads - k, `${preset}: head ${h} (rank ${rank}) is not among the ${k} least important`);
      }
      await assertMatchesCpuCore(page, lab, `${preset}, ${k} least important pruned`);
      const ranked = Number(await drift.relL2.textContent());
      await drift.pruneRandom.click();
      await assertMatchesCpuCore(page, lab, `${preset}, ${k} random pruned`);
      assert.equal((await heads.pruned()).length, k);
      assert.ok(ranked > 0);
      assert.deepEqual(problems, [], preset);
      await page.close();
    }
  });
}

test('the chart names a point on hover, heads enlarge with labels, and the batched claim is measured', async () => {
  const { page, problems, lab: { chart, claims, heads } } = await app.open('?preset=bert-base&seq=10&backend=cpu');
  await heads.heatmap(11).waitFor();
  // Hover GPT-3's point: canvas pixels from data-points, scaled to the page.
  const canvas = chart.config;
  const points = Object.fromEntries((await canvas.getAttribute('data-points')).split('|')
    .map((p) => p.split('@')).map(([label, xy]) => [label, xy.split(',').map(Number)]));
  assert.deepEqual(Object.keys(points).slice(0, 5), ['Transformer (orig.)', 'BERT-base / GPT-2 Small',
    'BERT-large / GPT-2 Medium', 'GPT-2 Large', 'GPT-3 (175B)']);
  const box = await canvas.boundingBox();
  const [x, y] = points['GPT-3 (175B)'];
  const [cw, ch] = await canvas.evaluate((c) => [c.width, c.height]);
  await page.mouse.move(box.x + (x * box.width) / cw, box.y + (y * box.height) / ch);
  assert.equal(await chart.hover.textContent(), 'GPT-3 (175B): d_model 12288, 96 heads, d_k = 128');

  await heads.heatmap(4).click();
  const detail = heads.detail;
  await detail.waitFor();
  assert.equal(await heads.detailLabels.count(), 10);
  const big = await heads.detailHeatmap.boundingBox();
  await page.mouse.move(big.x + big.width * 0.95, big.y + big.height * 0.05);
  assert.match(await heads.detailHover.textContent(), /^query t0 ".*" → key t9 ".*": weight 0\.\d{4}$/);
  await heads.closeDetail.click();
  assert.equal(await heads.detail.count(), 0);

  await claims.measureBatched.click();
  await claims.batchedResult.waitText(/Ratio/, { timeout: 60000 });
  const ratio = Number((await claims.batchedResult.textContent()).match(/Ratio (\d+\.\d+)/)[1]);
  console.log(`batched vs one head on the CPU, BERT-base n = 10: ${await claims.batchedResult.textContent()}`);
  assert.ok(ratio > 0.2 && ratio < 5, `ratio ${ratio}`);
  assert.match(await claims.pruningClaim.textContent(), /Pruning the 2 least important of 12 heads \(17 %\) moves it by 0\.\d{3}/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('charts are drawn at their laid-out size times the device pixel ratio, and again when it changes', async () => {
  const { page, problems, lab: { chart, heads } } = await app.open('?preset=bert-base&seq=12&backend=cpu',
    { viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 2 });
  await heads.heatmap(11).waitFor();
  /** Each chart's backing size against its CSS size times 2, once they agree. */
  const sharp = (canvas) => chart.waitSharp(canvas, 2);
  const [wide] = await sharp(chart.config);
  await sharp(chart.drift);
  // Wide: the key from numbers to names is drawn in the chart (and kept for screen readers).
  assert.equal(await chart.key.getAttribute('class'), 'chart-key sr-only');
  await chart.panel.screenshot({ path: join(artifacts, 'chart-dpr2.png') });
  // A phone's width: the canvas follows, and the key moves under the chart.
  await page.setViewportSize({ width: 390, height: 900 });
  await chart.waitNarrowerThan(wide);
  const [narrow, css] = await sharp(chart.config);
  assert.ok(narrow < wide && css < 390, `${narrow} backing pixels for ${css} CSS pixels`);
  await chart.waitKeyShown();
  assert.equal(await chart.keyItems.count(), 5);
  await chart.panel.screenshot({ path: join(artifacts, 'chart-phone-dpr2.png') });
  assert.deepEqual(problems, []);
  await page.close();
});

test('light and dark themes apply, with screenshots of each', async () => {
  for (const theme of ['light', 'dark']) {
    const { page, problems, lab: { drift, heads } } = await app.open(`?preset=bert-base&seq=16&theme=${theme}`, { viewport: { width: 1600, height: 1100 } });
    await heads.heatmap(11).waitFor();
    await drift.pruneK.fill('4');
    await heads.heatmap(2).click();
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
  const { page, problems, lab: { heads, settings, trained } } = await app.open('?preset=bert-base&seq=8&backend=cpu');
  const asset = [];
  page.on('request', (r) => r.url().endsWith('minilm-f16.bin') && asset.push(r.url()));
  await heads.heatmap(11).waitFor();
  assert.equal(asset.length, 0, 'the synthetic page must not download the model');
  await settings.preset.selectOption('trained');
  await trained.waitReady({ timeout: 60000 });
  assert.equal(asset.length, 1);
  assert.match(page.url(), /preset=minilm&.*text=He%20sat%20on%20the%20bank/);
  assert.equal(await trained.tokens.textContent(), '[CLS]hesatonthebankoftheriverandwatchedthewater.[SEP]');
  // Layer 1, head 2 of this model attends to the previous token: its heatmap's bright pixels sit
  // just below the diagonal.
  const offDiagonal = await trained.heatmap(2).evaluate((c) => {
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
  assert.equal(await trained.cosine.textContent(), '1.000000');
  await trained.grid(1, 5).click();
  await trained.grid(4, 6).click();
  await trained.cosine.waitText(/^0\.\d{3,6}$/);
  const cosine = await trained.cosineValue();
  assert.ok(cosine > 0.9 && cosine < 1, `cosine after pruning 2 heads: ${cosine}`);
  assert.match(await trained.check.textContent(), /Full model: "The financial institution approved my loan\."/);
  // Half the heads, least important first: the embedding barely moves, as the contrast says.
  await trained.waitPruneKEnabled();
  await trained.pruneK.fill('36');
  await trained.waitPrunedCosine('36 of 72');
  const half = await trained.cosineValue();
  const claimed = (await trained.contrast.textContent()).match(/still leaves the embedding at cosine (\d\.\d+)/)[1];
  console.log(`trained model, 36 least important heads pruned: cosine ${half}; ${await trained.contrast.textContent()}`);
  // The same pass, the same number, shown to the digits the f16 weights support (a drift of
  // about 0.1: three decimals).
  assert.equal(await trained.cosine.textContent(), claimed);
  assert.equal(claimed, half.toFixed(3));
  // Without layer 1's heads the model loses the context and picks the sentence sharing "bank".
  await trained.restore.click();
  for (let h = 0; h < 12; h++) await trained.grid(0, h).click();
  await trained.check.waitText(/Pruned: "We sat on the grassy bank by the river\."/);
  assert.match(await trained.check.textContent(), /the answer flipped/);
  // A new sentence: its tokens are never shown beside the last sentence's cosine.
  const before = await trained.cosineValue();
  const watch = await watchStates(page, ['tokens', 'trained-cosine']);
  await trained.setText('The cat sat on the mat.');
  await trained.tokens.waitText(/mat/);
  await trained.waitPrunedCosine('12 of 72');
  const after = await trained.cosineValue();
  const states = await watch.stop();
  const shown = states.filter(([tokens, cosine]) => /mat/.test(tokens?.text) && cosine?.data.value !== undefined);
  assert.ok(after !== before && shown.length > 0, `cosine ${before} then ${after}`);
  assert.deepEqual([...new Set(shown.map(([, c]) => Number(c.data.value)))], [after], 'the cosines shown beside the new tokens');
  await page.screenshot({ path: join(artifacts, 'trained.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});

test('a failed model download says so and can be retried', async () => {
  const { page, problems, lab: { trained } } = await app.open('?preset=minilm');
  // (The page was opened with the route not yet blocked; block it and reload.)
  await page.route('**/minilm-f16.bin', (route) => route.abort());
  await page.reload();
  await trained.modelError.waitFor();
  assert.match(await trained.modelError.textContent(), /Could not load the built-in model: minilm-f16\.bin: the download failed/);
  await page.unroute('**/minilm-f16.bin');
  await trained.modelError.getByRole('button').click();
  await trained.waitReady({ timeout: 60000 });
  // A truncated file is refused with its reason, never half-loaded.
  await page.route('**/minilm-f16.bin', (route) => route.fulfill({ body: Buffer.from('HEADLAB-MODEL-2\n\x10\x00\x00\x00short') }));
  await page.reload();
  await trained.modelError.waitFor();
  assert.match(await trained.modelError.textContent(), /incomplete/);
  const unexpected = problems.filter((p) => !/ERR_FAILED|Failed to load resource/.test(p));
  assert.deepEqual(unexpected, []);
  await page.close();
});

test('the trained model runs on WebGPU where the page has it, with the CPU kernel\'s numbers', async () => {
  const results = {};
  for (const backend of ['gpu', 'cpu']) {
    const { page, problems, lab: { trained } } = await app.open(`?preset=minilm&backend=${backend}`);
    await trained.waitReady({ timeout: 60000 });
    assert.match(await trained.backend.textContent(), backend === 'gpu' ? /Running on the GPU \(WebGPU\)/ : /Running on the CPU kernel/);
    for (const [layer, head] of [[0, 3], [2, 7], [5, 0]]) await trained.grid(layer, head).click();
    await trained.waitPrunedCosine('3 of 72', { timeout: 120000 });
    results[backend] = await trained.cosineValue();
    // On SwiftShader the GPU's passes share this machine's two cores with the page's workers.
    await trained.check.waitText(/Pruned:/, { timeout: 120000 });
    assert.deepEqual(problems, [], backend);
    await page.close();
  }
  console.log('trained model, 3 heads pruned: cosine on WebGPU', results.gpu, 'on the CPU', results.cpu);
  assert.ok(Math.abs(results.gpu - results.cpu) < 2e-5, JSON.stringify(results));
});

test('pruned heads travel in the link, and a reload restores the same numbers', async () => {
  const { page, problems, lab } = await app.open('?preset=bert-base&seq=8&backend=cpu&pruned=1,4,99,x');
  const { drift, heads, status, trained } = lab;
  await heads.heatmap(11).waitFor();
  assert.match(await status.urlNotes.textContent(), /pruned= names heads that do not exist here \(99, x\)/);
  assert.deepEqual(await heads.pruned(), [1, 4]);
  assert.equal(await drift.active.textContent(), '10 of 12');
  await heads.toggle(5).click();
  await page.waitForFunction(() => /pruned=1,4,5/.test(location.search));
  const numbers = `${await drift.cosine.textContent()} ${await drift.relL2.textContent()}`;
  await page.reload();
  await heads.heatmap(11).waitFor();
  await drift.active.waitText('9 of 12');
  assert.deepEqual(await heads.pruned(), [1, 4, 5]);
  assert.equal(`${await drift.cosine.textContent()} ${await drift.relL2.textContent()}`, numbers);
  await assertMatchesCpuCore(page, lab, 'restored from the link');

  await page.goto(`${app.base}/?preset=minilm&backend=cpu&pruned=0,13&layer=2`);
  await trained.waitReady({ timeout: 60000 });
  assert.match(await trained.cosineLine.textContent(), /2 of 72 heads pruned/);
  assert.equal(await trained.grid(1, 1).getAttribute('aria-pressed'), 'false');
  assert.equal(await trained.layer.inputValue(), '2');
  assert.equal(await trained.linkNotes.count(), 0, 'nothing the model lacks');
  // The link is read against the loaded model's shape: heads and a layer it lacks are named,
  // the rest kept.
  await page.goto(`${app.base}/?preset=minilm&backend=cpu&pruned=3,200&layer=9`);
  await trained.waitReady({ timeout: 60000 });
  assert.match(await trained.linkNotes.textContent(), /pruned= names heads all-MiniLM-L6-v2 does not have \(200; it has 72\); they are ignored\..*layer=9 is past all-MiniLM-L6-v2's 6 layers; showing layer 1\./s);
  assert.match(await trained.cosineLine.textContent(), /1 of 72 heads pruned/);
  assert.equal(await trained.grid(0, 3).getAttribute('aria-pressed'), 'false');
  assert.equal(await trained.layer.inputValue(), '0');
  await page.waitForFunction(() => /pruned=3(&|$)/.test(location.search) && /layer=0/.test(location.search));
  assert.deepEqual(problems.filter((p) => !p.includes('favicon')), []);
  await page.close();
});
