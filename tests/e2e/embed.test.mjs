// End-to-end tests of headlab living in a handbook page: iframes that size themselves, host
// messages checked by origin and schema, state in the URL, exports, keyboard use, loading
// indicators and an axe-core accessibility audit. Two servers give two origins, as a real
// handbook (one origin) embedding the app (another) has.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { artifacts, download, suite, toolsDir } from './harness.mjs';
import { Handbook, Lab } from './pages.mjs';

const app = suite({ noGpu: true, host: true });

/** Waits until the iframe named `name` is its content's height (within a pixel), and returns both. */
async function waitSized(handbook, name) {
  const frame = await handbook.frame(name);
  await handbook.waitHeightSet(name, { timeout: 30000 });
  let sizes;
  for (let i = 0; i < 100; i++) {
    const outer = await handbook.iframe(name).evaluate((el) => el.getBoundingClientRect().height);
    const inner = await frame.evaluate(() => document.body.getBoundingClientRect().height);
    sizes = { outer, inner };
    // The iframe has a 1px border on each side.
    if (Math.abs(outer - 2 - Math.ceil(inner)) <= 1) return sizes;
    await handbook.page.waitForTimeout(100);
  }
  assert.fail(`${handbook.iframe(name).testId} did not resize to its content: ${JSON.stringify(sizes)}`);
}

