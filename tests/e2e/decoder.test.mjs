// A GPT-2 decoder in the built page: the random checkpoints scripts/make-checkpoints.sh makes
// (tests/reference/decoders.py, with float64 references), served beside the page through ?model=
// and picked as files: its tokens, the next token and each token's loss equal to the float64
// reference with every head and with layer 1's head 1 pruned, causal heatmaps whose masked half is
// grey, a text longer than the context cut with a note, the induction test, and a file with
// merges that do not match its vocabulary refused by name while the model on show stays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { launch, suite } from './harness.mjs';
import { CHECKPOINTS_PATH, checkpoints } from './serve.mjs';
import { dropFiles, watchStates } from './pages.mjs';

const app = suite({ noGpu: true });

/** The page's problems less the 404s of the files a served folder lacks (the page asks for each). */
const withoutProbes = (problems) => problems.filter((p) => !/status of 404/.test(p));

const reference = async (name) => JSON.parse(await readFile(join(checkpoints, name, 'reference.json'), 'utf8'));

/** Largest |page - reference| / max |reference|. */
function relError(page, want) {
  assert.equal(page.length, want.length);
  const scale = Math.max(...want.map(Math.abs));
  return Math.max(...page.map((p, i) => Math.abs(p - want[i]))) / scale;
}

/**
 * The served gpt2-odd on `backend` (`cpu` or `gpu`, in `via`): its tokens, next token and every
 * loss equal the float64 reference, full and with layer 1's head 1 pruned, and the page names
 * where the text ran. Resolves to the open page, for more.
 */
