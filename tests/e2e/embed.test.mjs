// End-to-end tests of headlab living in a handbook page: iframes that size themselves, host
// messages checked by origin and schema, state in the URL, exports, keyboard use, loading
// indicators and an axe-core accessibility audit. Two servers give two origins, as a real
// handbook (one origin) embedding the app (another) has.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { artifacts, drawnHeatmaps, launch, openPage, serveDist, text, toolsDir } from './harness.mjs';

let app, host, browser;

before(async () => {
  app = await serveDist();
  host = await serveDist();
  browser = await launch({ webgpu: false });
});

after(async () => {
  await browser?.close();
  app?.server.close();
  host?.server.close();
});

/** The frame of `page` whose iframe has data-testid `id`. */
const frameOf = async (page, id) => (await page.getByTestId(id).elementHandle()).contentFrame();

/** Waits until the iframe's height is its content's height (within a pixel), and returns both. */
async function waitSized(page, id) {
  const frame = await frameOf(page, id);
  await page.waitForFunction(async (id) => {
    const el = document.querySelector(`[data-testid=${id}]`);
    return el.style.height !== '';
  }, id, { timeout: 30000 });
  let sizes;
  for (let i = 0; i < 100; i++) {
    const outer = await page.getByTestId(id).evaluate((el) => el.getBoundingClientRect().height);
    const inner = await frame.evaluate(() => document.body.getBoundingClientRect().height);
    sizes = { outer, inner };
    // The iframe has a 1px border on each side.
    if (Math.abs(outer - 2 - Math.ceil(inner)) <= 1) return sizes;
    await page.waitForTimeout(100);
  }
  assert.fail(`${id} did not resize to its content: ${JSON.stringify(sizes)}`);
}

