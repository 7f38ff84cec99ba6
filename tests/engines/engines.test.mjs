// The page's behaviour, described once and run on every browser engine a reader uses: Chromium
// (Blink), Firefox ESR (Gecko) and WebKitGTK (WebKit, Safari's engine), each through standard
// WebDriver (webdriver.mjs). Run with `node --test tests/engines/`; scripts/test.sh does.
// HEADLAB_ENGINES=firefox,webkit picks engines (default: all three, Chromium first: the others'
// trained-model numbers are compared with its own). At the end it prints one table, engine by
// engine, and writes it to target/e2e/engines/support.md; screenshots go beside it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { By, ENGINES, artifacts, countDrawnHeatmaps, screenshot, serveDist, startEngine } from './webdriver.mjs';
import { CHECKPOINTS_PATH, checkpoints } from '../e2e/serve.mjs';

const engines = (process.env.HEADLAB_ENGINES ?? Object.keys(ENGINES).join(',')).split(',').filter(Boolean);
for (const e of engines) if (!ENGINES[e]) throw new Error(`HEADLAB_ENGINES: unknown engine ${e}`);
const referencePath = join(artifacts, 'chromium-reference.json');

let server, base;
before(async () => ({ server, base } = await serveDist()));
after(async () => {
  server?.close();
  await report();
});

/** What each engine got and which of its tests passed, for the table at the end. */
const results = new Map();
const record = (engine, facts) => results.set(engine, { ...results.get(engine), ...facts });

/** How many tests each engine has. */
const planned = new Map();

/**
 * WebKitGTK's engine now and then traps with "Out of bounds memory access" where no other engine
 * ever has, in more than one check (docs/backends.md, "WebKitGTK's wasm trap"; about one fresh
 * page in forty at 256 heads): a WebKit check that fails so is taken once more, and the trap is
 * said under the table. A second trap, any other failure, or a trap in another engine fails.
 */
const ENGINE_TRAP = /RuntimeError: Out of bounds memory access/;

/** A test of `name` on `engine`, recorded as passed or failed in the table. */
function check(engine, name, body) {
  planned.set(engine, (planned.get(engine) ?? 0) + 1);
  test(name, async () => {
    const row = results.get(engine) ?? {};
    try {
      try {
        await body();
      } catch (e) {
        const what = `${e?.message ?? e} ${JSON.stringify(e?.actual ?? '')}`;
        if (engine !== 'webkit' || !ENGINE_TRAP.test(what)) throw e;
        console.log(`${engine}: "${name}": the engine trapped, taken once more`);
        record(engine, { notes: [...(results.get(engine)?.notes ?? []), `${name}: the engine trapped once (${what.match(ENGINE_TRAP)[0]}), taken again`] });
        await body();
      }
      record(engine, { passed: [...(row.passed ?? []), name] });
    } catch (e) {
      // The first lines of the reason go under the table too, where a CI log's tail shows them.
      const why = String(e?.message ?? e).split('\n').slice(0, 3).join(' ').slice(0, 400);
      record(engine, { failed: [...(row.failed ?? []), name], why: [...(row.why ?? []), `${name}: ${why}`] });
      throw e;
    }
  });
}

// A wasm module using one simd128 instruction (i8x16.splat), and one using a relaxed-SIMD one
// (i8x16.relaxed_swizzle): the engine's support, read with WebAssembly.validate.
const SIMD = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 8, 1, 6, 0, 65, 0, 253, 15, 11];
const RELAXED = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 0, 253, 15,
  65, 0, 253, 15, 253, 128, 2, 11];

/** What the engine offers the page: WebGPU adapter, wasm features, cores, isolation. */
const ENGINE_FACTS = `const [simd, relaxed, done] = arguments;
(async () => {
  let adapter = 'no navigator.gpu';
  try {
    if (navigator.gpu) {
      const a = await navigator.gpu.requestAdapter();
      adapter = a ? (a.info?.isFallbackAdapter || a.isFallbackAdapter ? 'fallback adapter' : 'adapter') : 'no adapter';
    }
  } catch (e) { adapter = 'requestAdapter threw ' + e; }
  done({ adapter, userAgent: navigator.userAgent, cores: navigator.hardwareConcurrency,
    simd128: WebAssembly.validate(new Uint8Array(simd)), relaxedSimd: WebAssembly.validate(new Uint8Array(relaxed)),
    isolated: self.crossOriginIsolated === true });
})();`;

const textOf = (driver, id) => driver.executeScript(
  `return document.querySelector('[data-testid="${id}"]')?.textContent ?? null`);
/** What the page shows when a wait runs out: its state, heatmaps, timing line and shown alerts. */
const PAGE_STATE = `return [document.readyState, document.querySelectorAll('canvas.heatmap').length + ' heatmaps',
  document.querySelector('[data-testid=timing]')?.textContent ?? 'no timing line',
  ...[...document.querySelectorAll('[role=alert]')].filter((e) => e.getClientRects().length > 0)
    .map((e) => 'alert: ' + e.textContent.trim())].join('; ')`;
/** Whether the page's banner says the wasm engine trapped (`ui::panic`). */
const TRAPPED = `(document.querySelector('[data-testid=panic-banner]:not([hidden])')?.textContent ?? '').includes('WebAssembly engine stopped')`;
/** Fails at once, with the banner's words, when the page says its wasm engine trapped. */
async function assertNoTrap(driver, where) {
  const trapped = await driver.executeScript(`return ${TRAPPED} ? document.getElementById('panic-message').textContent : null`);
  if (trapped) assert.fail(`${where}: ${trapped}`);
}
/** Waits until `predicate` (a JS expression) is true in the page; a wait that runs out says what
 * the page showed then. */
