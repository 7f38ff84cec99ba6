// The 8-bit path in the page: ?precision=int8 (or the panel's switch) runs the trained model with
// 8-bit weights and activations on the page's thread and on its workers alike, says so where the
// page says what it runs on, names it in exports and links, and the switch back gives the f16
// numbers again with the reader's sentence and heads kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { download, suite } from './harness.mjs';

const app = suite({ noGpu: true });

// Every head of layer 1 but its first: 11 pruned.
const pruned = [...Array(11).keys()].map((h) => h + 1).join(',');

test('8-bit: the same quality on workers and on the page thread, within 0.003 of f16, named in the badge, exports and link', async () => {
  const quality = {};
  for (const [precision, threads] of [['int8', 2], ['int8', 1], ['f16', 2]]) {
    const context = await app.noGpuBrowser.newContext({ viewport: { width: 1400, height: 1000 } });
    const { page, problems, lab: { task, trained, status } } = await app.open(`?preset=minilm&backend=cpu&threads=${threads}&precision=${precision}&pruned=${pruned}`, { via: context });
    await trained.waitReady({ timeout: 60000 });
    quality[`${precision}/${threads}`] = await task.quality({ timeout: 180000 });
    const backend = await trained.backend.textContent();
    assert.equal(await trained.precision.inputValue(), precision);
    if (precision === 'int8') {
      assert.match(backend, /8-bit weights and activations/, backend);
      assert.match(await status.badge.textContent(), /· 8-bit$/);
      await trained.importanceStatus.waitText(/^(?!Measuring)/, { timeout: 120000 });
      const csv = await download(page, trained.exportImportanceCsv);
      assert.match(csv.name, /^headlab-minilm-int8-importance-/, csv.name);
      assert.match(page.url(), /precision=int8/);
      // The relaxed build (Chromium's) timed its 8-bit form once painted and again two seconds in.
      assert.match(await page.evaluate(() => window.wasmBindings.kernel_dot_form()), /^(fused|split) settled$/);
    } else {
      assert.doesNotMatch(backend, /8-bit/, backend);
      assert.doesNotMatch(await status.badge.textContent(), /8-bit/);
      assert.doesNotMatch(page.url(), /precision=/);
    }
    assert.deepEqual(problems, []);
    await context.close();
  }
  console.log(`reader's set quality: ${JSON.stringify(quality)}`);
  assert.ok(Math.abs(quality['int8/2'] - quality['int8/1']) < 1e-6, 'workers and the page thread quantize alike');
  assert.ok(Math.abs(quality['int8/2'] - quality['f16/2']) <= 0.003, 'within 0.003 of the f16 model');
  assert.notEqual(quality['int8/2'], quality['f16/2'], 'the 8-bit model is another model');
});

test('the task panel sets 8-bit weights beside pruning: quality, forward time and weight bytes at both precisions, every head kept', async () => {
  const { page, problems, lab: { task, trained } } = await app.open('?preset=minilm&backend=cpu');
  await trained.waitReady({ timeout: 60000 });
  // Nothing pruned: the panel's own quality is the full f16 model's, which the line reuses.
  const full = await task.quality({ timeout: 180000 });
  await task.leverRun.click();
  await task.leverLine.waitText(/^8-bit weights instead of f16, every head kept: quality \d\.\d{3} -> \d\.\d{3}.*, forward 1\.00 -> \d+\.\d\d \(measured on the CPU kernel: .+ against .+\), weights \d+\.\d -> \d+\.\d MiB\.$/, { timeout: 180000 });
  const line = await task.leverLine.textContent();
  const [, f16, int8] = /quality (\d\.\d{3}) -> (\d\.\d{3})/.exec(line);
  assert.equal(f16, full.toFixed(3), `the f16 quality is the panel's own (${line})`);
  assert.ok(Math.abs(Number(int8) - Number(f16)) <= 0.003, `8 bits within 0.003 of f16: ${line}`);
  const [, from, to] = /weights (\d+\.\d) -> (\d+\.\d) MiB/.exec(line);
  assert.ok(Number(to) < Number(from), `8-bit weights are smaller: ${line}`);
  console.log(`lever: ${line}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the precision switch rebuilds the panel at the new precision and keeps the sentence and the pruned heads', async () => {
  const { page, problems, lab: { trained } } = await app.open(`?preset=minilm&backend=cpu&pruned=${pruned}`);
  await trained.waitReady({ timeout: 60000 });
  await trained.setText('The river bank was muddy after the rain.');
  // The new sentence's cosine, once its pass is done (the box runs it as it loses focus).
  await page.waitForFunction((selector) => /^0\.\d+$/.test(document.querySelector(selector)?.dataset.value ?? ''), '[data-testid="trained-cosine"]', { timeout: 60000 });
  const before = await trained.cosineValue();
  await trained.precision.selectOption('int8');
  await trained.backend.waitText(/8-bit weights and activations/, { timeout: 60000 });
  await trained.waitReady({ timeout: 60000 });
  assert.equal(await trained.text.inputValue(), 'The river bank was muddy after the rain.');
  assert.match(page.url(), /precision=int8/);
  assert.match(page.url(), /pruned=/);
  const after = await trained.cosineValue();
  assert.ok(Math.abs(after - before) < 0.01 && after !== before, `cosine ${before} at f16, ${after} at 8 bits`);
  await trained.precision.selectOption('f16');
  await trained.waitReady({ timeout: 60000 });
  await trained.backend.waitTextNot(/8-bit/, { timeout: 60000 });
  assert.equal(await trained.cosineValue(), before, 'back at f16: the same numbers');
  assert.deepEqual(problems, []);
});
