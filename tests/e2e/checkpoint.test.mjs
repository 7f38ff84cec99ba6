// A reader's own BERT-family model in the built page: random checkpoints that
// scripts/make-checkpoints.sh makes (with float64 references), loaded through ?model= (served
// beside the page, the sharded bf16 one with its index and sentence-transformers pooling),
// through the file and folder pickers and a drop; a pruned head's drift equal to the float64
// reference; bad files refused with the file named while the model on show stays; a second load
// replacing one under way; a link that names the reader's files; every tool of the trained
// panel on a loaded model (its shape, not MiniLM's).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { artifacts, download, suite } from './harness.mjs';
import { CHECKPOINTS_PATH, REDIRECT_PATH, checkpoints, followedRedirects } from './serve.mjs';
import { dropFiles } from './pages.mjs';

const app = suite({ gpu: true });

/**
 * The page's problems but the browser's own line for each file a served folder lacks: a server
 * lists no folder, so the page asks for each file a model folder may hold (a 404 for the rest).
 */
const withoutProbes = (problems) => problems.filter((p) => !/status of 404/.test(p));

/** The float64 reference of checkpoint `name`: its page case (a sentence, a pruned head, the cosine). */
const reference = async (name) => JSON.parse(await readFile(join(checkpoints, name, 'reference.json'), 'utf8'));

/** The files of checkpoint `name` a reader would pick (the folder's own, not the test's reference). */
const folderFiles = async (name) => (await readdir(join(checkpoints, name)))
  .filter((f) => f !== 'reference.json' && !f.startsWith('.'))
  .map((f) => join(checkpoints, name, f));

/** Prunes layer 1's head 2 (the reference's page case) and gives the page's cosine. */
async function pruneReferenceHead(trained, heads) {
  await trained.grid(0, 1).click();
  await trained.waitPrunedCosine(`1 of ${heads}`, { timeout: 60000 });
  return trained.cosineValue();
}

