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
  const t = document.querySelector('[data-testid=timing]')?.textContent ?? '';
  return t.startsWith(`Forward pass on ${l}`) && !t.includes('while the GPU starts');
}, label, { timeout: 30000 });

test('forced GPU faults each fall back to the CPU with the settings kept, and the GPU can be tried again', async () => {
  const { page, problems } = await openPage(browser, `${app.base}/?preset=gpt2-small&seq=20&pruned=3&backend=gpu`);
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
    await page.waitForFunction((w) => new RegExp(w).test((document.querySelector('[data-testid=backend-note]')?.textContent ?? '')), why.source);
    seen.push(await text(page, 'backend-note'));
    assert.match(await text(page, 'backend-badge'), /^CPU/);
    await settingsKept(21);
  }

  // Then the GPU comes back, with the same numbers as the CPU core.
  await page.getByTestId('retry-gpu').click();
  await page.waitForFunction(() => /^WebGPU/.test((document.querySelector('[data-testid=backend-badge]')?.textContent ?? '')));
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

test('no leaks: 1 000 head toggles and 50 preset switches leave wasm memory and live GPU buffers flat', async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  // Count the page's live GPU buffers: created and not yet destroyed.
  await context.addInitScript(() => {
    const live = new Set();
    const create = GPUDevice.prototype.createBuffer;
    GPUDevice.prototype.createBuffer = function (descriptor) {
      const buffer = create.call(this, descriptor);
      live.add(buffer);
      return buffer;
    };
    const destroy = GPUBuffer.prototype.destroy;
    GPUBuffer.prototype.destroy = function () {
      live.delete(this);
      return destroy.call(this);
    };
    window.liveGpuBuffers = () => live.size;
  });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${app.base}/?preset=bert-base&seq=16&backend=gpu`);
  await onBackend(page, 'WebGPU');
  const presets = ['transformer', 'bert-base', 'gpt2-small', 'bert-large', 'gpt2-medium', 'gpt2-large'];
  const heads = { transformer: 8, 'bert-base': 12, 'gpt2-small': 12, 'bert-large': 16, 'gpt2-medium': 16, 'gpt2-large': 20 };
  // Switch presets through the select, each time waiting for its GPU pass and heatmaps.
  const switchTo = async (preset) => {
    await page.getByTestId('preset').selectOption(String(presets.indexOf(preset)));
    await page.waitForFunction((n) => document.querySelectorAll('canvas.heatmap').length === n
      && /^Forward pass on WebGPU/.test((document.querySelector('[data-testid=timing]')?.textContent ?? '')), heads[preset]);
  };
  const toggles = (count) => page.evaluate(async (count) => {
    for (let i = 0; i < count; i++) {
      const buttons = document.querySelectorAll('[data-testid^=head-toggle-]');
      buttons[i % buttons.length].click();
      if (i % 20 === 19) await new Promise((r) => setTimeout(r, 0));
    }
  }, count);
  const measure = () => page.evaluate(() => ({ wasm: window.wasmBindings.wasm_memory_bytes(), gpu: window.liveGpuBuffers() }));

  // Warm up: every preset once (the largest sets wasm memory's high-water mark), some toggles.
  for (const p of presets) await switchTo(p);
  await toggles(100);
  await switchTo('bert-base');
  const before = await measure();
  for (let i = 0; i < 50; i++) await switchTo(presets[i % presets.length]);
  await switchTo('bert-base');
  await toggles(1000);
  await page.waitForTimeout(200);
  const after = await measure();
  console.log(`after 50 preset switches and 1 000 toggles: wasm memory ${before.wasm} -> ${after.wasm} bytes, live GPU buffers ${before.gpu} -> ${after.gpu}`);
  assert.ok(after.wasm <= before.wasm, `wasm memory grew by ${after.wasm - before.wasm} bytes`);
  assert.ok(after.gpu <= before.gpu, `live GPU buffers grew from ${before.gpu} to ${after.gpu}`);
  assert.deepEqual(problems, []);
  await context.close();
});

test('security: a strict CSP holds with no violation, user text never becomes markup, nothing leaves the origin', async () => {
  const html = await (await fetch(`${app.base}/`)).text();
  const policy = html.match(/http-equiv="Content-Security-Policy" content="([^"]+)"/)?.[1];
  assert.ok(policy, 'the built page carries a Content-Security-Policy');
  for (const part of ["default-src 'none'", "script-src 'self' 'wasm-unsafe-eval' 'sha256-", "connect-src 'self'"]) {
    assert.ok(policy.includes(part), `policy lacks ${part}: ${policy}`);
  }
  const scriptSrc = policy.split(';').find((d) => d.trim().startsWith('script-src'));
  assert.ok(!policy.includes("'unsafe-eval'") && !scriptSrc.includes("'unsafe-inline'") && !policy.includes('*'), policy);
  const hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
  const context = await browser.newContext();
  await context.addInitScript(() => {
    window.violations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const page = await context.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  // Hostile text in the sentence, in a bad preset name (echoed in a note) and in the view.
  await page.goto(`${app.base}/?preset=minilm&backend=cpu&text=${encodeURIComponent(hostile)}&view=${encodeURIComponent(hostile)}`);
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  await page.goto(`${app.base}/?preset=${encodeURIComponent(hostile)}&backend=gpu`);
  await page.getByTestId('heatmap-11').waitFor();
  assert.match(await page.getByTestId('url-notes').textContent(), /<img src=x/, 'the note shows the text as text');
  await page.getByTestId('heatmap-3').click();
  await page.getByTestId('export-head-png').click();
  assert.deepEqual(await page.evaluate(() => ({ pwned: window.pwned ?? null, imgs: document.querySelectorAll('img').length, violations: window.violations })),
    { pwned: null, imgs: 0, violations: [] });
  const foreign = requests.filter((u) => !u.startsWith(app.base) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(foreign, []);
  await context.close();
});

test('asset faults: a damaged model is refused by its hash, a stalled download gives up, and both retry', async () => {
  const { readFile } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const { root } = await import('./harness.mjs');
  const real = await readFile(join(root, 'dist/minilm-f16.bin'));
  const damaged = Buffer.from(real);
  damaged[damaged.length >> 1] ^= 0x40; // one bit, same length: only the hash can tell
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

  await page.route('**/minilm-f16.bin', (route) => route.fulfill({ body: damaged }));
  await page.goto(`${app.base}/?preset=minilm&backend=cpu`);
  await page.getByTestId('model-error').waitFor({ timeout: 60000 });
  assert.match(await text(page, 'model-error'), /damaged or from another build: its SHA-256 is/);
  assert.equal(await page.getByTestId('trained-heatmap-0').count(), 0, 'nothing half-loaded');

  // A server that sends nothing: the watchdog gives up after 15 s.
  await page.unroute('**/minilm-f16.bin');
  const held = [];
  await page.route('**/minilm-f16.bin', (route) => { held.push(route); });
  const t0 = Date.now();
  await page.getByTestId('model-error').getByRole('button').click();
  await page.waitForFunction(() => /stalled/.test(document.querySelector('[data-testid=model-error]')?.textContent ?? ''), null, { timeout: 40000 });
  const waited = (Date.now() - t0) / 1000;
  assert.match(await text(page, 'model-error'), /the download stalled \(no data for 15 s\)/);
  assert.ok(waited >= 14 && waited < 30, `gave up after ${waited} s`);

  // With the real file, "Try again" loads the model.
  await page.unroute('**/minilm-f16.bin');
  await page.getByTestId('model-error').getByRole('button').click();
  await page.getByTestId('trained-heatmap-11').waitFor({ timeout: 60000 });
  console.log(`damaged asset refused by hash; stalled download abandoned after ${waited.toFixed(1)} s; retry loaded the model`);
  // A sentence longer than the model reads is cut at 512 tokens, and the page says so.
  // A paragraph of 540 words (2 580 characters, 602 tokens): the box takes it whole.
  const paragraph = 'the bank was steep and the water ran fast. '.repeat(60);
  // Once the first sentence's importance is in, its pace gives the next sweep's estimate.
  await page.waitForFunction(() => !/^Measuring/.test(document.querySelector('[data-testid=importance-status]')?.textContent ?? 'Measuring'), null, { timeout: 120000 });
  await page.getByTestId('text').fill(paragraph);
  assert.equal((await page.getByTestId('text').inputValue()).length, paragraph.length);
  await page.getByTestId('text').blur();
  await page.getByTestId('tokens-cut').waitFor();
  assert.equal(await page.locator('[data-testid=tokens] .token').count(), 512);
  assert.match(await text(page, 'token-count'), /^512 tokens/);
  // The 512 tokens scroll in a box of a few lines instead of pushing the heatmaps a screen down.
  const box = await page.getByTestId('tokens').evaluate((e) => [e.clientHeight, e.scrollHeight]);
  assert.ok(box[0] < 200 && box[1] > 2 * box[0], `token box ${box}`);
  // 72 passes over 512 tokens take a while on the CPU kernel: the page says about how long.
  const started = Date.now();
  await page.waitForFunction(() => /^Measuring: one pass per head on this sentence, about \d+\s(s|min) at the \d+\sGFLOP\/s measured here( \(\d+ of 72 heads done\))?…$/
    .test(document.querySelector('[data-testid=importance-status]')?.textContent ?? ''), null, { timeout: 30000 });
  const estimate = await text(page, 'importance-status');
  await page.waitForFunction(() => !/^Measuring/.test(document.querySelector('[data-testid=importance-status]')?.textContent ?? 'Measuring'), null, { timeout: 240000 });
  console.log(`512 tokens: "${estimate}"; the sweep took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a panic shows the banner, logs the state that caused it, and "reload with defaults" works', async () => {
  const { page } = await openPage(browser, `${app.base}/?preset=gpt2-small&seq=9&backend=cpu&pruned=2`);
  await page.getByTestId('heatmap-11').waitFor();
  const errors = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.evaluate(() => { try { window.wasmBindings.simulate_panic(); } catch { /* a wasm trap */ } });
  await page.getByTestId('panic-banner').waitFor();
  assert.match(await text(page, 'panic-banner'), /Something broke inside headlab\..*simulated panic.*reload with defaults/s);
  assert.ok(errors.some((e) => /headlab state at the panic .*preset=gpt2-small&seq=9.*pruned=2/.test(e)), errors.join('\n'));
  await page.getByRole('link', { name: 'reload with defaults' }).click();
  await page.waitForURL((u) => !u.search.includes('gpt2-small'));
  await page.getByTestId('heatmap-11').waitFor();
  assert.equal(await page.getByTestId('panic-banner').isHidden(), true);
  assert.match(await text(page, 'timing'), /d_model 768, 12 heads of d_k = 64, 16 tokens/);
  await page.close();
});