test('the handbook page embeds the app twice, each iframe sized to its content and themed by the host', async () => {
  const { page, problems } = await openPage(browser, `${host.base}/handbook.html`, { viewport: { width: 1000, height: 900 } });
  const chart = await frameOf(page, 'frame-chart');
  const prune = await frameOf(page, 'frame-prune');
  await chart.getByTestId('config-chart').waitFor();
  await prune.getByTestId('heatmap-11').waitFor();
  // Each view shows its part of the explorer and no page chrome.
  assert.equal(await chart.locator('canvas.heatmap').count(), 0, 'the chart view has no heatmaps');
  assert.equal(await prune.getByTestId('config-chart').count(), 0, 'the prune view has no chart');
  assert.equal(await prune.locator('.page-footer').isHidden(), true);
  assert.equal(await prune.locator('.page-header').boundingBox().then((b) => b.height), 1, 'the h1 is for screen readers only');
  assert.equal(await drawnHeatmaps(prune, 12), 12);
  // The code walk beside the section's code: its own frame, stepping on BERT-base's tensors.
  await page.getByTestId('frame-code').scrollIntoViewIfNeeded();
  const code = await frameOf(page, 'frame-code');
  await code.getByTestId('code-next').click();
  await code.getByTestId('code-next').click();
  await code.waitForFunction(() => document.querySelector('[data-testid=code-shape]')?.textContent === '(1, 16, 2304)');
  assert.equal(await code.locator('canvas').count(), 0, 'the code view has no chart or heatmaps');
  const chartSize = await waitSized(page, 'frame-chart');
  const pruneSize = await waitSized(page, 'frame-prune');
  console.log('iframe heights (outer, content):', JSON.stringify({ chartSize, pruneSize }));
  assert.ok(chartSize.inner > 300 && pruneSize.inner > 600, 'both frames hold their content');
  await page.screenshot({ path: join(artifacts, 'handbook.png'), fullPage: true });

  // Pruning inside the frame works, and a shrinking frame (fewer tokens) shrinks the iframe.
  await prune.getByTestId('head-toggle-2').click();
  assert.equal(await text(prune, 'drift-active'), '11 of 12');
  // The "full explorer" link carries the state, without the embedding.
  const full = new URL(await prune.getByTestId('full-view').getAttribute('href'), prune.url());
  assert.equal(full.searchParams.get('pruned'), '2');
  assert.equal(full.searchParams.get('preset'), 'bert-base');
  assert.equal(full.searchParams.has('embed'), false);

  // The host page's theme switch reaches both frames through embed.js.
  await page.getByTestId('host-theme').selectOption('dark');
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
  const { page, problems } = await openPage(browser, `${host.base}/handbook.html`, { allowed: [host.base, app.base], bypassCSP: true });
  // Two frames of the app on the other origin: one trusting this host, one trusting another.
  await page.evaluate(({ app, host }) => {
    document.body.replaceChildren();
    for (const [id, trusted] of [['trusting', host], ['elsewhere', 'https://handbook.example']]) {
      const f = document.createElement('iframe');
      f.dataset.testid = id;
      f.src = `${app}/?embed=1&view=chart&backend=cpu&host=${encodeURIComponent(trusted)}`;
      f.style.width = '800px';
      f.style.height = '400px';
      document.body.append(f);
    }
  }, { app: app.base, host: host.base });
  const trusting = await frameOf(page, 'trusting');
  const elsewhere = await frameOf(page, 'elsewhere');
  await trusting.getByTestId('config-chart').waitFor();
  await elsewhere.getByTestId('config-chart').waitFor();
  const state = (frame) => frame.evaluate(() => `${document.documentElement.dataset.theme ?? 'auto'} ${location.search}`);
  const before = { trusting: await state(trusting), elsewhere: await state(elsewhere) };
  const send = (id, message) => page.evaluate(({ id, message, origin }) =>
    document.querySelector(`[data-testid=${id}]`).contentWindow.postMessage(message, origin), { id, message, origin: app.base });

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
  const { page, problems } = await openPage(browser, `${app.base}/${query}`);
  await page.getByTestId('heatmap-7').waitFor();
  await page.getByTestId('head-toggle-6').click();
  await page.getByTestId('seed').fill('11');
  await page.getByTestId('seed').press('Enter');
  await page.waitForFunction(() => /seed=11/.test(location.search) && /pruned=2,5,6/.test(location.search));
  const numbers = async (p) => ({
    cosine: await text(p, 'drift-cosine'), rel: await text(p, 'drift-rel-l2'), active: await text(p, 'drift-active'),
    theme: await p.evaluate(() => document.documentElement.dataset.theme), dk: await text(p, 'custom-d-k'),
  });
  await page.waitForFunction(() => (document.querySelector('[data-testid=drift-active]')?.textContent ?? '') === '5 of 8');
  const first = await numbers(page);
  const { page: again, problems: againProblems } = await openPage(browser, page.url());
  await again.getByTestId('heatmap-7').waitFor();
  await again.waitForFunction(() => (document.querySelector('[data-testid=drift-active]')?.textContent ?? '') === '5 of 8');
  assert.deepEqual(await numbers(again), first);
  assert.equal(again.url(), page.url());

  // The trained model's sentence and layer travel too.
  await again.goto(`${app.base}/?preset=minilm&backend=cpu&text=${encodeURIComponent('Tom & Jerry: 50% "off"?')}&layer=4&pruned=61`);
  await again.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  assert.equal(await again.getByTestId('text').inputValue(), 'Tom & Jerry: 50% "off"?');
  assert.equal(await again.getByTestId('layer').inputValue(), '4');
  assert.equal(await again.getByTestId('grid-5-1').getAttribute('aria-pressed'), 'false');
  assert.match(again.url(), /text=Tom%20%26%20Jerry%3A%2050%25%20%22off%22%3F&layer=4&pruned=61/);

  // Each bad part of a link gets a note and its default; the rest is used.
  await page.goto(`${app.base}/?preset=gpt2-large&seq=abc&layer=9&embed=maybe&view=x&theme=neon&seed=-1`);
  await page.getByTestId('heatmap-19').waitFor();
  const notes = await text(page, 'url-notes');
  for (const part of ['seq=abc', 'embed=maybe', 'theme=neon', 'seed=-1']) assert.match(notes, new RegExp(part), notes);
  assert.equal(await drawnHeatmaps(page, 16), 20);
  assert.equal(await page.getByTestId('panic-banner').isHidden(), true);
  assert.deepEqual([...problems, ...againProblems], []);
  await page.close();
  await again.close();
});

