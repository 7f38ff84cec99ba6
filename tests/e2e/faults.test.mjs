// Reliability of the GPU path in the built page: each GPU failure, forced for real (a rejected
// adapter request, a pipeline from invalid WGSL, a readback buffer destroyed before mapping, a
// destroyed device), switches the page to the CPU kernel, keeps the reader's settings and
// pruned heads, says what happened, and "Try the GPU again" brings the GPU back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, serveDist, text } from './harness.mjs';

let app, browser;

before(async () => {
  app = await serveDist();
  browser = await launch({ webgpu: true });
});

after(async () => {
  await browser?.close();
  app?.server.close();
});

const timing = (page) => text(page, 'timing');
const onBackend = (page, label) => page.waitForFunction((l) => {
  const t = document.querySelector('[data-testid=timing]').textContent;
  return t.startsWith(`Forward pass on ${l}`) && !t.includes('while the GPU starts');
}, label, { timeout: 30000 });

test('forced GPU faults each fall back to the CPU with the settings kept, and the GPU can be tried again', async () => {
  const { page, problems } = await openPage(browser, `${app.base}/?preset=gpt2-small&seq=20&pruned=3`);
  await onBackend(page, 'WebGPU');
  const inject = (kind) => page.evaluate((k) => window.wasmBindings.inject_gpu_fault(k), kind);
  const settingsKept = async (seq) => {
    assert.match(page.url(), new RegExp(`preset=gpt2-small&seq=${seq}.*pruned=3`));
    assert.equal(await page.getByTestId('head-toggle-3').getAttribute('aria-pressed'), 'false');
    assert.equal(await text(page, 'drift-active'), '11 of 12');
  };
  const seen = [];

  // A readback that cannot be mapped, mid-session: the next pass falls back.
  assert.equal(await inject('map'), true);
  await page.getByTestId('seq-number').fill('21');
  await page.getByTestId('seq-number').press('Enter');
  await onBackend(page, 'CPU');
  seen.push(await text(page, 'backend-note'));
  assert.match(seen.at(-1), /switched to the CPU because .*(map|read)/i);
  await settingsKept(21);

  // Trying again while the adapter request is rejected, then while a pipeline fails to build.
  for (const [kind, why] of [['adapter', /adapter request was rejected/], ['pipeline', /pipeline creation failed/]]) {
    await inject(kind);
    await page.getByTestId('retry-gpu').click();
    await page.waitForFunction((w) => new RegExp(w).test(document.querySelector('[data-testid=backend-note]').textContent), why.source);
    seen.push(await text(page, 'backend-note'));
    assert.match(await text(page, 'backend-badge'), /^CPU/);
    await settingsKept(21);
  }

  // Then the GPU comes back, with the same numbers as the CPU core.
  await page.getByTestId('retry-gpu').click();
  await page.waitForFunction(() => /^WebGPU/.test(document.querySelector('[data-testid=backend-badge]').textContent));
  await onBackend(page, 'WebGPU');
  assert.equal(await page.getByTestId('backend-note').count(), 0);
  await settingsKept(21);

  // A lost device too.
  assert.equal(await page.evaluate(() => window.wasmBindings.simulate_gpu_loss()), true);
  await page.getByTestId('seq-number').fill('22');
  await page.getByTestId('seq-number').press('Enter');
  await onBackend(page, 'CPU');
  seen.push(await text(page, 'backend-note'));
  await page.getByTestId('retry-gpu').click();
  await onBackend(page, 'WebGPU');
  await settingsKept(22);
  console.log(`what the page said:\n  ${seen.map((s) => s.replace(/\s+Try the GPU again$/, '')).join('\n  ')}`);
  // WebGPU reports the forced faults to the console; nothing else may appear.
  assert.deepEqual(problems.filter((p) => !/WGSL|pipeline|destroyed|mapAsync|map|Invalid|lost/i.test(p)), []);
  await page.close();
});