test('the handbook page embeds the app twice, each iframe sized to its content and themed by the host', async () => {
  const { page, problems } = await app.open(`${app.hostBase}/handbook.html`, { viewport: { width: 1000, height: 900 } });
  const handbook = new Handbook(page);
  const chart = await handbook.frame('chart');
  const prune = await handbook.frame('prune');
  const inChart = new Lab(chart);
  const inPrune = new Lab(prune);
  await inChart.chart.config.waitFor();
  await inPrune.heads.heatmap(11).waitFor();
  // Each view shows its part of the explorer and no page chrome.
  assert.equal(await inChart.heads.canvases.count(), 0, 'the chart view has no heatmaps');
  assert.equal(await inPrune.chart.config.count(), 0, 'the prune view has no chart');
  assert.equal(await inPrune.footer.isHidden(), true);
  assert.equal(await inPrune.header.boundingBox().then((b) => b.height), 1, 'the h1 is for screen readers only');
  assert.equal(await inPrune.heads.drawn(12), 12);
  // The code walk beside the section's code: its own frame, stepping on BERT-base's tensors.
  await handbook.iframe('code').scrollIntoViewIfNeeded();
  const code = await handbook.frame('code');
  const inCode = new Lab(code);
  await inCode.code.next.click();
  await inCode.code.next.click();
  await inCode.code.shape.waitText('(1, 16, 2304)');
  assert.equal(await code.locator('canvas').count(), 0, 'the code view has no chart or heatmaps');
  const chartSize = await waitSized(handbook, 'chart');
  const pruneSize = await waitSized(handbook, 'prune');
  console.log('iframe heights (outer, content):', JSON.stringify({ chartSize, pruneSize }));
  assert.ok(chartSize.inner > 300 && pruneSize.inner > 600, 'both frames hold their content');
  await page.screenshot({ path: join(artifacts, 'handbook.png'), fullPage: true });

  // Pruning inside the frame works, and a shrinking frame (fewer tokens) shrinks the iframe.
  await inPrune.heads.toggle(2).click();
  assert.equal(await inPrune.drift.active.textContent(), '11 of 12');
  // The "full explorer" link carries the state, without the embedding.
  const full = new URL(await inPrune.status.fullView.getAttribute('href'), prune.url());
  assert.equal(full.searchParams.get('pruned'), '2');
  assert.equal(full.searchParams.get('preset'), 'bert-base');
  assert.equal(full.searchParams.has('embed'), false);

  // The host page's theme switch reaches both frames through embed.js.
  await handbook.theme.selectOption('dark');
  for (const frame of [chart, prune]) {
    await frame.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
  }
  await page.screenshot({ path: join(artifacts, 'handbook-dark.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});

test('host messages from a wrong origin or with a bad schema change nothing; valid ones apply', async () => {
  // The handbook page's own CSP allows only same-origin frames; this test builds a host page
  // with frames from another origin, so it lifts the host's policy (the app keeps its own).
  const { page, problems } = await app.open(`${app.hostBase}/handbook.html`, { allowed: [app.hostBase, app.base], bypassCSP: true });
  const handbook = new Handbook(page);
  // Two frames of the app on the other origin: one trusting this host, one trusting another.
  await handbook.replaceWithFrames([['trusting', app.hostBase], ['elsewhere', 'https://handbook.example']].map(([name, trusted]) => (
    { name, src: `${app.base}/?embed=1&view=chart&backend=cpu&host=${encodeURIComponent(trusted)}`, width: '800px', height: '400px' })));
  const trusting = await handbook.frame('trusting');
  const elsewhere = await handbook.frame('elsewhere');
  await new Lab(trusting).chart.config.waitFor();
  await new Lab(elsewhere).chart.config.waitFor();
  const state = (frame) => frame.evaluate(() => `${document.documentElement.dataset.theme ?? 'auto'} ${location.search}`);
  const before = { trusting: await state(trusting), elsewhere: await state(elsewhere) };
  const send = (name, message) => handbook.post(name, message, app.base);

  const valid = { to: 'headlab', version: 1, type: 'set-theme', theme: 'dark' };
  const bad = [
    { ...valid, version: 2 },
    { ...valid, theme: 'pink' },
    { ...valid, extra: 'field' },
    { ...valid, to: 'someone-else' },
    { to: 'headlab', version: 1, type: 'set-preset', preset: '<img src=x onerror=alert(1)>' },
    { to: 'headlab', version: 1, type: 'eval', code: 'alert(1)' },
    'set-theme dark',
    JSON.stringify(valid),
    [valid],
    null,
    { ...valid, theme: 'x'.repeat(10000) },
  ];
  for (const message of bad) await send('trusting', message);
  await send('elsewhere', valid);
  await send('elsewhere', { to: 'headlab', version: 1, type: 'set-preset', preset: 'gpt2-large' });
  await page.waitForTimeout(800);
  assert.equal(await state(trusting), before.trusting, 'bad messages changed the trusting frame');
  assert.equal(await state(elsewhere), before.elsewhere, 'a message from an untrusted origin changed the frame');

  // The same channel does work for a well-formed message from the trusted host.
  await send('trusting', valid);
  await send('trusting', { to: 'headlab', version: 1, type: 'set-preset', preset: 'gpt2-large' });
  await trusting.waitForFunction(() => document.documentElement.dataset.theme === 'dark' && /preset=gpt2-large/.test(location.search));
  assert.deepEqual(problems, []);
  await page.close();
});

test('every view is a link: a full state round-trips, and a bad link falls back part by part', async () => {
  const query = '?preset=custom&d_model=1024&heads=8&seq=20&seed=7&backend=cpu&theme=dark&pruned=2,5';
  const { page, problems, lab } = await app.open(query);
  await lab.heads.heatmap(7).waitFor();
  await lab.heads.toggle(6).click();
  await lab.settings.setSeed('11');
  await page.waitForFunction(() => /seed=11/.test(location.search) && /pruned=2,5,6/.test(location.search));
  const numbers = async (p, { drift, settings }) => ({
    cosine: await drift.cosine.textContent(), rel: await drift.relL2.textContent(), active: await drift.active.textContent(),
    theme: await p.evaluate(() => document.documentElement.dataset.theme), dk: await settings.customDk.textContent(),
  });
  await lab.drift.active.waitText('5 of 8');
  const first = await numbers(page, lab);
  const { page: again, problems: againProblems, lab: labAgain } = await app.open(page.url());
  await labAgain.heads.heatmap(7).waitFor();
  await labAgain.drift.active.waitText('5 of 8');
  assert.deepEqual(await numbers(again, labAgain), first);
  assert.equal(again.url(), page.url());

  // The trained model's sentence and layer travel too.
  await again.goto(`${app.base}/?preset=minilm&backend=cpu&text=${encodeURIComponent('Tom & Jerry: 50% "off"?')}&layer=4&pruned=61`);
  await labAgain.trained.waitReady({ timeout: 60000 });
  assert.equal(await labAgain.trained.text.inputValue(), 'Tom & Jerry: 50% "off"?');
  assert.equal(await labAgain.trained.layer.inputValue(), '4');
  assert.equal(await labAgain.trained.grid(5, 1).getAttribute('aria-pressed'), 'false');
  assert.match(again.url(), /text=Tom%20%26%20Jerry%3A%2050%25%20%22off%22%3F&layer=4&pruned=61/);

  // Each bad part of a link gets a note and its default; the rest is used.
  await page.goto(`${app.base}/?preset=gpt2-large&seq=abc&layer=9&embed=maybe&view=x&theme=neon&seed=-1`);
  await lab.heads.heatmap(19).waitFor();
  const notes = await lab.status.urlNotes.textContent();
  for (const part of ['seq=abc', 'embed=maybe', 'theme=neon', 'seed=-1']) assert.match(notes, new RegExp(part), notes);
  assert.equal(await lab.heads.drawn(16), 20);
  assert.equal(await lab.status.panicBanner.isHidden(), true);
  assert.deepEqual([...problems, ...againProblems], []);
  await page.close();
  await again.close();
});

const pngSize = (bytes) => {
  assert.deepEqual([...bytes.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], 'PNG signature');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
};

test('exports: PNG and SVG of the charts and of any heatmap, CSV of weights, importance and drift', async () => {
  const { page, problems, lab: { chart, drift, heads } } = await app.open('?preset=bert-base&seq=16&backend=cpu&pruned=3');
  await heads.heatmap(11).waitFor();
  await heads.importance(11).waitText(/#/);

  const chartPng = await download(page, chart.exportPng);
  assert.equal(chartPng.name, 'headlab-config-chart.png');
  const size = pngSize(chartPng.bytes);
  assert.ok(size.width >= 600 && size.height >= 400, JSON.stringify(size));

  await heads.heatmap(4).click();
  const head = await download(page, heads.exportHeadPng);
  assert.equal(head.name, 'headlab-bert-base-n16-seed42-head-4.png');
  assert.deepEqual(pngSize(head.bytes), { width: 512, height: 512 }, 'a 16x16 heatmap is saved at 32x');

  // Vector copies: each parses as SVG; the heatmap has one square per weight, with its tokens.
  const parse = (bytes) => page.evaluate((text) => {
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const root = doc.documentElement;
    return { root: root.nodeName, error: doc.querySelector('parsererror')?.textContent ?? null,
      rects: doc.querySelectorAll('rect').length, texts: [...doc.querySelectorAll('text')].map((t) => t.textContent.trim()),
      tips: [...doc.querySelectorAll('rect > title')].map((t) => t.textContent) };
  }, bytes.toString('utf8'));
  const headSvg = await download(page, heads.exportHeadSvg);
  assert.equal(headSvg.name, 'headlab-bert-base-n16-seed42-head-4.svg');
  const cells = await parse(headSvg.bytes);
  assert.deepEqual([cells.root, cells.error, cells.rects], ['svg', null, 16 * 16]);
  assert.match(cells.tips[1], /^t0 \S+ → t1 \S+: 0\.\d{4}$/);
  const chartSvg = await parse((await download(page, chart.exportSvg)).bytes);
  assert.deepEqual([chartSvg.root, chartSvg.error], ['svg', null]);
  for (const label of ['2  BERT-base / GPT-2 Small', '5  GPT-3 (175B)', 'd_k =', '64', '128', 'd_model (log scale)']) {
    assert.ok(chartSvg.texts.includes(label), `the chart's SVG has "${label}": ${chartSvg.texts}`);
  }
  const driftSvg = await parse((await download(page, chart.exportDriftSvg)).bytes);
  assert.deepEqual([driftSvg.root, driftSvg.error], ['svg', null]);
  assert.ok(driftSvg.texts.includes('least important first'));

  const lines = (bytes) => bytes.toString('utf8').trimEnd().split('\n');
  const attention = lines((await download(page, heads.exportAttentionCsv)).bytes);
  assert.equal(attention[0], 'head,query,query_token,key,key_token,weight');
  assert.equal(attention.length, 1 + 12 * 16 * 16);
  // Each query row of each head sums to 1.
  const sums = new Map();
  for (const row of attention.slice(1)) {
    const cells = row.split(',');
    const key = `${cells[0]}/${cells[1]}`;
    sums.set(key, (sums.get(key) ?? 0) + Number(cells.at(-1)));
  }
  assert.equal(sums.size, 12 * 16);
  for (const [key, sum] of sums) assert.ok(Math.abs(sum - 1) < 1e-5, `${key} sums to ${sum}`);

  const importance = lines((await download(page, drift.exportImportanceCsv)).bytes);
  assert.equal(importance[0], 'head,importance_rel_l2,rank,pruned');
  assert.equal(importance.length, 13);
  assert.match(importance[4], /^3,0\.\d+,\d+,true$/);
  const curve = lines((await download(page, drift.exportCurveCsv)).bytes);
  assert.equal(curve.length, 1 + 13);
  // With every head pruned only the output bias is left: a relative change of almost exactly 1.
  const [k, ranked, random] = curve[12 + 1].split(',').map(Number);
  assert.ok(k === 12 && ranked > 0.999 && random > 0.999, curve[13]);
  const tokens = lines((await download(page, drift.exportTokenCsv)).bytes);
  assert.equal(tokens.length, 1 + 16 + 1);
  const all = tokens.at(-1).split(',');
  assert.equal(all[0], '"all"');
  assert.equal(Number(all[3]).toFixed(4), await drift.relL2.textContent());
  assert.deepEqual(problems, []);
  await page.close();
});

test('keyboard: controls are reachable with a visible focus, and arrow keys walk the head grid', async () => {
  const { page, problems, lab: { drift, heads, settings } } = await app.open('?preset=bert-base&seq=8&backend=cpu');
  await heads.heatmap(11).waitFor();
  // Tab from the top reaches the preset, the sliders and a head toggle, each with an outline.
  const reached = new Set();
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press('Tab');
    const focus = await page.evaluate(() => {
      const el = document.activeElement;
      if (el === document.body) return null; // past the last control, before wrapping around
      const style = getComputedStyle(el);
      return { id: el.dataset.testid ?? el.dataset.nav ?? el.tagName, outline: style.outlineStyle, width: style.outlineWidth };
    });
    if (!focus) continue;
    assert.notEqual(focus.outline, 'none', `focus on ${focus.id} is invisible`);
    reached.add(focus.id);
  }
  for (const { testId: id } of [settings.preset, settings.seqSlider, settings.seed, settings.theme, heads.exportAttentionCsv, heads.toggle(0)]) {
    assert.ok(reached.has(id), `Tab never reached ${id}: ${[...reached].join(' ')}`);
  }
  await heads.toggle(0).focus();
  const focused = () => page.evaluate(() => document.activeElement.dataset.testid);
  await page.keyboard.press('ArrowRight');
  assert.equal(await focused(), heads.toggle(1).testId);
  const columns = await heads.columns();
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(), heads.toggle(1 + columns).testId);
  await page.keyboard.press('End');
  assert.equal(await focused(), heads.toggle(11).testId);
  await page.keyboard.press('Space');
  assert.equal(await heads.toggle(11).getAttribute('aria-pressed'), 'false');
  assert.equal(await drift.active.textContent(), '11 of 12');
  await page.keyboard.press('Home');
  assert.equal(await focused(), heads.toggle(0).testId);
  assert.deepEqual(problems, []);
  await page.close();
});

test('loading: a status while the wasm starts and while a long pass runs, still under reduced motion', async () => {
  const html = await (await fetch(`${app.base}/`)).text();
  assert.match(html, /<p class="boot" role="status"[^>]*>Starting headlab…<\/p>/);
  const { page, problems, lab: { heads, settings, status } } = await app.open('?preset=gpt2-large&seq=16&backend=cpu', { reducedMotion: 'reduce' });
  await heads.heatmap(19).waitFor();
  assert.equal(await status.boot.count(), 0, 'the boot status is gone once the app runs');
  // A pass of over a second: the timing line says so and shows a (still) indicator.
  // A mutation observer sees the status even though the pass then holds the main thread.
  await status.watchBusy();
  await settings.setSeq('1024');
  await page.waitForFunction(() => window.busySeen.length > 0);
  const [busy, animation] = (await page.evaluate(() => window.busySeen[0])).split('|');
  assert.match(busy, /Computing/);
  assert.doesNotMatch(animation, /spin/, 'no spinning under prefers-reduced-motion');
  await status.waitNotBusy({ timeout: 60000 });
  assert.deepEqual(problems, []);
  await page.close();
});

test('accessibility: axe-core finds no serious or critical violations', async () => {
  const axe = join(toolsDir, 'node_modules/axe-core/axe.min.js');
  const pages = [
    ['page, light', `${app.base}/?backend=cpu&theme=light`, (lab) => lab.heads.heatmap(11)],
    ['page, dark', `${app.base}/?backend=cpu&theme=dark`, (lab) => lab.heads.heatmap(11)],
    ['trained model', `${app.base}/?preset=minilm&backend=cpu`, (lab) => lab.trained.heatmap(11)],
    ['embedded prune view', `${app.base}/?embed=1&view=prune&backend=cpu`, (lab) => lab.heads.heatmap(11)],
    ['embedded code walk', `${app.base}/?embed=1&view=code&backend=cpu`, (lab) => lab.code.shape],
    ['embedded flow', `${app.base}/?embed=1&view=flow&backend=cpu&pruned=2`, (lab) => lab.flow.change],
    ['handbook', `${app.hostBase}/handbook.html`, null],
  ];
  const report = [];
  for (const [what, url, ready] of pages) {
    // axe is injected as an inline script, which the page's CSP rightly refuses: lift it here.
    const { page, problems, lab } = await app.open(url, { allowed: [app.base, app.hostBase], bypassCSP: true });
    if (ready) await ready(lab).waitFor({ timeout: 60000 });
    else await new Lab(await new Handbook(page).frame('prune')).heads.heatmap(11).waitFor();
    await page.addScriptTag({ path: axe });
    const violations = await page.evaluate(async () => {
      const result = await window.axe.run(document, { resultTypes: ['violations'] });
      return result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, example: v.nodes[0]?.target.join(' ') }));
    });
    report.push(`${what}: ${violations.length ? violations.map((v) => `${v.id} (${v.impact}, ${v.nodes})`).join(', ') : 'none'}`);
    const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(serious, [], what);
    assert.deepEqual(problems, [], what);
    await page.close();
  }
  console.log(`axe-core violations by page:\n  ${report.join('\n  ')}`);
});