/** Clicks `id` in `page` and returns the download's name and bytes. */
async function download(page, id) {
  const [file] = await Promise.all([page.waitForEvent('download'), page.getByTestId(id).click()]);
  const path = join(artifacts, file.suggestedFilename());
  await file.saveAs(path);
  return { name: file.suggestedFilename(), bytes: await readFile(path) };
}

const pngSize = (bytes) => {
  assert.deepEqual([...bytes.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], 'PNG signature');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
};

test('exports: PNG and SVG of the charts and of any heatmap, CSV of weights, importance and drift', async () => {
  const { page, problems } = await openPage(browser, `${app.base}/?preset=bert-base&seq=16&backend=cpu&pruned=3`);
  await page.getByTestId('heatmap-11').waitFor();
  await page.waitForFunction(() => /#/.test((document.querySelector('[data-testid=importance-11]')?.textContent ?? '')));

  const chart = await download(page, 'export-chart-png');
  assert.equal(chart.name, 'headlab-config-chart.png');
  const size = pngSize(chart.bytes);
  assert.ok(size.width >= 600 && size.height >= 400, JSON.stringify(size));

  await page.getByTestId('heatmap-4').click();
  const head = await download(page, 'export-head-png');
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
  const headSvg = await download(page, 'export-head-svg');
  assert.equal(headSvg.name, 'headlab-bert-base-n16-seed42-head-4.svg');
  const cells = await parse(headSvg.bytes);
  assert.deepEqual([cells.root, cells.error, cells.rects], ['svg', null, 16 * 16]);
  assert.match(cells.tips[1], /^t0 \S+ → t1 \S+: 0\.\d{4}$/);
  const chartSvg = await parse((await download(page, 'export-chart-svg')).bytes);
  assert.deepEqual([chartSvg.root, chartSvg.error], ['svg', null]);
  for (const label of ['2  BERT-base / GPT-2 Small', '5  GPT-3 (175B)', 'd_k =', '64', '128', 'd_model (log scale)']) {
    assert.ok(chartSvg.texts.includes(label), `the chart's SVG has "${label}": ${chartSvg.texts}`);
  }
  const driftSvg = await parse((await download(page, 'export-drift-svg')).bytes);
  assert.deepEqual([driftSvg.root, driftSvg.error], ['svg', null]);
  assert.ok(driftSvg.texts.includes('least important first'));

  const lines = (bytes) => bytes.toString('utf8').trimEnd().split('\n');
  const attention = lines((await download(page, 'export-attention-csv')).bytes);
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

  const importance = lines((await download(page, 'export-importance-csv')).bytes);
  assert.equal(importance[0], 'head,importance_rel_l2,rank,pruned');
  assert.equal(importance.length, 13);
  assert.match(importance[4], /^3,0\.\d+,\d+,true$/);
  const curve = lines((await download(page, 'export-drift-csv')).bytes);
  assert.equal(curve.length, 1 + 13);
  // With every head pruned only the output bias is left: a relative change of almost exactly 1.
  const [k, ranked, random] = curve[12 + 1].split(',').map(Number);
  assert.ok(k === 12 && ranked > 0.999 && random > 0.999, curve[13]);
  const tokens = lines((await download(page, 'export-token-drift-csv')).bytes);
  assert.equal(tokens.length, 1 + 16 + 1);
  const all = tokens.at(-1).split(',');
  assert.equal(all[0], '"all"');
  assert.equal(Number(all[3]).toFixed(4), await text(page, 'drift-rel-l2'));
  assert.deepEqual(problems, []);
  await page.close();
});

test('keyboard: controls are reachable with a visible focus, and arrow keys walk the head grid', async () => {
  const { page, problems } = await openPage(browser, `${app.base}/?preset=bert-base&seq=8&backend=cpu`);
  await page.getByTestId('heatmap-11').waitFor();
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
  for (const id of ['preset', 'seq-slider', 'seed', 'theme', 'export-attention-csv', 'head-toggle-0']) {
    assert.ok(reached.has(id), `Tab never reached ${id}: ${[...reached].join(' ')}`);
  }
  await page.getByTestId('head-toggle-0').focus();
  const focused = () => page.evaluate(() => document.activeElement.dataset.testid);
  await page.keyboard.press('ArrowRight');
  assert.equal(await focused(), 'head-toggle-1');
  const columns = await page.evaluate(() => {
    const tops = [...document.querySelectorAll('[data-testid^=head-toggle-]')].map((e) => Math.round(e.getBoundingClientRect().top));
    return tops.filter((t) => t === tops[0]).length;
  });
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(), `head-toggle-${1 + columns}`);
  await page.keyboard.press('End');
  assert.equal(await focused(), 'head-toggle-11');
  await page.keyboard.press('Space');
  assert.equal(await page.getByTestId('head-toggle-11').getAttribute('aria-pressed'), 'false');
  assert.equal(await text(page, 'drift-active'), '11 of 12');
  await page.keyboard.press('Home');
  assert.equal(await focused(), 'head-toggle-0');
  assert.deepEqual(problems, []);
  await page.close();
});