const until = async (driver, predicate, what, timeout = 60000) => {
  try {
    return await driver.wait(() => driver.executeScript(`return !!(${predicate})`), timeout, `waiting for ${what}`);
  } catch (e) {
    const shown = await driver.executeScript(PAGE_STATE).catch((why) => `unreadable: ${why.message}`);
    e.message = `${e.message} (the page showed: ${String(shown).slice(0, 300)})`;
    throw e;
  }
};
/** Sets an input's or select's value as a reader would (input and change events). */
const setValue = (driver, id, value) => driver.executeScript(`const el = document.querySelector('[data-testid="${id}"]');
  el.value = arguments[0]; el.dispatchEvent(new Event('input', { bubbles: true })); el.dispatchEvent(new Event('change', { bubbles: true }));`, value);
/** The timing line is the chosen backend's own pass (the CPU's may come first while a GPU starts). */
const BACKEND_PASS = `/^Forward pass on (?!.*while the GPU starts)/.test(document.querySelector('[data-testid=timing]')?.textContent ?? '')`;
// The pruned cosine is shown to the digits the f16 weights support (three to six decimals); its
// full value is in data-value.
const COSINE = (id) => `/^(0\\.\\d{3,6}|1\\.000000)$/.test(document.querySelector('[data-testid="${id}"]')?.textContent ?? '')`;
const valueOf = (driver, id) => driver.executeScript(
  `return document.querySelector('[data-testid="${id}"]')?.dataset.value ?? null`);

/** The probe's findings in the current document: errors, CSP violations, off-origin requests. */
async function assertClean(driver, where) {
  const { problems, offOrigin } = await driver.executeScript(
    'const p = window.__headlabProbe; return p ? { problems: p.problems, offOrigin: p.offOrigin() } : null') ?? {};
  assert.ok(problems, `${where}: the probe did not run (was the page served by the test server?)`);
  assert.deepEqual(problems, [], `${where}: errors or CSP violations`);
  assert.deepEqual(offOrigin, [], `${where}: requests off the page's origin`);
}

/**
 * Asserts the page's drift numbers equal the CPU core's for its own link and pruned heads. Both
 * are read together, as often as needed for 10 s: a pass that lands meanwhile (a busy machine
 * finishes its work late) may move both, and only a lasting difference is a failure.
 */
async function assertDriftMatchesCpuCore(driver, what) {
  let last = '';
  const same = async () => {
    const { shown, expected } = await driver.executeScript(`
      const pruned = [...document.querySelectorAll('[data-testid^=head-toggle-]')]
        .filter((b) => b.getAttribute('aria-pressed') === 'false').map((b) => Number(b.dataset.testid.split('-')[2]));
      const t = (id) => document.querySelector('[data-testid="' + id + '"]').textContent;
      return { shown: t('drift-cosine') + ' ' + t('drift-rel-l2'),
        expected: window.wasmBindings.cpu_core_drift(location.search, new Uint32Array(pruned)) };`);
    const [ec, er] = expected.split(' ').map(Number);
    const [sc, sr] = shown.split(' ').map(Number);
    last = `page shows "${shown}", CPU core "${expected}"`;
    // Within two units of the last digit shown (six decimals, four), counted in those units:
    // "0.804035" against "0.804033" is 2.0000000000131e-6 apart in binary floating point.
    const units = (a, b, decimals) => Math.round(Math.abs(a - b) * 10 ** decimals);
    return units(ec, sc, 6) <= 2 && units(er, sr, 4) <= 2;
  };
  await driver.wait(same, 10000).catch((e) => assert.fail(`${what}: ${last || e.message}`));
}

/** Chromium records `key`'s value; the other engines must give the same to 1e-6. */
async function compareWithChromium(engine, session, key, value) {
  const reference = JSON.parse(await readFile(referencePath, 'utf8').catch(() => '{}'));
  if (engine === 'chromium') {
    await writeFile(referencePath, JSON.stringify({ ...reference, version: session.version, [key]: value }));
    return;
  }
  assert.ok(reference[key] !== undefined, `no Chromium ${key} in ${referencePath}: run the chromium engine first`);
  const same = typeof value === 'string' && Number.isNaN(Number(value))
    ? value === reference[key] : Math.abs(Number(value) - Number(reference[key])) <= 1e-6;
  assert.ok(same, `${engine} gives ${key} ${value}, Chromium ${reference.version} gave ${reference[key]}`);
}

// The trained model's fixed case: a sentence and a set of pruned heads (all of layer 1, two more).
/**
 * The longest the page's thread may be held at once here, ms. The issue asks for about 200 ms;
 * a heartbeat's gap also counts style, layout, paint, the workers' start and the time the
 * thread is not run at all. On this 2-core machine (the page's thread and two busy workers) the
 * longest gaps were about 120 ms in Chromium and Firefox and 160-300 ms in WebKit, with
 * Chromium's now and then 310-470 ms after the switch to the trained model (BENCHMARKS.md
 * section 20, fifth and sixth rounds). This bound only catches seconds of it (as before issue
 * 53); one computation's hold is CALL_MS's. Each engine's longest gap is printed in the table.
 * tests/e2e/hostile.test.mjs holds Chromium's long tasks to 250 ms.
 */
