// Reliability of the GPU path in the built page: each GPU failure, forced for real (a rejected
// adapter request, a pipeline from invalid WGSL, a readback buffer destroyed before mapping, a
// destroyed device), switches the page to the CPU kernel, keeps the reader's settings and
// pruned heads, says what happened, and "Try the GPU again" brings the GPU back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { suite } from './harness.mjs';
import { Lab } from './pages.mjs';

const app = suite({ gpu: true });

test('forced GPU faults each fall back to the CPU with the settings kept, and the GPU can be tried again', async () => {
  const { page, problems, lab: { drift, heads, settings, status } } = await app.open('?preset=gpt2-small&seq=20&pruned=3&backend=gpu');
  const onBackend = (label) => status.waitPassOn(label, { timeout: 30000 });
  await onBackend('WebGPU');
  const inject = (kind) => page.evaluate((k) => window.wasmBindings.inject_gpu_fault(k), kind);
  const settingsKept = async (seq) => {
    assert.match(page.url(), new RegExp(`preset=gpt2-small&seq=${seq}.*pruned=3`));
    assert.equal(await heads.toggle(3).getAttribute('aria-pressed'), 'false');
    assert.equal(await drift.active.textContent(), '11 of 12');
  };
  const seen = [];

  // A readback that cannot be mapped, mid-session: the next pass falls back.
  assert.equal(await inject('map'), true);
  await settings.setSeq('21');
  await onBackend('CPU');
  seen.push(await status.note.textContent());
  assert.match(seen.at(-1), /switched to the CPU because .*(map|read)/i);
  await settingsKept(21);

  // Trying again while the adapter request is rejected, then while a pipeline fails to build.
  for (const [kind, why] of [['adapter', /adapter request was rejected/], ['pipeline', /pipeline creation failed/]]) {
    await inject(kind);
    await status.retryGpu.click();
    await status.note.waitText(why);
    seen.push(await status.note.textContent());
    assert.match(await status.badge.textContent(), /^CPU/);
    await settingsKept(21);
  }

  // Then the GPU comes back, with the same numbers as the CPU core.
  await status.retryGpu.click();
  await status.badge.waitText(/^WebGPU/);
  await onBackend('WebGPU');
  assert.equal(await status.note.count(), 0);
  await settingsKept(21);

  // A lost device too.
  assert.equal(await page.evaluate(() => window.wasmBindings.simulate_gpu_loss()), true);
  await settings.setSeq('22');
  await onBackend('CPU');
  seen.push(await status.note.textContent());
  await status.retryGpu.click();
  await onBackend('WebGPU');
  await settingsKept(22);
  console.log(`what the page said:\n  ${seen.map((s) => s.replace(/\s+Try the GPU again$/, '')).join('\n  ')}`);
  // WebGPU reports the forced faults to the console; nothing else may appear.
  assert.deepEqual(problems.filter((p) => !/WGSL|pipeline|destroyed|mapAsync|map|Invalid|lost/i.test(p)), []);
  await page.close();
});

