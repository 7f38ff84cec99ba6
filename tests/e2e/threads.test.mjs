// Every core: the trained model's batch work (the reader's set's quality, the pruning curves) on
// a pool of web workers, with the same numbers as on the page's one thread (?threads=1), also
// in an iframe on a host page that is not cross-origin isolated (no SharedArrayBuffer there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { suite } from './harness.mjs';
import { Handbook, Lab } from './pages.mjs';

const app = suite({ noGpu: true, host: true });

// One head per layer kept (head 0 of each): 66 pruned.
const pruned = [...Array(72).keys()].filter((h) => h % 12 !== 0).join(',');

/** The first points of the curves (both ends), computed on request, as the page saved them. */
async function firstPoints(task) {
  await task.run.waitText(/Compute the pruning curves/, { timeout: 60000 });
  await task.run.click();
  await task.waitPoints(['iterative'], [72], { timeout: 180000 });
  const status = await task.status.textContent();
  await task.run.click();
  const c = await task.curves();
  return { status, points: c.points.iterative.filter((p) => p[0] === 0 || p[0] === 72) };
}

test('the pool: two workers give the numbers of the page thread, to 1e-6', async () => {
  const results = {};
  for (const threads of [2, 1]) {
    const context = await app.noGpuBrowser.newContext({ viewport: { width: 1400, height: 1000 } });
    const { page, problems, lab: { task, trained } } = await app.open(`?preset=minilm&backend=cpu&threads=${threads}&pruned=${pruned}`, { via: context });
    await trained.waitReady({ timeout: 60000 });
    const t0 = Date.now();
    const q = await task.quality({ timeout: 180000 });
    const seconds = (Date.now() - t0) / 1000;
    const { status, points } = await firstPoints(task);
    results[threads] = { q, points, workers: page.workers().length, used: await task.threads() };
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
  const { page, problems } = await app.open(`${app.hostBase}/handbook.html`, { allowed: [app.hostBase, app.base], bypassCSP: true });
  const handbook = new Handbook(page);
  await handbook.replaceWithFrames([
    { name: 'app', src: `${app.base}/?embed=1&preset=minilm&backend=cpu&threads=2&pruned=${pruned}`, width: '900px', height: '800px' },
  ]);
  const frame = await handbook.frame('app');
  const { task } = new Lab(frame);
  assert.equal(await frame.evaluate(() => [window.crossOriginIsolated, typeof SharedArrayBuffer].join()), 'false,undefined');
  const q = await task.quality({ timeout: 180000 });
  assert.equal(await task.threads(), '2');
  assert.ok(q > 0.5 && q < 0.8, `quality with one head per layer: ${q}`);
  assert.equal(await task.threadsNote.count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});

test('on the page\'s own thread a sweep draws between heads and counts the heads it has measured', async () => {
  const { page, problems, lab: { trained } } = await app.open('?preset=minilm&backend=cpu&threads=1');
  await trained.waitReady({ timeout: 60000 });
  const counted = (what) => trained.importanceStatus.waitText(new RegExp(`^Measuring: ${what}.*\\((\\d+) of 72 heads done\\)…$`),
    { timeout: 120000, polling: 10 });
  // A long sentence: 72 passes of a few tens of milliseconds, one a turn of the browser.
  await trained.setText('the bank by the river was steep and she sat on it watching the water '.repeat(12));
  await counted('one pass per head on this sentence');
  const drift = await trained.importanceStatus.textContent();
  // The meaning check's 216 passes, three a head.
  await trained.importanceMeasure.selectOption('margin');
  await counted('the meaning check without each head');
  const margin = await trained.importanceStatus.textContent();
  await trained.waitImportanceDone({ timeout: 240000 });
  console.log(`one thread: "${drift}"; "${margin}"`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('workers that cannot start: the page computes on its own thread and says why', async () => {
  const context = await app.noGpuBrowser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.route('**/worker.js', (route) => route.fulfill({ status: 404, body: 'gone' }));
  const { problems, lab: { task } } = await app.open(`?preset=minilm&backend=cpu&threads=2&pruned=${pruned}`, { via: context });
  const q = await task.quality({ timeout: 180000 });
  assert.ok(q > 0.5 && q < 0.8, `${q}`);
  assert.equal(await task.threads(), '1');
  assert.match(await task.threadsNote.textContent(), /Computing on this page's thread only: the 2 workers could not be used/);
  // The browser reports the failed script load itself; nothing else goes wrong.
  assert.deepEqual(problems.filter((p) => !/worker\.js|404|Failed to load/i.test(p)), []);
  await context.close();
});
