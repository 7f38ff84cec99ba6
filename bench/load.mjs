// Loading a reader's checkpoint in the page, as a reader does: the folder served beside the page
// (?model=, read by range requests) and the same files through the file input. For each: MB of
// safetensors read and converted to f16 per second (the page's own line), seconds to the first
// heatmap, the page's wasm memory once the model runs, and one forward pass at 128 tokens on the
// CPU kernel (the page's own timing, on its thread). Headless Chromium without WebGPU through
// Playwright, or Firefox ESR and WebKitGTK through WebDriver (tests/engines/webdriver.mjs); the
// CPU model printed.
//   node bench/load.mjs [ROUNDS] [--engine=chromium|firefox|webkit] [--driver=webdriver]
//                       [--precision=int8] [--how=served|picked] [--induction] [--importance]
//                       [FOLDER...]
// FOLDERs are folders of scripts/make-checkpoints.sh (default bert-base-shaped; `large` makes
// bert-large-shaped and gpt2-medium-, gpt2-large- and gpt2-xl-shaped in target/checkpoints-large:
// give its path), encoders or GPT-2 decoders. --precision=int8 runs the page at 8 bits (a decoder
// too large for f32 is held at 8 bits whatever the link asks); --how= measures one way only;
// --induction then runs a decoder's induction test on the page's workers (each builds its own
// copy of the model) and prints its time and the page's memory line; --importance then measures
// every head of a decoder on the page's text (a pass each) and by the gradient of the loss on the
// text set, on the workers, and prints the time of each.
import { readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';
import { CHECKPOINTS_PATH, checkpoints } from '../tests/e2e/serve.mjs';
import { By, startEngine } from '../tests/engines/webdriver.mjs';
import { cpuLine } from './machine.mjs';

const args = process.argv.slice(2);
const engine = args.find((a) => a.startsWith('--engine='))?.slice(9) ?? 'chromium';
const [roundsArg, ...folderArgs] = args.filter((a) => !a.startsWith('--'));
const rounds = Number(roundsArg ?? 1);
const precision = args.find((a) => a.startsWith('--precision='))?.slice(12);
const induction = args.includes('--induction');
const importance = args.includes('--importance');
const ways = [args.find((a) => a.startsWith('--how='))?.slice(6) ?? ['served', 'picked']].flat();
const folders = (folderArgs.length ? folderArgs : ['bert-base-shaped']).map((f) => (f.includes('/') ? f : join(checkpoints, f)));
const sentence = Array.from({ length: 126 }, (_, i) => ['the', 'bank', 'river', 'was', 'muddy', 'after', 'rain'][i % 7]).join(' ');
const LONG = 600000;

/** Chromium through Playwright, as one browser of the two shapes `measure` drives. */
async function playwright() {
  const browser = await launch({ webgpu: false });
  return {
    name: `Chromium ${browser.version()} headless (Playwright)`,
    async open(url) {
      const { page } = await openPage(browser, url);
      return {
        poll: async (fn, arg, timeout = LONG) => (await page.waitForFunction(fn, arg, { polling: 20, timeout })).jsonValue(),
        click: (id) => page.getByTestId(id).click({ timeout: LONG }),
        files: (paths) => page.getByTestId('model-files').setInputFiles(paths),
        close: () => page.close(),
      };
    },
    close: () => browser.close(),
  };
}

/** Firefox or WebKit (or Chromium) through WebDriver, polled every 50 ms. */
async function webdriver(name) {
  const e = await startEngine(name);
  return {
    name: `${e.browser} ${e.version} (WebDriver)`,
    async open(url) {
      await e.driver.get(url);
      return {
        async poll(fn, arg, timeout = LONG) {
          const t0 = Date.now();
          for (;;) {
            const v = await e.driver.executeScript(fn, arg);
            if (v) return v;
            if (Date.now() - t0 > timeout) throw new Error(`${name}: nothing after ${timeout} ms of ${fn}`);
            await sleep(50);
          }
        },
        click: (id) => e.driver.findElement(By.css(`[data-testid=${id}]`)).click(),
        files: (paths) => e.driver.findElement(By.css('[data-testid=model-files]')).sendKeys(paths.join('\n')),
        close: async () => {},
      };
    },
    close: () => e.stop(),
  };
}

/** The numbers the page shows once the model at `how` ('served' or 'picked') is on show. */
async function measure(browser, base, folder, how) {
  const query = `?preset=minilm&backend=cpu&text=${encodeURIComponent(sentence)}${precision ? `&precision=${precision}` : ''}`;
  const t0 = Date.now();
  let page;
  if (how === 'served') {
    // The server serves every folder under one root: its parent must be the checkpoints' root.
    page = await browser.open(`${base}/${query}&model=${encodeURIComponent(CHECKPOINTS_PATH + basename(folder))}`);
  } else {
    page = await browser.open(`${base}/${query}`);
    await page.poll(() => document.querySelector('[data-testid=trained-heatmap-0]'), null, 120000);
    const files = (await readdir(folder)).filter((f) => f !== 'reference.json' && !f.startsWith('.')).map((f) => join(folder, f));
    await page.files(files);
    await page.poll((name) => (document.querySelector('[data-testid=model-load]')?.textContent ?? '').startsWith(name), basename(folder));
  }
  // Read where it is seen: a large model's first passes keep the page's thread busy for seconds.
  const { line, memory, tokens, decoder } = await page.poll((name) => {
    const line = document.querySelector('[data-testid=model-load]')?.textContent ?? '';
    const heatmap = document.querySelector('[data-testid=trained-heatmap-0], [data-testid=decoder-heatmap-0]');
    return line.startsWith(name) && heatmap?.width > 1
      && { line, memory: window.wasmBindings.wasm_memory_bytes(), tokens: document.querySelectorAll('[data-testid=tokens] .token').length,
        decoder: heatmap.dataset.testid.startsWith('decoder') };
  }, basename(folder));
  const toHeatmap = (Date.now() - t0) / 1000;
  const [, mb, seconds, rate] = /Read ([\d.]+) MB of weights in ([\d.]+) s \(([\d.]+) MB\/s\)/.exec(line);
  // Prune one head for the page's own timing of a pass (every layer again).
  await page.click(decoder ? 'decoder-head-0' : 'grid-0-0');
  const pass = await page.poll(() => {
    const text = document.querySelector('[data-testid=trained-pass]')?.textContent ?? '';
    return /Last change recomputed layers 1-/.test(text) && text;
  });
  const forward = /in ([\d.]+\s?(ms|s))\./.exec(pass)?.[1] ?? '?';
  let workers = '';
  if (induction && decoder) {
    const t1 = Date.now();
    await page.click('induction-run');
    await page.poll(() => /^On \d+ random tokens repeated once: /.test(document.querySelector('[data-testid=induction-result]')?.textContent ?? ''), null, 2 * LONG);
    const note = await page.poll(() => document.querySelector('[data-testid=memory-note]')?.textContent);
    workers = ` ${((Date.now() - t1) / 1000).toFixed(0)} s; ${note} |`;
  }
  if (importance && decoder) {
    const timed = async (button, done) => {
      const t1 = Date.now();
      await page.click(button);
      await page.poll(done, null, 12 * LONG);
      return `${((Date.now() - t1) / 1000).toFixed(0)} s`;
    };
    const text = await timed('decoder-measure', () => /^Removing one head alone/.test(document.querySelector('[data-testid=decoder-importance]')?.textContent ?? ''));
    const set = await timed('decoder-measure-set', () => /^By the gradient of the loss/.test(document.querySelector('[data-testid=decoder-importance]')?.textContent ?? ''));
    workers += ` ${text} | ${set} |`;
  }
  await page.close();
  return { mb: Number(mb), seconds: Number(seconds), rate: Number(rate), toHeatmap, memory: memory / 2 ** 20, tokens, forward, workers };
}

/** The page's wasm memory in MiB with the built-in model alone on show: what every row's figure starts from. */
async function baseline(browser, base) {
  const page = await browser.open(`${base}/?preset=minilm&backend=cpu&text=${encodeURIComponent(sentence)}${precision ? `&precision=${precision}` : ''}`);
  const memory = await page.poll(() => document.querySelector('[data-testid=trained-heatmap-0]')?.width > 1
    && window.wasmBindings.wasm_memory_bytes(), null, 120000);
  await page.close();
  return memory / 2 ** 20;
}

const { server, base } = await serveDist();
// Chromium through Playwright unless --driver=webdriver (the other engines always through WebDriver).
const viaWebDriver = engine !== 'chromium' || args.includes('--driver=webdriver');
const browser = viaWebDriver ? await webdriver(engine) : await playwright();
const rows = [];
const before = await baseline(browser, base);
for (const folder of folders) {
  if (dirname(folder) !== checkpoints) {
    console.error(`${folder}: serve it from ${checkpoints} (HEADLAB_CHECKPOINTS=${dirname(folder)} node bench/load.mjs ...)`);
    process.exit(2);
  }
  const bytes = (await stat(join(folder, 'model.safetensors'))).size;
  for (const how of ways) {
    for (let r = 0; r < rounds; r++) {
      let m;
      try {
        m = await measure(browser, base, folder, how);
      } catch (e) {
        // What does not load in an engine is a row too: what the page said, or the driver.
        rows.push(`| ${basename(folder)} | ${(bytes / 1e6).toFixed(0)} | ${how} | fails: ${String(e.message ?? e).split('\n')[0].slice(0, 200)} |`);
        console.error(rows.at(-1));
        continue;
      }
      rows.push(`| ${basename(folder)} | ${(bytes / 1e6).toFixed(0)} | ${how} | ${m.mb.toFixed(0)} | ${m.seconds.toFixed(1)} | ${m.rate.toFixed(0)} | ${m.toHeatmap.toFixed(1)} | ${m.memory.toFixed(0)} | ${m.tokens} | ${m.forward} |${m.workers}`);
      console.error(rows.at(-1));
    }
  }
}
await browser.close();
server.close();
console.log(`${cpuLine()}; ${browser.name}, no WebGPU (CPU kernel on the page's thread, importance on its workers)${precision ? `; ?precision=${precision}` : ''}`);
console.log(`The page's wasm memory with the built-in model alone: ${before.toFixed(0)} MiB (a page opened with a model's link, as below, holds that model instead).`);
console.log(`| folder | safetensors MB | how | MB read | s | MB/s | s to first heatmap | wasm memory MiB | tokens | pass with layer 1 head 0 pruned (layers 1-N again) |${induction ? ' induction test on the workers; memory |' : ''}${importance ? ' every head on the text | by the gradient on the text set |' : ''}`);
console.log(`|---|---|---|---|---|---|---|---|---|---|${induction ? '---|' : ''}${importance ? '---|---|' : ''}`);
for (const row of rows) console.log(row);
