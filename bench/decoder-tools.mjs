// How long a decoder's tools take in the page, as a reader meets them: every head's importance to
// the next token on a text (one pass per head from the first layer it changes, then the drift
// curve's 65 passes), the ranking by the loss on the Moby-Dick passages (a forward and backward
// pass per passage, then the curve), and the perplexity on those passages (every head, then
// layer 1 head 0 pruned). Headless Chromium without WebGPU, the CPU kernel on the page's thread;
// seconds from the click to the result on the page; the CPU model printed.
//   node bench/decoder-tools.mjs [FOLDER...]     (folders of scripts/make-checkpoints.sh;
//                                                 default gpt2-small-shaped)
import { basename } from 'node:path';
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';
import { CHECKPOINTS_PATH } from '../tests/e2e/serve.mjs';
import { cpuLine } from './machine.mjs';

const folders = process.argv.slice(2).length ? process.argv.slice(2) : ['gpt2-small-shaped'];
const text = 'The bank of the river was muddy after the rain, and the children played by the water until the evening came.';
const LONG = 900000;

/** Seconds from clicking `button` until the text of `result` matches `pattern`. */
async function timed(page, button, result, pattern) {
  const t0 = Date.now();
  await page.getByTestId(button).click();
  await page.waitForFunction(([id, source]) => new RegExp(source).test(document.querySelector(`[data-testid="${id}"]`)?.textContent ?? ''),
    [result, pattern.source], { timeout: LONG, polling: 100 });
  return (Date.now() - t0) / 1000;
}

const { server, base } = await serveDist();
const browser = await launch({ webgpu: false });
const rows = [];
for (const folder of folders) {
  const name = basename(folder);
  const url = `${base}/?model=${encodeURIComponent(CHECKPOINTS_PATH + name)}&backend=cpu&text=${encodeURIComponent(text)}`;
  const { page } = await openPage(browser, url);
  await page.getByTestId('loss-strip').waitFor({ timeout: LONG });
  const tokens = await page.locator('[data-testid=tokens] .token').count();
  const heads = await page.locator('[data-testid^=decoder-head-]').count();
  const kl = await timed(page, 'decoder-measure', 'decoder-importance', /^Removing one head alone/);
  const gradient = await timed(page, 'decoder-measure-set', 'decoder-importance', /^By the gradient of the loss/);
  const full = await timed(page, 'set-measure', 'set-perplexity', /with every head \(mean loss/);
  await page.getByTestId('decoder-head-0').click();
  await page.getByTestId('set-status').filter({ hasText: 'Your heads changed' }).waitFor({ timeout: LONG });
  const pruned = await timed(page, 'set-measure', 'set-perplexity', /with your head pruned/);
  const passages = /^On (\d+) passages of Moby-Dick \((\d+) tokens/.exec(await page.getByTestId('set-perplexity').textContent());
  rows.push(`| ${name} | ${heads} | ${tokens} | ${kl.toFixed(1)} | ${gradient.toFixed(1)} | ${passages[1]} passages, ${passages[2]} tokens | ${full.toFixed(1)} | ${pruned.toFixed(1)} |`);
  console.error(rows.at(-1));
  await page.close();
}
await browser.close();
server.close();
console.log(`${cpuLine()}; Chromium ${browser.version()} headless, no WebGPU (CPU kernel on the page's thread)`);
console.log('| folder | heads | text tokens | importance by the next token (s) | ranking by the Moby-Dick loss (s) | text set | perplexity, every head (s) | perplexity, one head pruned (s) |');
console.log('|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
