// Every core: the trained model's batch work (the reader's set's quality, the pruning curves) on
// a pool of web workers, with the same numbers as on the page's one thread (?threads=1), also
// in an iframe on a host page that is not cross-origin isolated (no SharedArrayBuffer there).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, serveDist, text } from './harness.mjs';

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

// One head per layer kept (head 0 of each): 66 pruned.
const pruned = [...Array(72).keys()].filter((h) => h % 12 !== 0).join(',');

/** The reader's set's quality, to every digit, once measured (in `frame`, a page or a frame). */
async function quality(frame) {
  await frame.waitForFunction(() => document.querySelector('[data-testid=pruned-line]')?.dataset.quality, null, { timeout: 180000 });
  return Number(await frame.getByTestId('pruned-line').getAttribute('data-quality'));
}

/** The first points of the curves (both ends), computed on request, as the page saved them. */
async function firstPoints(page) {
  await page.waitForFunction(() => /Compute the pruning curves/.test(document.querySelector('[data-testid=task-run]')?.textContent ?? ''), null, { timeout: 60000 });
  await page.getByTestId('task-run').click();
  await page.waitForFunction(() => {
    const c = JSON.parse(document.querySelector('[data-testid=task-chart]').dataset.curves);
    return (c.points.iterative ?? []).some((p) => p[0] === 72);
  }, null, { timeout: 180000 });
  const status = await text(page, 'task-status');
  await page.getByTestId('task-run').click();
  const c = JSON.parse(await page.getByTestId('task-chart').getAttribute('data-curves'));
  return { status, points: c.points.iterative.filter((p) => p[0] === 0 || p[0] === 72) };
}

test('the pool: two workers give the numbers of the page thread, to 1e-6', async () => {
  const results = {};
  for (const threads of [2, 1]) {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const { page, problems } = await openPage(context, `${app.base}/?preset=minilm&backend=cpu&threads=${threads}&pruned=${pruned}`);
    await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
    const t0 = Date.now();
    const q = await quality(page);
    const seconds = (Date.now() - t0) / 1000;
    const { status, points } = await firstPoints(page);
    results[threads] = { q, points, workers: page.workers().length, used: await page.getByTestId('task').getAttribute('data-threads') };
    console.log(`threads=${threads}: quality ${q} in ${seconds.toFixed(1)} s (pool start included), ${page.workers().length} workers; curves "${status}"; ends ${JSON.stringify(points)}`);
    assert.deepEqual(problems, []);
    await context.close();
  }
  assert.equal(results[2].workers, 2, 'two web workers with ?threads=2');
  assert.equal(results[2].used, '2');
  assert.equal(results[1].workers, 0, 'no worker with ?threads=1');
  assert.equal(results[1].used, '1');
  assert.ok(Math.abs(results[2].q - results[1].q) < 1e-6, `${results[2].q} vs ${results[1].q}`);
  for (const [a, b] of results[2].points.map((p, i) => [p, results[1].points[i]])) {
    assert.equal(a[0], b[0]);
    assert.ok(Math.abs(a[1] - b[1]) < 1e-6, `${a} vs ${b}`);
  }
});

test('the pool in an iframe on a host that is not cross-origin isolated', async () => {
  const { page, problems } = await openPage(browser, `${host.base}/handbook.html`, { allowed: [host.base, app.base], bypassCSP: true });
  await page.evaluate(({ app, pruned }) => {
    document.body.replaceChildren();
    const f = document.createElement('iframe');
    f.dataset.testid = 'frame';
    f.src = `${app}/?embed=1&preset=minilm&backend=cpu&threads=2&pruned=${pruned}`;
    f.style.width = '900px';
    f.style.height = '800px';
    document.body.append(f);
  }, { app: app.base, pruned });
  const frame = await (await page.getByTestId('frame').elementHandle()).contentFrame();
  assert.equal(await frame.evaluate(() => [window.crossOriginIsolated, typeof SharedArrayBuffer].join()), 'false,undefined');
  const q = await quality(frame);
  assert.equal(await frame.getByTestId('task').getAttribute('data-threads'), '2');
  assert.ok(q > 0.5 && q < 0.8, `quality with one head per layer: ${q}`);
  assert.equal(await frame.getByTestId('task-threads-note').count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});

test('on the page\'s own thread a sweep draws between heads and counts the heads it has measured', async () => {
  const { page, problems } = await openPage(browser, `${app.base}/?preset=minilm&backend=cpu&threads=1`);
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  const counted = (what) => page.waitForFunction((w) => new RegExp(`^Measuring: ${w}.*\\((\\d+) of 72 heads done\\)…$`)
    .test(document.querySelector('[data-testid=importance-status]')?.textContent ?? ''), what, { timeout: 120000, polling: 10 });
  // A long sentence: 72 passes of a few tens of milliseconds, one a turn of the browser.
  await page.getByTestId('text').fill('the bank by the river was steep and she sat on it watching the water '.repeat(12));
  await page.getByTestId('text').blur();
  await counted('one pass per head on this sentence');
  const drift = await text(page, 'importance-status');
  // The meaning check's 216 passes, three a head.
  await page.getByTestId('importance-measure').selectOption('margin');
  await counted('the meaning check without each head');
  const margin = await text(page, 'importance-status');
  await page.waitForFunction(() => !/^Measuring/.test(document.querySelector('[data-testid=importance-status]')?.textContent ?? 'Measuring'), null, { timeout: 240000 });
  console.log(`one thread: "${drift}"; "${margin}"`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('workers that cannot start: the page computes on its own thread and says why', async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.route('**/worker.js', (route) => route.fulfill({ status: 404, body: 'gone' }));
  const { page, problems } = await openPage(context, `${app.base}/?preset=minilm&backend=cpu&threads=2&pruned=${pruned}`);
  const q = await quality(page);
  assert.ok(q > 0.5 && q < 0.8, `${q}`);
  assert.equal(await page.getByTestId('task').getAttribute('data-threads'), '1');
  assert.match(await text(page, 'task-threads-note'), /Computing on this page's thread only: the 2 workers could not be used/);
  // The browser reports the failed script load itself; nothing else goes wrong.
  assert.deepEqual(problems.filter((p) => !/worker\.js|404|Failed to load/i.test(p)), []);
  await context.close();
});
