// Loading a reader's checkpoint in the page, as a reader does: the folder served beside the page
// (?model=, read by range requests) and the same files through the file input. For each: MB of
// safetensors read and converted to f16 per second (the page's own line), seconds to the first
// heatmap, the page's wasm memory once the model runs, and one forward pass at 128 tokens on the
// CPU kernel (the page's own timing, on its thread). Headless Chromium without WebGPU; the CPU model printed.
//   node bench/load.mjs [ROUNDS] [FOLDER...]
// FOLDERs are folders of scripts/make-checkpoints.sh (default bert-base-shaped; `large` makes
// bert-large-shaped in target/checkpoints-large: give its path).
import { readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';
import { CHECKPOINTS_PATH, checkpoints } from '../tests/e2e/serve.mjs';
import { cpuLine } from './machine.mjs';

const [roundsArg, ...folderArgs] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 1);
const folders = (folderArgs.length ? folderArgs : ['bert-base-shaped']).map((f) => (f.includes('/') ? f : join(checkpoints, f)));
const sentence = Array.from({ length: 126 }, (_, i) => ['the', 'bank', 'river', 'was', 'muddy', 'after', 'rain'][i % 7]).join(' ');

/** The numbers the page shows once the model at `how` ('served' or 'picked') is on show. */
async function measure(browser, base, folder, how) {
  const query = `?preset=minilm&backend=cpu&text=${encodeURIComponent(sentence)}`;
  const t0 = Date.now();
  let page;
  if (how === 'served') {
    // The server serves every folder under one root: its parent must be the checkpoints' root.
    ({ page } = await openPage(browser, `${base}/${query}&model=${encodeURIComponent(CHECKPOINTS_PATH + basename(folder))}`));
  } else {
    ({ page } = await openPage(browser, `${base}/${query}`));
    await page.getByTestId('trained-heatmap-0').waitFor({ timeout: 120000 });
    const files = (await readdir(folder)).filter((f) => f !== 'reference.json' && !f.startsWith('.')).map((f) => join(folder, f));
    await page.getByTestId('model-files').setInputFiles(files);
    await page.waitForFunction((name) => (document.querySelector('[data-testid=model-load]')?.textContent ?? '').startsWith(name), basename(folder), { timeout: 600000 });
  }
  // Read where it is seen: a large model's first passes keep the page's thread busy for seconds.
  const seen = await page.waitForFunction((name) => {
    const line = document.querySelector('[data-testid=model-load]')?.textContent ?? '';
    return line.startsWith(name) && document.querySelector('[data-testid=trained-heatmap-0]')?.width > 1
      && { line, memory: window.wasmBindings.wasm_memory_bytes(), tokens: document.querySelectorAll('[data-testid=tokens] .token').length };
  }, basename(folder), { polling: 20, timeout: 600000 });
  const toHeatmap = (Date.now() - t0) / 1000;
  const { line, memory, tokens } = await seen.jsonValue();
  const [, mb, seconds, rate] = /Read ([\d.]+) MB of weights in ([\d.]+) s \(([\d.]+) MB\/s\)/.exec(line);
  // Prune one head for the page's own timing of a pass (every layer again).
  await page.getByTestId('grid-0-0').click({ timeout: 600000 });
  await page.waitForFunction(() => /Last change recomputed layers 1-/.test(document.querySelector('[data-testid=trained-pass]')?.textContent ?? ''), null, { timeout: 600000 });
  const forward = /in ([\d.]+\s?(ms|s))\./.exec(await page.getByTestId('trained-pass').textContent())?.[1] ?? '?';
  await page.close();
  return { mb: Number(mb), seconds: Number(seconds), rate: Number(rate), toHeatmap, memory: memory / 2 ** 20, tokens, forward };
}

const { server, base } = await serveDist();
const browser = await launch({ webgpu: false });
const rows = [];
for (const folder of folders) {
  if (dirname(folder) !== checkpoints) {
    console.error(`${folder}: serve it from ${checkpoints} (HEADLAB_CHECKPOINTS=${dirname(folder)} node bench/load.mjs ...)`);
    process.exit(2);
  }
  const bytes = (await stat(join(folder, 'model.safetensors'))).size;
  for (const how of ['served', 'picked']) {
    for (let r = 0; r < rounds; r++) {
      const m = await measure(browser, base, folder, how);
      rows.push(`| ${basename(folder)} | ${(bytes / 1e6).toFixed(0)} | ${how} | ${m.mb.toFixed(0)} | ${m.seconds.toFixed(1)} | ${m.rate.toFixed(0)} | ${m.toHeatmap.toFixed(1)} | ${m.memory.toFixed(0)} | ${m.tokens} | ${m.forward} |`);
      console.error(rows.at(-1));
    }
  }
}
await browser.close();
server.close();
console.log(`${cpuLine()}; Chromium headless, no WebGPU (CPU kernel on the page's thread, importance on its workers)`);
console.log('| folder | safetensors MB | how | MB read | s | MB/s | s to first heatmap | wasm memory MiB | tokens | pass with layer 1 head 0 pruned (layers 1-N again) |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