for (const backend of ['cpu', 'gpu']) {
  test(`a served checkpoint (?model=, bf16 shards, [CLS] pooling) loads on the ${backend} and its drift equals the float64 reference`, async () => {
    const ref = await reference('bert-cased-bf16-sharded');
    const path = `${CHECKPOINTS_PATH}bert-cased-bf16-sharded`;
    const { page, problems, lab: { trained, settings } } = await app.open(`?model=${encodeURIComponent(path)}&backend=${backend}&text=${encodeURIComponent(ref.page.text)}`);
    await trained.waitModel('bert-cased-bf16-sharded', 3, { timeout: 60000 });
    // The top "Model" control names the model on show, not the built-in one.
    assert.match(await settings.trainedOption.textContent(), /^bert-cased-bf16-sharded \(trained\) — 24\/3, d_k 8$/);
    assert.match(await trained.modelLoad.textContent(), /\(bert, weights [0-9a-f]{16}\): 3 layers × 3 heads of 8, d_model 24, FFN 40, 64 positions/);
    assert.match(await trained.modelCredit.textContent(), /served by this page's site/);
    const cosine = await pruneReferenceHead(trained, 9);
    assert.ok(Math.abs(cosine - ref.page.cosine) < 1e-5, `page ${cosine}, float64 reference ${ref.page.cosine}`);
    // The link names the served folder and the weights it was made with.
    assert.match(page.url(), /[?&]model=%2F__checkpoints%2Fbert-cased-bf16-sharded&weights=[0-9a-f]{16}/);
    console.log(`${backend}: served bf16 shards, cosine with head 1.2 pruned ${cosine} (float64 ${ref.page.cosine})`);
    assert.deepEqual(withoutProbes(problems), []);
    await page.close();
  });
}

test("the reader's files, picked, dropped or as a folder: the model is read here, bad files are refused by name and the model on show stays", async () => {
  const ref = await reference('bert-odd');
  const { page, problems, lab: { trained } } = await app.open(`?preset=minilm&backend=cpu&text=${encodeURIComponent(ref.page.text)}`);
  await trained.waitReady({ timeout: 60000 });
  // Picked files: a BERT saved with its MLM head, in F32, with vocab.txt.
  await trained.modelFiles.setInputFiles(await folderFiles('bert-odd'));
  await trained.waitModel('bert-odd', 4, { timeout: 60000 });
  assert.match(await trained.modelNotes.textContent(), /cls\.predictions/, 'the MLM head is named as not used');
  assert.match(await trained.modelCredit.textContent(), /from your files/);
  const cosine = await pruneReferenceHead(trained, 8);
  assert.ok(Math.abs(cosine - ref.page.cosine) < 1e-5, `page ${cosine}, float64 reference ${ref.page.cosine}`);
  assert.match(page.url(), /[?&]weights=[0-9a-f]{16}&name=/);
  const text = await trained.text.inputValue();

  // A damaged file: refused, naming it and the problem; the model, its pruned head and the sentence stay.
  const files = await folderFiles('bert-odd');
  const weights = await readFile(files.find((f) => f.endsWith('model.safetensors')));
  const asBuffer = async (f) => ({ name: f.split('/').pop(), mimeType: 'application/octet-stream', buffer: await readFile(f) });
  const others = await Promise.all(files.filter((f) => !f.endsWith('model.safetensors')).map(asBuffer));
  const cut = { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: weights.subarray(0, weights.length - 100) };
  await trained.modelFiles.setInputFiles([...others, cut]);
  await trained.modelError.waitText(/^Could not load \d files: model\.safetensors: /, { timeout: 30000 });
  console.log(`damaged weights: ${await trained.modelError.textContent()}`);
  assert.match(await trained.modelError.textContent(), /The model on show stays\./);
  assert.equal(await trained.cosineValue(), cosine);
  assert.equal(await trained.text.inputValue(), text);
  assert.match(await trained.modelLoad.textContent(), /^bert-odd \(/);

  // A drop of the same files.
  await dropFiles(page, `${CHECKPOINTS_PATH}distilbert`, ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json']);
  // DistilBERT, mean-pooled (its Pooling folder was not dropped: modules.json names it).
  await trained.modelError.waitText(/1_Pooling\/config\.json: missing/, { timeout: 30000 });
  // The folder picker gives the whole folder, its Pooling module's config included.
  await trained.modelFolder.setInputFiles(join(checkpoints, 'distilbert'));
  await trained.waitModel('distilbert', 2, { timeout: 60000 });
  assert.equal(await trained.modelError.count(), 0);
  await page.screenshot({ path: join(artifacts, 'checkpoint.png'), fullPage: true });

  // A second load while one is under way replaces it: the BERT-base-shaped folder (174 MB) is
  // still being read when the small one comes; only the small one is shown, then and later.
  await trained.modelFiles.setInputFiles(await folderFiles('bert-base-shaped'));
  await trained.modelProgress.waitText(/^Reading \d files: [\d.]+ of 17[0-9]\.\d MB/, { timeout: 30000 });
  await trained.modelFiles.setInputFiles(await folderFiles('bert-odd'));
  await trained.waitModel('bert-odd', 4, { timeout: 60000 });
  await page.waitForTimeout(3000);
  assert.match(await trained.modelLoad.textContent(), /^bert-odd \(/);
  assert.equal(await trained.modelError.count(), 0);
  assert.equal(await trained.modelProgress.count(), 0);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a link to a model from the reader's files says which to load, keeps its state, and applies it once they come", async () => {
  const ref = await reference('bert-odd');
  // The link a reader makes with bert-odd loaded and head 1.2 pruned.
  const { page: first, lab: { trained: made } } = await app.open(`?preset=minilm&backend=cpu&text=${encodeURIComponent(ref.page.text)}`);
  await made.waitReady({ timeout: 60000 });
  await made.modelFiles.setInputFiles(await folderFiles('bert-odd'));
  await made.waitModel('bert-odd', 4, { timeout: 60000 });
  await pruneReferenceHead(made, 8);
  const link = new URL(first.url()).search;
  await first.close();
  assert.match(link, /pruned=1/);

  const { page, problems, lab: { trained } } = await app.open(link);
  await trained.modelWanted.waitText(/^This link shows bert-odd \(weights [0-9a-f]{16}\)/, { timeout: 30000 });
  assert.equal(await trained.heatmap(0).count(), 0, 'no other model is loaded in its place');
  assert.equal(await trained.modelError.count(), 0);
  await trained.modelFiles.setInputFiles(await folderFiles('bert-odd'));
  await trained.waitModel('bert-odd', 4, { timeout: 60000 });
  // The link's pruned head and sentence apply: the same cosine as the float64 reference.
  await trained.waitPrunedCosine('1 of 8', { timeout: 60000 });
  const cosine = await trained.cosineValue();
  assert.ok(Math.abs(cosine - ref.page.cosine) < 1e-5, `page ${cosine}, float64 reference ${ref.page.cosine}`);
  assert.equal(new URL(page.url()).search, link);
  assert.deepEqual(problems, []);
  await page.close();
});

test('?model= on another site is refused with a message, and the built-in model is shown', async () => {
  const { page, problems, lab: { status, trained } } = await app.open('?preset=minilm&model=https%3A%2F%2Felsewhere.example%2Fbert&backend=cpu');
  await trained.waitReady({ timeout: 60000 });
  assert.match(await status.urlNotes.textContent(), /model=https:\/\/elsewhere\.example\/bert: only folders on this page's own server are loaded/);
  // A folder the server does not have: the file is named.
  await page.goto(`${app.base}/?model=nothing-here&backend=cpu`);
  await trained.modelError.waitText(/^Could not load the model at nothing-here: config\.json: missing/, { timeout: 30000 });
  // Asking again cannot make the file appear: no "Try again".
  assert.equal(await trained.modelError.getByRole('button').count(), 0);
  // A same-origin path the server redirects to another origin: refused, the path named, never
  // followed (the redirect target would answer with a model).
  await page.goto(`${app.base}/?model=${encodeURIComponent(`${REDIRECT_PATH}bert-odd`)}&backend=cpu`);
  await trained.modelError.waitText(/^Could not load the model at \/__redirect\/bert-odd: .*__redirect\/bert-odd\/[\w.-]+ elsewhere; the page reads a model only from where its link points, and follows no redirect/, { timeout: 30000 });
  assert.equal(await trained.modelError.getByRole('button').count(), 0);
  // The server saw nothing asked of the other origin. (Chromium still reports the redirect's
  // target as a request to Playwright, though it sends none.)
  assert.deepEqual(followedRedirects, []);
  const redirectTarget = /^off-origin request: http:\/\/localhost:\d+\/__checkpoints\/bert-odd\//;
  assert.deepEqual(withoutProbes(problems).filter((p) => !redirectTarget.test(p)), []);
  await page.close();
});

test("a loaded checkpoint gets every tool of the trained panel: importance by each measure, prune-k, the CSV, roles, rollout, the meaning check, the atlas, patching, two sentences, quality and the three curves", async () => {
  // BERT with 2 layers of 4 heads of 9, F32, no pooling config (mean), served.
  const path = `${CHECKPOINTS_PATH}bert-odd`;
  const { page, problems, lab: { trained, task, flow, atlas, patching } } = await app.open(`?model=${encodeURIComponent(path)}&backend=cpu&text=${encodeURIComponent('The bank of the river was muddy after the rain.')}`);
  await trained.waitModel('bert-odd', 4, { timeout: 60000 });
  assert.equal(await page.locator('[data-testid^="grid-"]').count(), 8, 'a grid of 2 x 4 heads');
  // Each importance measure ranks the model's 8 heads.
  const measured = async (measure) => {
    if (measure) await trained.importanceMeasure.selectOption(measure);
    await trained.waitImportanceDone({ timeout: 120000 });
    await trained.waitShaded();
    return trained.shades();
  };
  const drift = await measured(null);
  const margin = await measured('margin');
  const byTask = await measured('task');
  for (const [name, shades] of Object.entries({ drift, margin, task: byTask })) {
    assert.equal(shades.length, 8, name);
    assert.ok(shades.every((v) => v >= 0 && v <= 1) && shades.includes(1), `${name}: ${shades}`);
  }
  assert.notDeepEqual(byTask, drift, 'the task measure ranks the heads otherwise than the drift');
  console.log(`bert-odd importance: drift ${drift.map((v) => v.toFixed(2))}, margin ${margin.map((v) => v.toFixed(2))}, task ${byTask.map((v) => v.toFixed(2))}`);
  // The slider prunes the least important by the chosen measure.
  await trained.pruneK.fill('3');
  await trained.waitPrunedCount(3);
  const least = byTask.map((v, i) => [v, i]).sort((a, b) => a[0] - b[0]).slice(0, 3).map(([, i]) => i).sort((a, b) => a - b);
  assert.deepEqual(await trained.pruned(), least);
  await trained.waitPrunedCosine('3 of 8', { timeout: 60000 });
  // The importance CSV: a row per head, named by its layer and place in the layer.
  const csv = await download(page, trained.exportImportanceCsv);
  const rows = csv.bytes.toString('utf8').trim().split('\n');
  assert.equal(rows[0], 'head,layer,head_in_layer,task_loss_gate_gradient,rank,pruned');
  assert.deepEqual(rows.slice(1).map((r) => r.split(',').slice(0, 3).map(Number)), [...Array(8).keys()].map((h) => [h, Math.floor(h / 4) + 1, h % 4]));
  // The meaning check, the rollout picture, the heads' roles: measured on this model.
  assert.match(await trained.check.textContent(), /^Check: which is closer in meaning to .*Full model: .*Pruned: /);
  await flow.waitDrawn({ timeout: 60000 });
  assert.match(await flow.change.textContent(), /^With 3 heads pruned, ".+" draws on /);
  await task.rolesSummary.waitText(/Roles over the first \d+ sentences/, { timeout: 120000 });
  // Beyond looking, on this model too: the atlas of its 8 heads, patching, two sentences.
  await atlas.run.click();
  await atlas.summary.waitFor({ timeout: 120000 });
  assert.equal(await atlas.matrix.evaluate((c) => c.width), 8);
  assert.equal((await atlas.gridClusters()).filter((c) => c !== null).length, 8);
  await patching.clean.fill('a b c d');
  await patching.clean.blur();
  await patching.setCorrupted('a c b d');
  await patching.metric.selectOption('similarity');
  await patching.run.click();
  await patching.summary.waitFor({ timeout: 120000 });
  console.log(`bert-odd patching: ${await patching.summary.textContent()}`);
  assert.equal((await patching.shares('restored')).length, 8);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=compare-grid] .share-cell').length === 8, null, { timeout: 60000 });
  // Quality on the STS pairs with the pruned heads, then the three curves to the end.
  const quality = await task.quality({ timeout: 120000 });
  assert.ok(quality > -1 && quality < 1, `quality ${quality}`);
  await task.run.click();
  await task.status.waitText(/All points measured/, { timeout: 300000 });
  const curves = await task.curves();
  for (const order of ['iterative', 'one-shot', 'random-0']) {
    const ks = new Set([0, 8, ...(curves.points[order] ?? []).map((p) => p[0])]);
    assert.ok(ks.has(2) && ks.has(4) && ks.has(6), `${order}: points at ${[...ks]}`);
  }
  console.log(`bert-odd: quality with 3 pruned ${quality}; ${await task.status.textContent()}`);
  // The reader's set against the full model, paired over the resampled pairs.
  await task.prunedLine.waitText(/quality 0\.\d{3} -> 0\.\d{3}: (no change detectable at this sample size|a loss of|a gain of)/, { timeout: 60000 });
  console.log(await task.prunedLine.textContent());
  await page.screenshot({ path: join(artifacts, 'checkpoint-tools.png'), fullPage: true });
  assert.deepEqual(withoutProbes(problems), []);
  await page.close();
});