test('loading: a status while the wasm starts and while a long pass runs, still under reduced motion', async () => {
  const html = await (await fetch(`${app.base}/`)).text();
  assert.match(html, /<p class="boot" role="status"[^>]*>Starting headlab…<\/p>/);
  const { page, problems } = await openPage(browser, `${app.base}/?preset=gpt2-large&seq=16&backend=cpu`, { reducedMotion: 'reduce' });
  await page.getByTestId('heatmap-19').waitFor();
  assert.equal(await page.getByTestId('boot').count(), 0, 'the boot status is gone once the app runs');
  // A pass of over a second: the timing line says so and shows a (still) indicator.
  // A mutation observer sees the status even though the pass then holds the main thread.
  await page.evaluate(() => {
    window.busySeen = [];
    new MutationObserver(() => {
      const busy = document.querySelector('.timing.busy');
      if (busy) window.busySeen.push(`${busy.textContent}|${getComputedStyle(busy, '::before').animationName}`);
    }).observe(document.body, { subtree: true, attributes: true, childList: true, characterData: true });
  });
  await page.getByTestId('seq-number').fill('1024');
  await page.getByTestId('seq-number').press('Enter');
  await page.waitForFunction(() => window.busySeen.length > 0);
  const [status, animation] = (await page.evaluate(() => window.busySeen[0])).split('|');
  assert.match(status, /Computing/);
  assert.doesNotMatch(animation, /spin/, 'no spinning under prefers-reduced-motion');
  await page.waitForSelector('.timing:not(.busy)', { timeout: 60000 });
  assert.deepEqual(problems, []);
  await page.close();
});

test('accessibility: axe-core finds no serious or critical violations', async () => {
  const axe = join(toolsDir, 'node_modules/axe-core/axe.min.js');
  const pages = [
    ['page, light', `${app.base}/?backend=cpu&theme=light`, 'heatmap-11'],
    ['page, dark', `${app.base}/?backend=cpu&theme=dark`, 'heatmap-11'],
    ['trained model', `${app.base}/?preset=minilm&backend=cpu`, 'trained-heatmap-11'],
    ['embedded prune view', `${app.base}/?embed=1&view=prune&backend=cpu`, 'heatmap-11'],
    ['embedded code walk', `${app.base}/?embed=1&view=code&backend=cpu`, 'code-shape'],
    ['embedded flow', `${app.base}/?embed=1&view=flow&backend=cpu&pruned=2`, 'flow-change'],
    ['handbook', `${host.base}/handbook.html`, null],
  ];
  const report = [];
  for (const [what, url, ready] of pages) {
    // axe is injected as an inline script, which the page's CSP rightly refuses: lift it here.
    const { page, problems } = await openPage(browser, url, { allowed: [app.base, host.base], bypassCSP: true });
    if (ready) await page.getByTestId(ready).waitFor({ timeout: 60000 });
    else await (await frameOf(page, 'frame-prune')).getByTestId('heatmap-11').waitFor();
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