const HELD_MS = 1000;
/**
 * The longest any one call into the page's wasm may take, ms: issue 53's "about 200 ms" for a
 * computation holding the page's thread. A call counts everything it does (the DOM it changes,
 * the messages it posts, a collection it sets off), not what the engine does between calls
 * (timed by tests/engines/probe.js); calls chained in one task (promise continuations) are
 * timed apart, and only the heartbeat sees them together. The longest calls were 44-95 ms in
 * Chromium, 48-69 in Firefox and 92-100 in WebKit (BENCHMARKS.md section 20, sixth round).
 */
const CALL_MS = 200;
const TRAINED_TEXT = 'The river bank was muddy after the storm.';
const TRICKY_TEXT = 'Zoë’s café — “naïve” 東京 🙂 über-long\u00a0words';
const TRAINED_PRUNED = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 29, 64];

for (const engine of engines) {
  describe(engine, () => {
    let session, driver;
    before(async () => {
      session = await startEngine(engine);
      driver = session.driver;
      record(engine, { version: `${session.browser} ${session.version}` });
    });
    after(() => session?.stop());

    check(engine, 'the page draws every heatmap and the badge names the backend this engine gave', async () => {
      await driver.get(`${base}/`);
      const facts = await driver.executeAsyncScript(ENGINE_FACTS, SIMD, RELAXED);
      record(engine, { facts });
      await until(driver, `document.querySelectorAll('canvas.heatmap').length === 12`, '12 heatmaps');
      await until(driver, BACKEND_PASS,
        "the chosen backend's own pass");
      // The page draws heatmaps a few per turn of the browser, soon after their cards.
      await driver.wait(async () => (await driver.executeScript(countDrawnHeatmaps, 16)) === 12, 10000).catch(() => {});
      assert.equal(await driver.executeScript(countDrawnHeatmaps, 16), 12, 'all 12 BERT-base heads drawn at 16x16');
      const badge = await textOf(driver, 'backend-badge');
      record(engine, { backend: badge });
      assert.ok(facts.simd128, 'the CPU kernel needs wasm simd128');
      if (facts.adapter === 'adapter' || facts.adapter === 'fallback adapter') {
        // The page times both and runs where it measured faster (a software adapter loses).
        assert.match(badge, /^(WebGPU|CPU · wasm simd128( \+ relaxed SIMD)?) · measured faster here$/, `${engine} offers a WebGPU adapter: the page must measure it`);
      } else {
        // The relaxed-SIMD build where the engine validates relaxed SIMD, else simd128 alone.
        assert.equal(badge, facts.relaxedSimd ? 'CPU · wasm simd128 + relaxed SIMD' : 'CPU · wasm simd128');
        const why = await driver.findElement(By.css('[data-testid=backend-note]')).getText();
        assert.match(why, /not using the GPU: this browser (does not offer WebGPU|offers no GPU adapter)/);
      }
      const timing = await textOf(driver, 'timing');
      assert.match(timing, /^Forward pass on (WebGPU|CPU · wasm simd128).*d_model 768, 12 heads of d_k = 64, 16 tokens/);
      if (facts.adapter === 'adapter' || facts.adapter === 'fallback adapter') assert.match(timing, /Chosen by measurement, faster here than on/);
      await screenshot(session, 'page');
      await assertClean(driver, 'page');
    });

    check(engine, 'toggles and the prune slider give the numbers cpu_core_drift computes', async () => {
      await driver.get(`${base}/?preset=gpt2-small&seq=12`);
      await until(driver, `document.querySelector('[data-testid="importance-11"] .num')`, 'importance ranking');
      await until(driver, BACKEND_PASS, 'backend pass');
      assert.equal(await textOf(driver, 'drift-cosine'), '1.000000');
      await driver.findElement(By.css('[data-testid=head-toggle-3]')).click();
      await until(driver, `(document.querySelector('[data-testid=drift-active]')?.textContent ?? '').startsWith('11 of 12') && ${COSINE('drift-cosine')}`, 'drift for 11 heads');
      await assertDriftMatchesCpuCore(driver, 'head 3 off');
      await setValue(driver, 'prune-k', '5');
      await until(driver, `(document.querySelector('[data-testid=drift-active]')?.textContent ?? '').startsWith('7 of 12')`, '5 pruned');
      await assertDriftMatchesCpuCore(driver, '5 least important pruned');
      await screenshot(session, 'pruned');
      await assertClean(driver, 'pruning');
    });

    check(engine, "timings are shown no finer than this engine's clock ticks", async () => {
      // The clock's step as the page would find it: the smallest change of performance.now(),
      // rounded up to a power of ten (0.1 ms in Chromium, 1 ms in Firefox and WebKit here).
      const tick = await driver.executeScript(`let last = performance.now(), small = Infinity, n = 0;
        for (let i = 0; i < 1e7 && n < 5; i++) { const t = performance.now(); if (t !== last) { small = Math.min(small, t - last); last = t; n++; } }
        return small;`);
      const step = 10 ** Math.ceil(Math.log10(tick) - 0.05);
      const decimals = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
      record(engine, { clock: `${step} ms` });
      await driver.get(`${base}/?backend=cpu`);
      await until(driver, BACKEND_PASS, 'the first pass');
      // A single reading keeps only the decimals the clock has, or says it was under one tick.
      const forward = (await textOf(driver, 'timing')).match(/: (under )?([\d.]+) ms/);
      assert.equal((forward[2].split('.')[1] ?? '').length, decimals, `forward pass "${forward[0]}" on a ${step} ms clock`);
      await driver.findElement(By.css('[data-testid=head-toggle-2]')).click();
      await until(driver, `/Recomposed/.test(document.querySelector('[data-testid=drift-cost]')?.textContent)`, 'the recomposition time');
      const recomposed = (await textOf(driver, 'drift-cost')).match(/in (under )?([\d.]+) ms/);
      assert.equal((recomposed[2].split('.')[1] ?? '').length, decimals, `"${recomposed[0]}" on a ${step} ms clock`);
      // The batched-heads experiment repeats each pass until a sample spans 50 ticks, and says so.
      await driver.findElement(By.css('[data-testid=measure-batched]')).click();
      await until(driver, `/Ratio/.test(document.querySelector('[data-testid=batched-result]')?.textContent)`, 'the batched timing', 120000);
      const batched = await textOf(driver, 'batched-result');
      const m = batched.match(/batched: ([\d.]+) ms; one head of width 768: ([\d.]+) ms\. Ratio ([\d.]+)\. .*clock ticks in ([\d.]+) ms steps/);
      assert.ok(m, batched);
      assert.equal(Number(m[4]), step, `the page names the clock's step: ${batched}`);
      const [all, one, ratio] = m.slice(1, 4).map(Number);
      assert.ok(all > 0 && one > 0, batched);
      // The ratio is of the medians; the times are shown rounded to their last digit, so the
      // ratio lies between the extremes of the rounded readings (and its own rounding).
      const half = (text) => 0.5 * 10 ** -((text.split('.')[1] ?? '').length);
      const [ha, ho] = [half(m[1]), half(m[2])];
      const [low, high] = [(all - ha) / (one + ho), (all + ha) / Math.max(one - ho, 1e-9)];
      assert.ok(ratio >= low - 0.006 && ratio <= high + 0.006, `ratio ${ratio} of ${all} and ${one} (${low.toFixed(3)}..${high.toFixed(3)})`);
      await assertClean(driver, 'timings');
    });

    check(engine, "the trained model's cosine for a fixed sentence and pruned set equals Chromium's to 1e-6", async () => {
      const query = `?preset=minilm&backend=cpu&threads=1&text=${encodeURIComponent(TRAINED_TEXT)}&pruned=${TRAINED_PRUNED.join(',')}`;
      await driver.get(`${base}/${query}`);
      await until(driver, `document.querySelector('[data-testid=trained-heatmap-11]')`, 'the trained model', 180000);
      await until(driver, `(document.querySelector('[data-testid=trained-cosine]')?.parentElement.textContent ?? '').includes('${TRAINED_PRUNED.length} of 72')
        && ${COSINE('trained-cosine')}`, 'the pruned cosine', 180000);
      const cosine = await valueOf(driver, 'trained-cosine');
      const tokens = await textOf(driver, 'tokens');
      record(engine, { trainedCosine: Number(cosine).toFixed(6) });
      assert.equal(tokens, '[CLS]theriverbankwasmuddyafterthestorm.[SEP]');
      assert.ok(Number(cosine) > 0.5 && Number(cosine) < 1, `cosine ${cosine} with layer 1 and two more heads pruned`);
      await compareWithChromium(engine, session, 'cosine', cosine);
      // Text beyond ASCII reaches the tokenizer the same way in every engine.
      await setValue(driver, 'text', TRICKY_TEXT);
      await until(driver, `(document.querySelector('[data-testid=tokens]')?.textContent ?? '').includes('cafe')
        && ${COSINE('trained-cosine')}`, 'the new sentence', 60000);
      await compareWithChromium(engine, session, 'tokens', await textOf(driver, 'tokens'));
      await compareWithChromium(engine, session, 'trickyCosine', await valueOf(driver, 'trained-cosine'));
      await screenshot(session, 'trained');
      await assertClean(driver, 'trained model');
    });

    check(engine, "the task quality computed on two web workers equals Chromium's to 1e-6", async () => {
      // One head per layer kept (head 0 of each): 66 pruned; 454 sentences on two workers.
      const pruned = [...Array(72).keys()].filter((h) => h % 12 !== 0).join(',');
      await driver.get(`${base}/?preset=minilm&backend=cpu&threads=2&pruned=${pruned}`);
      await until(driver, `document.querySelector('[data-testid=pruned-line]')?.dataset.quality`, 'the quality of the set', 300000);
      const quality = await driver.executeScript(`return document.querySelector('[data-testid=pruned-line]').dataset.quality`);
      const threads = await driver.executeScript(`return document.querySelector('[data-testid=task]').dataset.threads`);
      const note = await textOf(driver, 'task-threads-note');
      record(engine, { quality });
      assert.equal(note, null, 'the workers started');
      assert.equal(threads, '2', 'the quality was computed on two workers');
      assert.ok(Number(quality) > 0.5 && Number(quality) < 0.8, `quality with one head per layer: ${quality}`);
      await compareWithChromium(engine, session, 'quality', quality);
      await assertClean(driver, 'workers');
    });

    check(engine, "activation patching on two workers: every head's share is the float64 reference's, and Chromium's", async () => {
      await driver.get(`${base}/?preset=minilm&backend=cpu&threads=2`);
      const run = `document.querySelector('[data-testid=patch-run]')`;
      await until(driver, `${run} && !${run}.disabled`, 'the patching button', 180000);
      await driver.executeScript(`${run}.click()`);
      const cells = (kind) => `[...document.querySelectorAll('[data-testid=patch-grid-${kind}] .share-cell')].map((c) => Number(c.dataset.value))`;
      await until(driver, `${cells('restored')}.length === 72`, 'the patching grids', 180000);
      const [restored, lost] = await driver.executeScript(`return [${cells('restored')}, ${cells('lost')}]`);
      const ref = JSON.parse(await readFile(join(import.meta.dirname, '../fixtures/minilm-patching.json'), 'utf8'));
      const gap = ref.clean_margin - ref.corrupted_margin;
      const worst = Math.max(...restored.map((v, h) => Math.abs(v - (ref.patched_margins[h] - ref.corrupted_margin) / gap)),
        ...lost.map((v, h) => Math.abs(v - (ref.clean_margin - ref.ablated_margins[h]) / gap)));
      record(engine, { patchWorst: worst.toExponential(1) });
      // The page's f16 weights: 3e-4 on a margin, over a gap of 0.42.
      assert.ok(worst < 1e-3, `a share ${worst} from the float64 reference's`);
      await compareWithChromium(engine, session, 'patchRestored', restored[3 * 12 + 9]);
      await compareWithChromium(engine, session, 'patchLost', lost[5 * 12 + 10]);
      await screenshot(session, 'patching');
      await assertClean(driver, 'patching');
    });

    check(engine, "the head atlas draws on two workers, and the filter shows the previous-token heads the roles find", async () => {
      await driver.get(`${base}/?preset=minilm&backend=cpu&threads=2`);
      const run = `document.querySelector('[data-testid=atlas-run]')`;
      await until(driver, `${run} && !${run}.disabled`, 'the atlas button', 180000);
      await setValue(driver, 'head-filter', 'role-prev');
      await until(driver, `/^ \\d+ of 72 heads shown\\.$/.test(document.querySelector('[data-testid=head-filter-count]')?.textContent ?? '')`, 'the roles', 180000);
      const shown = await driver.executeScript(`return [...document.querySelectorAll('.grid-head')].map((c, i) => [c.dataset.shown, i]).filter(([s]) => s === 'true').map(([, i]) => i)`);
      assert.ok(shown.includes(2) && shown.length < 72, `previous-token heads: ${shown}`);
      await driver.executeScript(`${run}.click()`);
      await until(driver, `document.querySelectorAll('[data-testid=atlas-summary] li').length === 6`, 'the atlas', 180000);
      const atlas = await driver.executeScript(`return { width: document.querySelector('[data-testid=atlas-matrix]').width,
        clusters: [...document.querySelectorAll('.grid-head')].map((c) => Number(c.dataset.cluster)),
        summary: document.querySelector('[data-testid=atlas-summary]').textContent }`);
      assert.equal(atlas.width, 72);
      assert.deepEqual([...new Set(atlas.clusters)].sort(), [1, 2, 3, 4, 5, 6]);
      await compareWithChromium(engine, session, 'atlasClusters', atlas.clusters.join(''));
      await screenshot(session, 'atlas');
      await assertClean(driver, 'atlas');
    });

    check(engine, "a reader's checkpoint, served (?model=) or picked, draws its heads, its drift equals the float64 reference, its curves have intervals", async () => {
      // The random checkpoints of scripts/make-checkpoints.sh, with their float64 references.
      const reference = async (name) => JSON.parse(await readFile(join(checkpoints, name, 'reference.json'), 'utf8')).page;
      const prunedCosine = (heads) => `(document.querySelector('[data-testid=trained-cosine]')?.parentElement.textContent ?? '').includes('1 of ${heads}')
        && ${COSINE('trained-cosine')}`;
      // Served beside the page, sharded bf16 with sentence-transformers' pooling; the link prunes head 1.
      const served = await reference('bert-cased-bf16-sharded');
      await driver.get(`${base}/?model=${encodeURIComponent(`${CHECKPOINTS_PATH}bert-cased-bf16-sharded`)}&backend=cpu&pruned=1&text=${encodeURIComponent(served.text)}`);
      await until(driver, `document.querySelector('[data-testid=trained-heatmap-2]')`, 'the served model', 120000);
      await until(driver, prunedCosine(9), 'the served model pruned', 60000);
      const servedCosine = Number(await valueOf(driver, 'trained-cosine'));
      assert.ok(Math.abs(servedCosine - served.cosine) < 1e-5, `served: page ${servedCosine}, float64 ${served.cosine}`);
      // Picked through the file input, as a reader picks files: the model replaces the served one.
      const picked = await reference('bert-odd');
      const dir = join(checkpoints, 'bert-odd');
      const files = (await readdir(dir)).filter((f) => f !== 'reference.json' && !f.startsWith('.')).map((f) => join(dir, f));
      await setValue(driver, 'text', picked.text);
      await driver.findElement(By.css('[data-testid=model-files]')).sendKeys(files.join('\n'));
      await until(driver, `/^bert-odd \\(/.test(document.querySelector('[data-testid=model-load]')?.textContent ?? '')
        && document.querySelector('[data-testid=trained-heatmap-3]')`, 'the picked model', 120000);
      await driver.executeScript(`document.querySelector('[data-testid=grid-0-1]').click()`);
      await until(driver, prunedCosine(8), 'the picked model pruned', 60000);
      const pickedCosine = Number(await valueOf(driver, 'trained-cosine'));
      assert.ok(Math.abs(pickedCosine - picked.cosine) < 1e-5, `picked: page ${pickedCosine}, float64 ${picked.cosine}`);
      record(engine, { checkpoint: `${servedCosine.toFixed(6)} / ${pickedCosine.toFixed(6)}` });
      // Its pruning curves (8 heads: seconds), every point with its 95 % interval (the pairs
      // resampled), and the reader's set's change from the full model paired over them.
      await driver.executeScript(`document.querySelector('[data-testid=task-run]').click()`);
      await until(driver, `/All points measured/.test(document.querySelector('[data-testid=task-status]')?.textContent ?? '')`, 'the curves', 180000);
      const curves = JSON.parse(await driver.executeScript(`return document.querySelector('[data-testid=task-chart]').dataset.curves`));
      for (const [k, q] of curves.points.iterative) {
        const row = curves.spreads.iterative.find((r) => r[0] === k) ?? curves.spreads['one-shot'].find((r) => r[0] === k);
        assert.ok(row && row[1] <= q && q <= row[2], `iterative at ${k}: ${q} in ${row}`);
      }
      await until(driver, `/quality 0\\.\\d{3} -> 0\\.\\d{3}: (no change detectable at this sample size|a loss of|a gain of)/.test(document.querySelector('[data-testid=pruned-line]')?.textContent ?? '')`, 'the set against the full model', 60000);
      await screenshot(session, 'checkpoint');
      await assertClean(driver, 'checkpoint');
    });

    check(engine, 'a GPT-2 checkpoint: its next token, a pruned head and every loss equal the float64 reference; the induction test runs and prunes what it found', async () => {
      const ref = JSON.parse(await readFile(join(checkpoints, 'gpt2-odd', 'reference.json'), 'utf8')).page;
      // Served beside the page; the link prunes layer 1's head 1.
      await driver.get(`${base}/?model=${encodeURIComponent(`${CHECKPOINTS_PATH}gpt2-odd`)}&backend=cpu&pruned=1&text=${encodeURIComponent(ref.text)}`);
      await until(driver, `/^gpt2-odd \\(gpt2, /.test(document.querySelector('[data-testid=model-load]')?.textContent ?? '')
        && document.querySelector('[data-testid=decoder-heatmap-3]')
        && Number(document.querySelector('[data-testid=next-drift]')?.dataset.kl) > 0`, 'the decoder, pruned', 120000);
      const page = await driver.executeScript(`return {
        kl: Number(document.querySelector('[data-testid=next-drift]').dataset.kl),
        top: document.querySelector('[data-testid=next-tokens] tbody tr').dataset.id,
        tokens: document.querySelectorAll('[data-testid=tokens] .token').length,
        losses: [...document.querySelectorAll('[data-testid=loss-strip] .loss-cell')].map((c) => [Number(c.dataset.full), Number(c.dataset.pruned)]),
      };`);
      assert.equal(page.tokens, ref.ids.length);
      assert.equal(page.top, String(ref.top));
      assert.ok(Math.abs(page.kl - ref.kl) < 1e-4 * Math.max(1, ref.kl), `KL: page ${page.kl}, float64 ${ref.kl}`);
      const scale = Math.max(...ref.losses_pruned);
      const worst = Math.max(...page.losses.map(([f, p], i) => Math.max(Math.abs(f - ref.losses[i]), Math.abs(p - ref.losses_pruned[i])))) / scale;
      assert.ok(page.losses.length === ref.losses.length && worst < 1e-5, `losses off by ${worst} (relative)`);
      // The induction test on the loaded model, the repeated half's loss with the reader's heads,
      // and what it found pruned.
      await driver.findElement(By.css('[data-testid=induction-run]')).click();
      await until(driver, `/^On \\d+ random tokens repeated once: /.test(document.querySelector('[data-testid=induction-result]')?.textContent ?? '')
        && /^Loss on the repeated half: \\d+\\.\\d\\d nats per token with every head, /.test(document.querySelector('[data-testid=induction-losses]')?.textContent ?? '')`, 'the induction test', 120000);
      await driver.findElement(By.css('[data-testid=induction-prune]')).click();
      await until(driver, `/^\\d+ of 8 heads pruned\\./.test(document.querySelector('[data-testid=decoder-pruned]')?.textContent ?? '')`, 'the induction heads pruned');
      record(engine, { decoder: page.kl.toFixed(6) });
      await assertClean(driver, 'decoder');
    });

    // Chromium loads it in tests/e2e/decoder.test.mjs; here Firefox (WebKitGTK loads it too, in
    // 59 s: docs/decoders.md; not in every run, for CI's time).
    if (engine === 'firefox') {
      check(engine, "GPT-2 Large's shape (774 M weights) loads at 8 bits only and runs, or the engine says before reading it that it cannot give the page the memory, and the model on show stays", async () => {
        const ref = JSON.parse(await readFile(join(checkpoints, 'gpt2-large-shaped', 'reference.json'), 'utf8')).page;
        const started = Date.now();
        await driver.get(`${base}/?model=${encodeURIComponent(`${CHECKPOINTS_PATH}gpt2-large-shaped`)}&backend=cpu&text=${encodeURIComponent(ref.text)}`);
        await until(driver, `/^gpt2-large-shaped \\(gpt2, /.test(document.querySelector('[data-testid=model-load]')?.textContent ?? '')
          && document.querySelectorAll('[data-testid=loss-strip] .loss-cell').length > 0
          || /would not give the page that much more/.test(document.querySelector('[data-testid=model-error]')?.textContent ?? '')`, 'GPT-2 Large loaded, or refused for memory', 600000);
        const seconds = ((Date.now() - started) / 1000).toFixed(0);
        const page = await driver.executeScript(`return {
          error: document.querySelector('[data-testid=model-error]')?.textContent ?? '',
          note: document.querySelector('[data-testid=precision-note]')?.textContent ?? '',
          memory: document.querySelector('[data-testid=memory-note]')?.textContent ?? '',
          losses: [...document.querySelectorAll('[data-testid=loss-strip] .loss-cell')].map((c) => Number(c.dataset.full)),
        };`);
        if (page.error) {
          // Refused from its header: the page keeps a model on show and says what it needs.
          assert.match(page.error, /model\.safetensors: the model needs about (\d+ MB|1\.\d GB) of the page's wasm memory \(its weights at 8 bits, the least it can be held in; its file lies outside it\)/);
          record(engine, { large: `refused: ${page.error.slice(0, 80)}` });
          return;
        }
        assert.match(page.note, /^gpt2-large-shaped is held at 8 bits only: /);
        const off = page.losses.reduce((s, l, i) => s + Math.abs(l - ref.losses[i]), 0) / page.losses.length;
        const mean = ref.losses.reduce((s, l) => s + l, 0) / ref.losses.length;
        assert.ok(page.losses.length === ref.losses.length && off < 0.05 * mean, `mean |8-bit - float64| ${off} of ${mean}`);
        record(engine, { large: `loaded in ${seconds} s, losses off by ${off.toFixed(3)} nats; ${page.memory.replace(/^Memory: /, '')}` });
        await assertClean(driver, 'gpt2-large');
      });
    }

    check(engine, "a phone's width gets one column, nothing wider than the screen, and sharp charts", async () => {
      // In a 390 px frame: Firefox's and WebKit's windows cannot be made that narrow.
      await driver.get(`${base}/__phone.html?src=${encodeURIComponent('/?preset=bert-base&seq=12')}`);
      await driver.switchTo().frame(await driver.findElement(By.css('[data-testid=phone]')));
      await until(driver, `document.querySelectorAll('canvas.heatmap').length === 12`, '12 heatmaps');
      await until(driver, `(() => { const c = document.querySelector('[data-testid=config-chart]');
        return c.width === Math.round(c.clientWidth * devicePixelRatio); })()`, 'the chart at its laid-out size');
      const fit = await driver.executeScript(`return { page: document.documentElement.scrollWidth, screen: innerWidth,
        key: getComputedStyle(document.querySelector('[data-testid=chart-key]')).position,
        columns: new Set([...document.querySelectorAll('main section.panel')].map((p) => p.getBoundingClientRect().left)).size };`);
      assert.equal(fit.screen, 390);
      assert.ok(fit.page <= fit.screen, `the page is ${fit.page} px wide on a ${fit.screen} px screen`);
      assert.equal(fit.columns, 1, 'one column');
      assert.notEqual(fit.key, 'absolute', 'the chart key is shown under the chart');
      await assertClean(driver, 'phone');
      await driver.switchTo().defaultContent();
      await screenshot(session, 'phone');
    });

    check(engine, "256 heads over 512 tokens asked for from the controls, then quick switches during long work: the page's thread is never held long and nothing panics", async () => {
      // The app in a same-origin frame shares its parent's thread: a 10 ms heartbeat in the
      // parent records every gap the app's work makes (the engine starting the page's wasm
      // aside: the heartbeat counts from the first heatmaps on).
      await driver.get(`${base}/__phone.html?src=about:blank`);
      await driver.executeScript(`window.gaps = []; let last = performance.now(); window.__headlabTimeWasm = true;
        setInterval(() => { const now = performance.now(); if (now - last > 60) window.gaps.push([Math.round(now - last), Date.now()]); last = now; }, 10);
        const frame = document.querySelector('[data-testid=phone]');
        frame.style.width = '1200px';
        frame.src = arguments[0];`, `${base}/?backend=cpu`);
      await driver.switchTo().frame(await driver.findElement(By.css('[data-testid=phone]')));
      await until(driver, `document.querySelectorAll('canvas.heatmap').length === 12 && ${BACKEND_PASS}`, 'the first heatmaps');
      await driver.switchTo().defaultContent();
      await driver.executeScript('window.gaps = []');
      await driver.switchTo().frame(await driver.findElement(By.css('[data-testid=phone]')));
      await driver.executeScript(`window.__headlabWasm.longest = [0, 'none']; window.__headlabWasm.calls = 0`);
      const marks = [];
      const mark = async (what) => marks.push([what, await driver.executeScript('return Date.now()')]);
      for (const [id, value] of [['preset', 'custom'], ['custom-d-model', '1024'], ['custom-heads', '256'], ['seq-number', '512']]) {
        await mark(`${id} ${value}`);
        await setValue(driver, id, value);
      }
      // A trap (the page's banner) ends the wait at once.
      await until(driver, `(document.querySelectorAll('canvas.heatmap').length === 256
        && /256 heads of d_k = 4, 512 tokens/.test(document.querySelector('[data-testid=timing]')?.textContent ?? '')
        && document.querySelector('[data-testid="importance-255"] .num')) || ${TRAPPED}`, '256 heads drawn and measured', 180000);
      await assertNoTrap(driver, 'the pass at 256 heads');
      await mark('drawn');
      // GPT-3's long pass and the trained model's load, each interrupted at short, odd delays.
      for (const [i, value] of ['6', '1', '6', 'trained', '3', '6', 'trained', '5', '6', '1'].entries()) {
        await mark(`preset ${value}`);
        await setValue(driver, 'preset', value);
        await driver.sleep([20, 150, 600, 5][i % 4]);
      }
      await until(driver, `(document.querySelectorAll('canvas.heatmap').length === 12
        && /d_model 768, 12 heads of d_k = 64, 512 tokens/.test(document.querySelector('[data-testid=timing]')?.textContent ?? '')) || ${TRAPPED}`, 'BERT-base after the switches', 120000);
      await assertNoTrap(driver, 'the switches');
      await assertClean(driver, 'hostile shapes and switches');
      assert.equal(await driver.executeScript(`return document.querySelector('[data-testid=panic-banner]').hidden`), true, 'no panic');
      const { longest: [call, callName, callStacks], calls } = await driver.executeScript('return window.__headlabWasm');
      await driver.switchTo().defaultContent();
      const gaps = await driver.executeScript('return window.gaps.slice().sort((a, b) => b[0] - a[0])');
      const held = gaps[0]?.[0] ?? 0;
      record(engine, { held, call: `${Math.round(call)} (${calls} calls)` });
      // Each long gap with the step it came after: a failure says where to look.
      const after = ([, at]) => marks.filter(([, t]) => t <= at).at(-1)?.[0] ?? 'the first heatmaps';
      console.log(`${engine}: longest gaps ${gaps.slice(0, 3).map((g) => `${g[0]} ms (after ${after(g)})`).join(', ')}`);
      console.log(`${engine}: longest call into the page's wasm ${call.toFixed(1)} ms (${callName}) of ${calls}${callStacks.map((s) => `\n  ${s}`).join('')}`);
      assert.ok(calls > 0, 'the calls into the page\'s wasm were timed (tests/engines/probe.js)');
      assert.ok(call <= CALL_MS, `a call into the page's wasm (${callName}) held its thread for ${call.toFixed(1)} ms; its stacks: ${callStacks.join('; ')}`);
      assert.ok(held <= HELD_MS, `the page's thread was held for ${gaps.slice(0, 5).map((g) => `${g[0]} ms (after ${after(g)})`).join(', ')}`);
    });

    check(engine, "the handbook's iframes size to their content and follow the host's theme", async () => {
      await driver.get(`${base}/handbook.html`);
      const frames = ['frame-chart', 'frame-prune'];
      for (const id of frames) {
        // The frames load lazily, as a reader scrolls to them: Firefox and WebKit start a lazy
        // frame only near the viewport (Chromium, further away), so scroll as a reader would.
        await driver.switchTo().defaultContent();
        await driver.executeScript(`document.querySelector('[data-testid=${id}]').scrollIntoView()`);
        // The iframe's height (less its 1px borders) equals its document's height, within a pixel.
        // A frame that starts loading while it is looked at replaces its first document (Firefox
        // then says the browsing context was discarded): such a look is retried, not a failure.
        let lastError = null;
        await driver.wait(async () => {
          try {
            return await frameFitsContent(id);
          } catch (e) {
            lastError = e;
            return false;
          }
        }, 60000, `${id} sized to its content`).catch((e) => {
          throw lastError ? new Error(`${e.message} (last look: ${lastError.message})`) : e;
        });
        await assertClean(driver, id);
      }
      await driver.switchTo().defaultContent();
      await screenshot(session, 'handbook');
      await setValue(driver, 'host-theme', 'dark');
      for (const id of frames) {
        await driver.switchTo().frame(await driver.findElement(By.css(`[data-testid=${id}]`)));
        await until(driver, `document.documentElement.dataset.theme === 'dark'`, `${id} in the dark theme`, 10000);
        await assertClean(driver, `${id}, dark`);
        await driver.switchTo().defaultContent();
      }
      await screenshot(session, 'handbook-dark');
      await assertClean(driver, 'handbook page');

      /** Whether frame `id` is drawn and as tall as its document (leaves the driver inside it). */
      async function frameFitsContent(id) {
        await driver.switchTo().defaultContent();
        const outer = await driver.executeScript(`return document.querySelector('[data-testid=${id}]').getBoundingClientRect().height`);
        await driver.switchTo().frame(await driver.findElement(By.css(`[data-testid=${id}]`)));
        const ready = await driver.executeScript(`return !!document.querySelector('[data-testid=config-chart], canvas.heatmap')`);
        const inner = await driver.executeScript('return document.body.getBoundingClientRect().height');
        return ready && inner > 300 && Math.abs(outer - 2 - Math.ceil(inner)) <= 1;
      }
    });
  });
}

/** Prints and writes the side-by-side table: engine, version, backend, wasm features, tests. */
async function report() {
  const rows = [...results].map(([engine, r]) => {
    const f = r.facts ?? {};
    const yes = (b) => (b === undefined ? '?' : b ? 'yes' : 'no');
    return `| ${engine} | ${r.version ?? '?'} | ${r.backend ?? '?'} | ${f.adapter ?? '?'} | ${yes(f.simd128)} | ${yes(f.relaxedSimd)} `
      + `| ${r.clock ?? '?'} | ${f.cores ?? '?'} | ${r.trainedCosine ?? '?'} | ${r.quality ?? '?'} | ${r.checkpoint ?? '?'} | ${r.decoder ?? '?'} | ${r.large ?? (engine === 'chromium' ? 'in tests/e2e' : 'not run')} | ${r.patchWorst ?? '?'} | ${r.held ?? '?'} | ${r.call ?? '?'} | ${(r.passed ?? []).length} of ${planned.get(engine)}`
      + `${(r.failed ?? []).length ? ` (failed: ${r.failed.join('; ')})` : ''} |`;
  });
  const table = ['| engine | browser and version | backend the page chose | WebGPU | simd128 | relaxed SIMD | clock step | cores reported | trained cosine | task quality on 2 workers | checkpoint cosines (served / picked) | GPT-2 checkpoint: next-token KL, a head pruned | GPT-2 Large’s shape | patching: worst share vs float64 | longest hold of the page’s thread, ms | longest call into its wasm, ms | tests passed |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|', ...rows].join('\n');
  const why = [...results].flatMap(([engine, r]) => [...(r.why ?? []), ...(r.notes ?? [])].map((w) => `${engine}, ${w}`));
  console.log(`\nEvery engine, side by side (${new Date().toISOString().slice(0, 10)}):\n${table}\n${why.join('\n')}`);
  await writeFile(join(artifacts, 'support.md'), `${table}\n`);
}