async function servedDecoderMatchesTheReference(backend, via) {
  const ref = (await reference('gpt2-odd')).page;
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const opened = await app.open(`?model=${encodeURIComponent(path)}&backend=${backend}&text=${encodeURIComponent(ref.text)}`, { via });
  const { page, lab: { trained, decoder } } = opened;
  await trained.modelLoad.waitText(/^gpt2-odd \(gpt2, weights [0-9a-f]{16}\): 2 layers × 4 heads of 9, d_model 36, FFN 37, 40 positions, 427 pieces/, { timeout: 60000 });
  await decoder.heatmap(3).waitFor({ timeout: 60000 });
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  // The line under the controls names the model on show, not the built-in one.
  assert.equal(await opened.lab.status.timing.textContent(), 'gpt2-odd: its passes are timed in its panel below.');
  const where = backend === 'gpu' ? /^Your text runs on the GPU \(WebGPU\), f16 weights/ : /^Your text runs on the CPU kernel \(wasm simd128/;
  await trained.backend.waitText(where);
  assert.equal(await trained.shownTokens.count(), ref.ids.length);
  assert.equal(await decoder.nextTokens.locator('tbody tr').first().getAttribute('data-id'), String(ref.top));
  assert.deepEqual(await decoder.drift(), { kl: 0, changed: false });
  const full = await decoder.losses();
  assert.ok(relError(full.map((l) => l[0]), ref.losses) < 1e-5, `${backend}, every head: the losses are the float64 reference's`);
  // The masked half of a causal heatmap is grey, the first row's only cell is the colour map's.
  const pixels = await decoder.heatmap(0).evaluate((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    return { n: c.width, masked: [d[4], d[5], d[6]], first: [d[0], d[1], d[2]] };
  });
  assert.deepEqual({ n: pixels.n, masked: pixels.masked }, { n: ref.ids.length, masked: [190, 190, 190] });
  assert.notDeepEqual(pixels.first, [190, 190, 190]);
  // Prune layer 1's head 1: the next token's KL and every loss as the reference has them.
  await decoder.head(1).click();
  await decoder.waitPruned(1, 8, { timeout: 60000 });
  const { kl } = await decoder.drift();
  assert.ok(Math.abs(kl - ref.kl) < 1e-4 * Math.max(1, ref.kl), `${backend}: KL page ${kl}, float64 ${ref.kl}`);
  const pruned = await decoder.losses();
  assert.ok(relError(pruned.map((l) => l[1]), ref.losses_pruned) < 1e-5, `${backend}, pruned: the losses are the float64 reference's`);
  assert.ok(relError(pruned.map((l) => l[0]), ref.losses) < 1e-5, 'the full model\'s stay');
  assert.match(await decoder.lossSummary.textContent(), /^Mean loss over the text: \d+\.\d{3} nats per token \(perplexity [\d.e]+\) with every head, \d+\.\d{3}/);
  assert.match(page.url(), /[?&]pruned=1(&|$)/);
  console.log(`gpt2-odd on the ${backend}: KL with head 1.1 pruned ${kl} (float64 ${ref.kl})`);
  return opened;
}

test('a served GPT-2 checkpoint: its next token and every loss equal the float64 reference, full and with a head pruned', async () => {
  const { page, problems } = await servedDecoderMatchesTheReference('cpu');
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test('on WebGPU (?backend=gpu) a decoder gives the float64 reference too, and a lost device moves it to the CPU kernel with a note', async () => {
  const browser = await launch({ webgpu: true });
  try {
    const { page, problems, lab: { trained, decoder } } = await servedDecoderMatchesTheReference('gpu', browser);
    const before = await decoder.losses();
    await page.evaluate(() => window.wasmBindings.inject_gpu_fault('device'));
    await decoder.head(2).click();
    await decoder.waitPruned(2, 8, { timeout: 60000 });
    await trained.backend.waitText(/^Your text runs on the CPU kernel \(wasm simd128/);
    await page.getByTestId('decoder-backend-note').waitFor();
    assert.match(await page.getByTestId('decoder-backend-note').textContent(), /^The decoder switched to the CPU because /);
    const after = await decoder.losses();
    assert.ok(relError(after.map((l) => l[0]), before.map((l) => l[0])) < 1e-5, 'the full model\'s losses stay');
    assert.match(page.url(), /[?&]pruned=1(%2C|,)2(&|$)/);
    // WebGPU reports the lost device to the console; nothing else may appear.
    assert.deepEqual(withoutProbes(problems).filter((p) => !/[Dd]evice|destroyed|lost/.test(p)), []);
    await page.close();
  } finally {
    await browser.close();
  }
});

test("every head's importance on the reader's text: head 1.1's equals the float64 KL, prune-k takes the least important, at random as many, and the curve is drawn", async () => {
  const ref = (await reference('gpt2-odd')).page;
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const { page, problems, lab: { trained, decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu&text=${encodeURIComponent(ref.text)}`);
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  assert.ok(await decoder.pruneK.isDisabled(), 'nothing to rank by before the measurement');
  await decoder.measure.click();
  await decoder.importance.waitText(/^Removing one head alone moves the next token most for layer \d head \d \(\d\.\d{3}\), /, { timeout: 60000 });
  const importance = await decoder.importances();
  assert.equal(importance.length, 8);
  assert.ok(importance.every((v) => v > 0), importance.join());
  assert.ok(Math.abs(importance[1] - ref.kl) < 1e-4 * Math.max(1, ref.kl), `head 1.1: page ${importance[1]}, float64 ${ref.kl}`);
  await decoder.driftChart.waitFor();
  await decoder.pruneK.fill('3');
  await decoder.waitPruned(3, 8, { timeout: 60000 });
  const least = importance.map((v, h) => [v, h]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).slice(0, 3).map(([, h]) => h).sort();
  assert.deepEqual(await decoder.prunedHeads(), least);
  await decoder.pruneRandom.click();
  await decoder.pruned.waitText(/^3 of 8 heads pruned\./);
  // Another text: the measurement is said to be of the earlier one, and prune-k waits for a new
  // one; the next token is the new text's, or said to be the previous text's.
  const watch = await watchStates(page, ['tokens', 'next-drift']);
  await trained.setText('Another text entirely.');
  await decoder.importanceStatus.waitText(/^Measured on an earlier text: measure again for this one\.$/);
  await page.waitForFunction(() => document.querySelector('[data-testid=next-drift]')?.dataset.stale === 'false'
    && /entirely/.test(document.querySelector('[data-testid=tokens]').textContent));
  const { kl } = await decoder.drift();
  const shown = (await watch.stop()).filter(([tokens, next]) => /entirely/.test(tokens?.text) && next?.data.kl !== undefined);
  const fresh = shown.filter(([, next]) => next.data.stale === 'false');
  assert.deepEqual([...new Set(fresh.map(([, next]) => Number(next.data.kl)))], [kl], 'next-token drifts shown as the new text\'s');
  const unsaid = shown.filter(([, next]) => next.data.stale !== 'false' && !/ \(for your previous text: recomputing…\)$/.test(next.text));
  assert.deepEqual(unsaid, [], 'drifts of the previous text say so');
  assert.equal(await decoder.importance.textContent(), '');
  assert.ok(await decoder.pruneK.isDisabled());
  assert.equal(await decoder.driftChart.count(), 0);
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test("heads ranked by the loss on Moby-Dick (Michel et al.'s gradient): the grid, prune-k and the curve follow that order", async () => {
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const { page, problems, lab: { decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu`);
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  await decoder.measureSet.click();
  await decoder.importance.waitText(/^By the gradient of the loss on Moby-Dick \(Michel et al\.\), the heads that matter most are layer \d head \d \(\d\.\d{3}\), /, { timeout: 60000 });
  const importance = await decoder.importances();
  assert.ok(importance.every((v) => v > 0), importance.join());
  assert.match(await decoder.head(0).getAttribute('title'), /\|dL\/d gate\| \d\.\d{5} on the Moby-Dick passages$/);
  await decoder.driftChart.waitFor();
  await decoder.pruneK.fill('2');
  await decoder.waitPruned(2, 8, { timeout: 60000 });
  const least = importance.map((v, h) => [v, h]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).slice(0, 2).map(([, h]) => h).sort();
  assert.deepEqual(await decoder.prunedHeads(), least);
  assert.equal(await decoder.importanceStatus.textContent(), '');
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test("the perplexity on the shipped Moby-Dick passages equals the float64 reference, with every head and with head 1.1 pruned", async () => {
  const { set } = await reference('gpt2-odd');
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const { page, problems, lab: { decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu`);
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  await decoder.setMeasure.click();
  await decoder.setPerplexity.waitText(new RegExp(`^On ${set.passages} passages of Moby-Dick \\(${set.full.tokens} tokens predicted, at most 64 per passage\\): perplexity [\\d.e]+ with every head \\(mean loss \\d+\\.\\d{3} nats per token\\)\\. Prune heads`), { timeout: 60000 });
  const close = (page, want) => Math.abs(page - want) < 1e-4 * want;
  let got = await decoder.setPerplexities();
  assert.ok(close(got.full, set.full.perplexity) && got.pruned === got.full, `page ${got.full}, float64 ${set.full.perplexity}`);
  await decoder.head(1).click();
  await decoder.setStatus.waitText(/^Your heads changed since: measure again\.$/);
  await decoder.setMeasure.click();
  await decoder.setPerplexity.waitText(/ with your head pruned \(mean loss /, { timeout: 60000 });
  got = await decoder.setPerplexities();
  assert.ok(close(got.full, set.full.perplexity), 'the full model\'s is kept');
  assert.ok(close(got.pruned, set.pruned.perplexity), `pruned: page ${got.pruned}, float64 ${set.pruned.perplexity}`);
  assert.equal(await decoder.setStatus.textContent(), '');
  console.log(`gpt2-odd on Moby-Dick: perplexity ${got.full} (float64 ${set.full.perplexity}), head 1.1 pruned ${got.pruned} (${set.pruned.perplexity})`);
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test('at 8 bits the decoder runs on the CPU kernel and says so; its comparison with f16 on Moby-Dick gives the float64 perplexity at f16, a small KL and a pass timed at both', async () => {
  const { set } = await reference('gpt2-odd');
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const { page, problems, lab: { trained, decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu&precision=int8`);
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  assert.equal(await trained.precision.inputValue(), 'int8');
  await trained.backend.waitText(/^Your text runs on the CPU kernel \(wasm simd128[^)]*\), 8-bit/);
  await decoder.precisionRun.click();
  await decoder.precisionLine.waitText(/^8-bit weights instead of f16, every head kept: a pass over your text [\d.]+ ms -> [\d.]+ ms \([\d.]+x, on the CPU kernel in this page's turns\), weights [\d.]+ -> [\d.]+ [KM]iB; next-token KL to f16 [\d.]+e-?\d+ nats per position \(95 % interval .+\), the same top token at [\d.]+ % of \d+ positions .+, perplexity [\d.e]+ \(.+\) -> [\d.e]+ \(.+\), a change of [-+]?[\d.]+ % \(95 % interval .+\)\.$/, { timeout: 120000 });
  const got = await decoder.precisionNumbers();
  // The f16 side is the model itself: its perplexity is the float64 reference's.
  assert.ok(Math.abs(got.f16 - set.full.perplexity) < 1e-4 * set.full.perplexity, `f16 ${got.f16}, float64 ${set.full.perplexity}`);
  assert.ok(got.kl > 0 && got.kl < 0.05 && got.agree > 0.8, JSON.stringify(got));
  assert.ok(Math.abs(got.int8 / got.f16 - 1) < 0.05, JSON.stringify(got));
  assert.equal(await decoder.precisionStatus.textContent(), '');
  console.log(`gpt2-odd at 8 bits on Moby-Dick: ${JSON.stringify(got)}`);
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test("Michel et al.'s three pruning curves on Moby-Dick: every head's end is the float64 loss, the orders meet at both ends, and the reader's set is a point", async () => {
  const { set } = await reference('gpt2-odd');
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const { page, problems, lab: { decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu&pruned=1`);
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  await decoder.curvesRun.click();
  await decoder.curvesSummary.waitText(/^On 34 passages of Moby-Dick: perplexity [\d.e]+ with every head; with 4 of 8 pruned, [\d.e]+ iterative, [\d.e]+ one-shot, [\d.e]+ at random\.$/, { timeout: 120000 });
  const curves = await decoder.curves();
  assert.deepEqual(curves.ks, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  const full = set.full.mean_loss;
  for (const order of ['iterative', 'one_shot', 'random']) {
    assert.equal(curves[order].length, 9);
    assert.ok(Math.abs(curves[order][0] - full) < 1e-5 * full, `${order}: every head ${curves[order][0]}, float64 ${full}`);
    assert.equal(curves[order][8], curves.iterative[8], 'every head pruned is one model');
  }
  assert.equal(curves.iterative[1], curves.one_shot[1], 'the first step is the same for both gradient orders');
  assert.ok(await decoder.curvesChart.isVisible());
  assert.equal(await decoder.curvesStatus.textContent(), '');
  // The reader's set (layer 1 head 1, from the link) joins the chart once its loss is measured.
  await decoder.setMeasure.click();
  await decoder.setPerplexity.waitText(/ with your head pruned \(mean loss /, { timeout: 60000 });
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test('a text set that fails its hash is refused with a message, and the decoder keeps working', async () => {
  const context = await app.noGpuBrowser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.route('**/moby-dick.txt', async (route) => {
    const body = (await (await route.fetch()).body()).toString().replace('Call me Ishmael.', 'Call me Ishmail.');
    await route.fulfill({ body, contentType: 'text/plain' });
  });
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const { page, problems, lab: { decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu`, { via: context });
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  await decoder.setMeasure.click();
  await decoder.setStatus.waitText(/^Could not load the text set: the text set \(moby-dick\.txt\) is damaged or from another build: its SHA-256 is [0-9a-f]{12}…, not the 81a2e4cf717b… this page expects\.$/, { timeout: 60000 });
  assert.equal(await decoder.setPerplexity.textContent(), '');
  assert.ok(await decoder.setMeasure.isEnabled(), 'the reader can try again');
  await decoder.head(2).click();
  await decoder.waitPruned(1, 8, { timeout: 60000 });
  assert.deepEqual(withoutProbes(problems), []);
  await context.close();
});

test('a dropped GPT-2 folder replaces the encoder; a long text on a 12 x 12 model keeps one layer of attention and shows each layer the reader picks', async () => {
  const { page, problems, lab: { trained, decoder } } = await app.open(`?preset=minilm&backend=cpu&text=${encodeURIComponent('The bank of the river.')}`);
  await trained.waitReady({ timeout: 60000 });
  // A drop of the folder's files.
  await dropFiles(page, `${CHECKPOINTS_PATH}gpt2-small-shaped`, ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt']);
  await trained.modelLoad.waitText(/^gpt2-small-shaped \(gpt2, weights [0-9a-f]{16}\): 12 layers × 12 heads of 64/, { timeout: 120000 });
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  // About 400 tokens: every layer's attention would be 12 x 12 x 400² floats (92 MB) per pass.
  await trained.setText('The bank of the river was muddy after the rain; '.repeat(40));
  await decoder.lossStrip.locator('.loss-cell').nth(300).waitFor({ timeout: 120000 });
  const n = await trained.shownTokens.count();
  assert.ok(n > 350 && n < 1024, `${n} tokens`);
  const picture = () => decoder.heatmap(5).evaluate((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let hash = 0;
    for (let i = 0; i < d.length; i += 7) hash = (hash * 31 + d[i]) >>> 0;
    return { n: c.width, hash };
  });
  await page.waitForFunction((id) => document.querySelector(`[data-testid="${id}"]`)?.width > 300, decoder.heatmap(5).testId, { timeout: 120000 });
  const first = await picture();
  assert.equal(first.n, n);
  await decoder.layer.selectOption('12');
  await page.waitForFunction(async ([id, before]) => {
    const c = document.querySelector(`[data-testid="${id}"]`);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let hash = 0;
    for (let i = 0; i < d.length; i += 7) hash = (hash * 31 + d[i]) >>> 0;
    return hash !== before;
  }, [decoder.heatmap(5).testId, first.hash], { timeout: 120000, polling: 500 });
  assert.equal((await picture()).n, n);
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test('the induction test labels the grid, prunes what it found, and a text past the context is cut with a note', async () => {
  const path = `${CHECKPOINTS_PATH}gpt2-odd`;
  const long = 'The bank of the river was muddy after the rain. '.repeat(8);
  const { page, problems, lab: { trained, decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu&text=${encodeURIComponent(long)}`);
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  await trained.tokensCut.waitText(/^The text is \d+ tokens long; gpt2-odd reads at most 40, so the last \d+ were left out\.$/);
  assert.equal(await trained.shownTokens.count(), 40);
  assert.equal(await decoder.lossStrip.locator('.loss-cell').count(), 39);
  await decoder.inductionRun.click();
  await decoder.inductionResult.waitText(/^On 19 random tokens repeated once: (no induction heads|\d+ induction heads?: [^;]+); /, { timeout: 60000 });
  await decoder.inductionLosses.waitText(/^Loss on the repeated half: \d+\.\d\d nats per token with every head, \d+\.\d\d with your heads \(on the random first half: \d+\.\d\d\)\.$/, { timeout: 60000 });
  await decoder.inductionPrune.click();
  await decoder.pruned.waitText(/^\d+ of 8 heads pruned\./);
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});

test("the reader's GPT-2 files: a tokenizer.json folder loads; merges that do not match the vocabulary are refused by name and the model stays; a smaller decoder then replaces it", async () => {
  const { page, problems, lab: { trained, decoder } } = await app.open(`?preset=minilm&backend=cpu&text=${encodeURIComponent('The bank of the river.')}`);
  await trained.waitReady({ timeout: 60000 });
  const dir = join(checkpoints, 'gpt2-tokenizer-json');
  const files = (await readdir(dir)).filter((f) => f !== 'reference.json').map((f) => join(dir, f));
  await trained.modelFiles.setInputFiles(files);
  await trained.modelLoad.waitText(/^gpt2-tokenizer-json \(gpt2, /, { timeout: 60000 });
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  // A vocab.json + merges.txt folder whose merges name a piece the vocabulary lacks.
  const odd = join(checkpoints, 'gpt2-odd');
  const merges = `${await readFile(join(odd, 'merges.txt'), 'utf8')}q z\n`;
  const picked = await Promise.all(['config.json', 'vocab.json', 'model.safetensors'].map(async (name) => ({ name, mimeType: 'application/octet-stream', buffer: await readFile(join(odd, name)) })));
  picked.push({ name: 'merges.txt', mimeType: 'text/plain', buffer: Buffer.from(merges) });
  await trained.modelFiles.setInputFiles(picked);
  await trained.modelError.waitText(/merges\.txt: line 172 \("q" \+ "z"\) makes or uses "qz", which vocab\.json does not have: the merges do not match the vocabulary\..*The model on show stays\./, { timeout: 60000 });
  assert.match(await trained.modelLoad.textContent(), /^gpt2-tokenizer-json \(/);
  await decoder.lossStrip.waitFor();
  // A smaller decoder (8 heads, from 9) replaces it: the old panel, still reading the reader's
  // heads as the new model's arrive, must not read past them.
  await trained.modelFiles.setInputFiles((await readdir(odd)).filter((f) => f !== 'reference.json').map((f) => join(odd, f)));
  await trained.modelLoad.waitText(/^gpt2-odd \(gpt2, /, { timeout: 60000 });
  await decoder.lossStrip.waitFor({ timeout: 60000 });
  assert.equal((await decoder.importances()).length, 8, "the grid shows the new model's 8 heads");
  assert.deepEqual(problems, []);
  await page.close();
});

test("GPT-2 Large's shape (774 M weights) loads from a served folder at 8 bits only: its losses near the float64 reference, a head pruned, the induction test on the workers, each thread's memory shown", async () => {
  const ref = (await reference('gpt2-large-shaped')).page;
  const path = `${CHECKPOINTS_PATH}gpt2-large-shaped`;
  const started = Date.now();
  const { page, problems, lab: { trained, decoder } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu&threads=2&text=${encodeURIComponent(ref.text)}`);
  await trained.modelLoad.waitText(/^gpt2-large-shaped \(gpt2, weights [0-9a-f]{16}\): 36 layers × 20 heads of 64, d_model 1280, FFN 5120, 1024 positions, 427 pieces\. Read 1548\.1 MB of weights in [\d.]+ s \(\d+ MB\/s\), converted to f16 in this page, then built at 8 bits a block at a time in [\d.]+ s\./, { timeout: 300000 });
  await decoder.lossStrip.waitFor({ timeout: 300000 });
  const loaded = (Date.now() - started) / 1000;
  await trained.modelNotes.waitText(/Its 774 M weights are held at 8 bits only: in f32 beside the file they would need 4\.3 GB/);
  // The reader's precision stays f16 in the link; the panel says why it runs at 8 bits.
  await trained.precisionNote.waitText(/^gpt2-large-shaped is held at 8 bits only: .* so it has no f16 form to compare with\. This panel runs it at 8 bits\.$/);
  await trained.backend.waitText(/^Your text runs on the CPU kernel \(wasm simd128/);
  assert.ok(await decoder.precisionRun.isDisabled(), 'no f16 to compare with');
  assert.ok(await trained.precision.locator('option[value=f16]').isDisabled(), 'f16 offered greyed');
  assert.equal(await trained.shownTokens.count(), ref.ids.length);
  // At 8 bits, each token's loss stays near the float64 reference's (random weights: losses of
  // about 10 nats; measured here 2026-12-07, see docs/decoders.md).
  const full = (await decoder.losses()).map((l) => l[0]);
  const off = full.reduce((s, l, i) => s + Math.abs(l - ref.losses[i]), 0) / full.length;
  const mean = ref.losses.reduce((s, l) => s + l, 0) / ref.losses.length;
  assert.ok(off < 0.05 * mean, `mean |8-bit - float64| ${off} nats of ${mean}`);
  await decoder.head(1).click();
  await decoder.waitPruned(1, 720, { timeout: 300000 });
  const pruned = (await decoder.losses()).map((l) => l[1]);
  const offPruned = pruned.reduce((s, l, i) => s + Math.abs(l - ref.losses_pruned[i]), 0) / pruned.length;
  assert.ok(offPruned < 0.05 * mean, `pruned: mean |8-bit - float64| ${offPruned} nats`);
  // The induction test runs on the two workers, which read the file a tensor at a time, as the
  // page does: each wasm memory then holds the model at 8 bits (about 1.0 GB), not the file
  // beside it, which the page keeps in JavaScript buffers for the workers.
  await decoder.inductionRun.click();
  await decoder.inductionResult.waitText(/^On \d+ random tokens repeated once: /, { timeout: 600000 });
  const memory = decoder.memoryNote;
  await memory.waitText(/^Memory: this page's wasm holds \d\.\d GB, and its model file 1\.4 GB outside it; its 2 workers \d\.\d GB and \d\.\d GB/, { timeout: 60000 });
  const note = await memory.textContent();
  const [pageGb, , ...workersGb] = [...note.matchAll(/(\d\.\d) GB/g)].map((m) => Number(m[1]));
  assert.ok(pageGb < 2.0 && workersGb.every((w) => w < 2.0 && w >= 0.9), note);
  console.log(`gpt2-large-shaped: loaded in ${loaded.toFixed(0)} s; mean loss ${mean.toFixed(2)} nats, 8-bit off by ${off.toFixed(3)} (pruned ${offPruned.toFixed(3)}); ${note}; ${await trained.modelLoad.textContent()}`);
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});