test('no leaks: 1 000 head toggles and 50 preset switches leave wasm memory and live GPU buffers flat', async () => {
  const context = await app.gpuBrowser.newContext({ viewport: { width: 1400, height: 1000 } });
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
  const lab = new Lab(page);
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${app.base}/?preset=bert-base&seq=16&backend=gpu`);
  await lab.status.waitPassOn('WebGPU', { timeout: 30000 });
  const presets = ['transformer', 'bert-base', 'gpt2-small', 'bert-large', 'gpt2-medium', 'gpt2-large'];
  const heads = { transformer: 8, 'bert-base': 12, 'gpt2-small': 12, 'bert-large': 16, 'gpt2-medium': 16, 'gpt2-large': 20 };
  // Switch presets through the select, each time waiting for its GPU pass and heatmaps.
  const switchTo = async (preset) => {
    await lab.settings.preset.selectOption(String(presets.indexOf(preset)));
    await lab.waitHeatmapsWith(heads[preset], /^Forward pass on WebGPU/);
  };
  const toggles = (count) => lab.heads.clickToggles(count);
  const measure = () => page.evaluate(() => ({ wasm: window.wasmBindings.wasm_memory_bytes(), gpu: window.liveGpuBuffers() }));

  // Rounds of 25 switches and 500 toggles. Wasm memory never shrinks, and which work a switch
  // starts before the next one stops it varies from run to run, so its high-water mark is not
  // always reached in the first rounds (a fresh clone's run measured 35.8 MB after one pass over
  // the presets and 42.4 MB after 50 switches, where most runs have 47.7 MB both times): after
  // a first round, memory must come to rest within three more, each round ending where the one
  // before it did. A leak grows in every round.
  const round = async () => {
    for (let i = 0; i < 25; i++) await switchTo(presets[i % presets.length]);
    await switchTo('bert-base');
    await toggles(500);
    await page.waitForTimeout(200);
    return measure();
  };
  for (const p of presets) await switchTo(p);
  await toggles(100);
  const rounds = [await round(), await round()];
  while (rounds.length < 4 && rounds.at(-1).wasm !== rounds.at(-2).wasm) rounds.push(await round());
  const [before, after] = rounds.slice(-2);
  console.log(`after ${25 * rounds.length} preset switches and ${500 * rounds.length} toggles: wasm memory by round ${rounds.map((r) => r.wasm).join(' -> ')} bytes, live GPU buffers ${before.gpu} -> ${after.gpu}`);
  assert.ok(after.wasm <= before.wasm, `wasm memory grew in every round: ${rounds.map((r) => r.wasm).join(' -> ')} bytes`);
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
  const context = await app.gpuBrowser.newContext();
  await context.addInitScript(() => {
    window.violations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const page = await context.newPage();
  const { heads, status, trained } = new Lab(page);
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  // Hostile text in the sentence, in a bad preset name (echoed in a note) and in the view.
  await page.goto(`${app.base}/?preset=minilm&backend=cpu&text=${encodeURIComponent(hostile)}&view=${encodeURIComponent(hostile)}`);
  await trained.waitReady({ timeout: 60000 });
  await page.goto(`${app.base}/?preset=${encodeURIComponent(hostile)}&backend=gpu`);
  await heads.heatmap(11).waitFor();
  assert.match(await status.urlNotes.textContent(), /<img src=x/, 'the note shows the text as text');
  await heads.heatmap(3).click();
  await heads.exportHeadPng.click();
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
  const context = await app.gpuBrowser.newContext();
  const page = await context.newPage();
  const { trained } = new Lab(page);
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

  await page.route('**/minilm-f16.bin', (route) => route.fulfill({ body: damaged }));
  await page.goto(`${app.base}/?preset=minilm&backend=cpu`);
  await trained.modelError.waitFor({ timeout: 60000 });
  assert.match(await trained.modelError.textContent(), /damaged or from another build: its SHA-256 is/);
  assert.equal(await trained.heatmap(0).count(), 0, 'nothing half-loaded');

  // A server that sends nothing: the watchdog gives up after 15 s.
  await page.unroute('**/minilm-f16.bin');
  const held = [];
  await page.route('**/minilm-f16.bin', (route) => { held.push(route); });
  const t0 = Date.now();
  await trained.modelError.getByRole('button').click();
  await trained.modelError.waitText(/stalled/, { timeout: 40000 });
  const waited = (Date.now() - t0) / 1000;
  assert.match(await trained.modelError.textContent(), /the download stalled \(no data for 15 s\)/);
  assert.ok(waited >= 14 && waited < 30, `gave up after ${waited} s`);

  // With the real file, "Try again" loads the model.
  await page.unroute('**/minilm-f16.bin');
  await trained.modelError.getByRole('button').click();
  await trained.waitReady({ timeout: 60000 });
  console.log(`damaged asset refused by hash; stalled download abandoned after ${waited.toFixed(1)} s; retry loaded the model`);
  // A sentence longer than the model reads is cut at 512 tokens, and the page says so.
  // A paragraph of 540 words (2 580 characters, 602 tokens): the box takes it whole.
  const paragraph = 'the bank was steep and the water ran fast. '.repeat(60);
  // Once the first sentence's importance is in, its pace gives the next sweep's estimate.
  await trained.waitImportanceDone({ timeout: 120000 });
  await trained.text.fill(paragraph);
  assert.equal((await trained.text.inputValue()).length, paragraph.length);
  await trained.text.blur();
  await trained.tokensCut.waitFor();
  assert.match(await trained.tokensCut.textContent(),
    /^The sentence is 602 tokens long; all-MiniLM-L6-v2 reads at most 512, so the last 90 were left out/);
  assert.equal(await trained.shownTokens.count(), 512);
  assert.match(await trained.tokenCount.textContent(), /^512 tokens/);
  // The 512 tokens scroll in a box of a few lines instead of pushing the heatmaps a screen down.
  const box = await trained.tokens.evaluate((e) => [e.clientHeight, e.scrollHeight]);
  assert.ok(box[0] < 200 && box[1] > 2 * box[0], `token box ${box}`);
  // 72 passes over 512 tokens take a while on the CPU kernel: the page says about how long.
  const started = Date.now();
  await trained.importanceStatus.waitText(/^Measuring: one pass per head on this sentence, about \d+\s(s|min) at the \d+\sGFLOP\/s measured here( \(\d+ of 72 heads done\))?…$/,
    { timeout: 30000 });
  const estimate = await trained.importanceStatus.textContent();
  await trained.waitImportanceDone({ timeout: 240000 });
  console.log(`512 tokens: "${estimate}"; the sweep took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a panic shows the banner, logs the state that caused it, and "reload with defaults" works', async () => {
  const { page, lab: { heads, status } } = await app.open('?preset=gpt2-small&seq=9&backend=cpu&pruned=2');
  await heads.heatmap(11).waitFor();
  const errors = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.evaluate(() => { try { window.wasmBindings.simulate_panic(); } catch { /* a wasm trap */ } });
  await status.panicBanner.waitFor();
  assert.match(await status.panicBanner.textContent(), /Something broke inside headlab\..*simulated panic.*reload with defaults/s);
  assert.ok(errors.some((e) => /headlab state at the panic .*preset=gpt2-small&seq=9.*pruned=2/.test(e)), errors.join('\n'));
  await page.getByRole('link', { name: 'reload with defaults' }).click();
  await page.waitForURL((u) => !u.search.includes('gpt2-small'));
  await heads.heatmap(11).waitFor();
  assert.equal(await status.panicBanner.isHidden(), true);
  assert.match(await status.timing.textContent(), /d_model 768, 12 heads of d_k = 64, 16 tokens/);
  await page.close();
});

test("a trap of the engine, which runs no panic hook, shows the banner too; other errors do not", async () => {
  const { page, problems, lab: { heads, status } } = await app.open('?preset=gpt2-small&seq=9&backend=cpu');
  await heads.heatmap(11).waitFor();
  // Uncaught, as a trap in a callback is: first a script's own error, then the wasm's trap.
  await page.evaluate(() => setTimeout(() => { throw new TypeError('not the page'); }));
  await page.waitForTimeout(300);
  assert.equal(await status.panicBanner.isHidden(), true, 'a script error that is not a trap leaves the page');
  await page.evaluate(() => setTimeout(() => window.wasmBindings.simulate_trap()));
  await status.panicBanner.waitFor();
  assert.match(await status.panicBanner.textContent(),
    /Something broke inside headlab\..*WebAssembly engine stopped the page's work \(RuntimeError: [^)]*unreachable[^)]*\)\..*reload with defaults/is);
  assert.deepEqual(problems.map((p) => p.replace(/:.*/s, '')), ['page error', 'page error'], problems.join('\n'));
  await page.close();
});
