// Page objects for the end-to-end tests: one class per part of the built page, each naming its
// data-testid values (and the few class selectors the tests rely on) once, over a Playwright
// page or frame. A named element is a Playwright locator that also carries its test id and
// waits on its text. Code that runs inside the page cannot see Node's variables, so every wait
// that runs there is handed its selectors as its argument.
import { countDrawnHeatmaps } from './serve.mjs';

/** The CSS selector of the element with data-testid `id`. */
const byId = (id) => `[data-testid="${id}"]`;

/** The CSS selector of the elements whose data-testid starts with `prefix`. */
const byPrefix = (prefix) => `[data-testid^="${prefix}"]`;

/** The heatmap canvases of the synthetic layer. */
const HEATMAP = 'canvas.heatmap';

// How the test ids of the synthetic layer's head toggles (head-toggle-<head>), the trained
// model's grid (grid-<layer>-<head>) and the model table's rows (model-row-<model>) start.
const TOGGLE = 'head-toggle-';
const GRID = 'grid-';
const MODEL_ROW = 'model-row-';

/**
 * Waits in `root` until the text of the element with data-testid `id` (empty while there is
 * none) matches `expected`: a RegExp, or a string it must equal.
 */
function waitText(root, id, expected, options) {
  const wanted = expected instanceof RegExp ? { source: expected.source, flags: expected.flags } : { exact: expected };
  return root.waitForFunction(([selector, { source, flags, exact }]) => {
    const text = document.querySelector(selector)?.textContent ?? '';
    return exact !== undefined ? text === exact : new RegExp(source, flags).test(text);
  }, [byId(id), wanted], options);
}

/** Waits in `root` until the element with data-testid `id` is there and its text does not match `pattern`. */
function waitTextNot(root, id, pattern, options) {
  return root.waitForFunction(([selector, source, flags]) => {
    const element = document.querySelector(selector);
    return element !== null && !new RegExp(source, flags).test(element.textContent);
  }, [byId(id), pattern.source, pattern.flags], options);
}

/**
 * The element with data-testid `id` in `root`: a Playwright locator, with its `testId` and
 * `waitText(expected, options)` / `waitTextNot(pattern, options)` as above.
 */
function element(root, id) {
  return Object.assign(root.getByTestId(id), {
    testId: id,
    waitText: (expected, options) => waitText(root, id, expected, options),
    waitTextNot: (pattern, options) => waitTextNot(root, id, pattern, options),
  });
}

/** The synthetic layer's settings: model, sequence length, custom shape, seed, theme. */
class Settings {
  constructor(root) {
    this.root = root;
  }

  get preset() { return element(this.root, 'preset'); }
  /** The model picker's option for the trained model: it names the model on show. */
  get trainedOption() { return this.preset.locator('option[value=trained]'); }
  get seqSlider() { return element(this.root, 'seq-slider'); }
  get seqNumber() { return element(this.root, 'seq-number'); }
  get customHeads() { return element(this.root, 'custom-heads'); }
  get customDk() { return element(this.root, 'custom-d-k'); }
  get seed() { return element(this.root, 'seed'); }
  get theme() { return element(this.root, 'theme'); }

  /** Types `value` into the sequence length's number box and presses Enter. */
  async setSeq(value) {
    await this.seqNumber.fill(value);
    await this.seqNumber.press('Enter');
  }

  /** Types `value` into the custom head count's box and presses Enter. */
  async setCustomHeads(value) {
    await this.customHeads.fill(value);
    await this.customHeads.press('Enter');
  }

  /** Types `value` into the seed's box and presses Enter. */
  async setSeed(value) {
    await this.seed.fill(value);
    await this.seed.press('Enter');
  }
}

/** The status lines and notes: backend, timing, link notes, errors, the boot and panic messages. */
class Status {
  constructor(root) {
    this.root = root;
  }

  get badge() { return element(this.root, 'backend-badge'); }
  get timing() { return element(this.root, 'timing'); }
  get note() { return element(this.root, 'backend-note'); }
  get retryGpu() { return element(this.root, 'retry-gpu'); }
  get urlNotes() { return element(this.root, 'url-notes'); }
  get configError() { return element(this.root, 'config-error'); }
  get panicBanner() { return element(this.root, 'panic-banner'); }
  get passProgress() { return element(this.root, 'pass-progress'); }
  get fullView() { return element(this.root, 'full-view'); }
  get boot() { return element(this.root, 'boot'); }

  /** Waits until the badge's text starts with `label`. */
  waitBadge(label) {
    return this.root.waitForFunction(([selector, l]) => (document.querySelector(selector)?.textContent ?? '').startsWith(l),
      [byId(this.badge.testId), label]);
  }

  /** Waits until the timing line reports a forward pass on `label` (not one run while the GPU starts). */
  waitPassOn(label, options) {
    return this.root.waitForFunction(([selector, l]) => {
      const timing = document.querySelector(selector)?.textContent ?? '';
      return timing.startsWith(`Forward pass on ${l}`) && !timing.includes('while the GPU starts');
    }, [byId(this.timing.testId), label], options);
  }

  /**
   * Records in the page (window.busySeen) each busy timing line a DOM change shows: its text and
   * its indicator's animation name, joined by "|".
   */
  watchBusy() {
    return this.root.evaluate((selector) => {
      window.busySeen = [];
      new MutationObserver(() => {
        const busy = document.querySelector(selector);
        if (busy) window.busySeen.push(`${busy.textContent}|${getComputedStyle(busy, '::before').animationName}`);
      }).observe(document.body, { subtree: true, attributes: true, childList: true, characterData: true });
    }, '.timing.busy');
  }

  /** Waits until the timing line is no longer busy. */
  waitNotBusy(options) {
    return this.root.waitForSelector('.timing:not(.busy)', options);
  }
}

/** The heads of the synthetic layer: heatmaps, toggles, importance ranks, the enlarged head. */
class Heads {
  constructor(root) {
    this.root = root;
  }

  heatmap(h) { return element(this.root, `heatmap-${h}`); }
  toggle(h) { return element(this.root, `${TOGGLE}${h}`); }
  importance(h) { return element(this.root, `importance-${h}`); }
  get canvases() { return this.root.locator(HEATMAP); }
  get detail() { return element(this.root, 'head-detail'); }
  get detailLabels() { return this.detail.locator('.key-labels li'); }
  get detailHeatmap() { return element(this.root, 'detail-heatmap'); }
  get detailHover() { return element(this.root, 'detail-hover'); }
  get closeDetail() { return element(this.root, 'close-detail'); }
  get exportHeadPng() { return element(this.root, 'export-head-png'); }
  get exportHeadSvg() { return element(this.root, 'export-head-svg'); }
  get exportAttentionCsv() { return element(this.root, 'export-attention-csv'); }

  /**
   * The number of heatmaps drawn at n x n (serve.mjs's countDrawnHeatmaps), once every heatmap
   * shown is drawn or 5 s have passed: the page draws them a few per turn of the browser.
   */
  async drawn(n) {
    const all = () => this.root.evaluate(() => document.querySelectorAll('canvas.heatmap').length);
    for (let i = 0; i < 50; i++) {
      if (await this.root.evaluate(countDrawnHeatmaps, n) === await all()) break;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    return this.root.evaluate(countDrawnHeatmaps, n);
  }

  /** Waits until `n` heatmaps are shown. */
  waitCount(n) {
    return this.root.waitForFunction(([selector, n]) => document.querySelectorAll(selector).length === n, [HEATMAP, n]);
  }

  /** Waits until the first heatmap is `n` pixels wide. */
  waitWidth(n) {
    return this.root.waitForFunction(([selector, n]) => document.querySelector(selector)?.width === n, [HEATMAP, n]);
  }

  /**
   * Waits until the first heatmap has a width and more than one colour; resolves to a handle on
   * performance.now() at that moment.
   */
  waitFirstDrawn(options) {
    return this.root.waitForFunction((selector) => {
      const c = document.querySelector(selector);
      if (!c || c.width === 0) return false;
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let i = 4; i < px.length; i += 4) if (px[i] !== px[0]) return performance.now();
      return false;
    }, HEATMAP, options);
  }

  /** Every heatmap's RGBA bytes, concatenated. */
  pixels() {
    return this.root.evaluate((selector) => [...document.querySelectorAll(selector)]
      .flatMap((c) => [...c.getContext('2d').getImageData(0, 0, c.width, c.height).data]), HEATMAP);
  }

  /** Which heads the page shows as pruned. */
  pruned() {
    return this.root.evaluate(([selector, prefix]) => [...document.querySelectorAll(selector)]
      .filter((b) => b.getAttribute('aria-pressed') === 'false').map((b) => Number(b.dataset.testid.slice(prefix.length))), [byPrefix(TOGGLE), TOGGLE]);
  }

  /** Clicks `count` head toggles in turn, in the page, letting the page run every 20 clicks. */
  clickToggles(count) {
    return this.root.evaluate(async ([selector, count]) => {
      for (let i = 0; i < count; i++) {
        const buttons = document.querySelectorAll(selector);
        buttons[i % buttons.length].click();
        if (i % 20 === 19) await new Promise((r) => setTimeout(r, 0));
      }
    }, [byPrefix(TOGGLE), count]);
  }

  /** How many head toggles share the first one's row. */
  columns() {
    return this.root.evaluate((selector) => {
      const tops = [...document.querySelectorAll(selector)].map((e) => Math.round(e.getBoundingClientRect().top));
      return tops.filter((t) => t === tops[0]).length;
    }, byPrefix(TOGGLE));
  }

  /** Waits until head `h`'s importance shows its number. */
  waitImportance(h) {
    return this.importance(h).locator('.num').waitFor();
  }

  /** Head `h`'s importance rank (the number after its "#"). */
  async rank(h) {
    return Number((await this.importance(h).textContent()).split('#')[1]);
  }
}

/** How far pruning moves the layer's output, and the pruning controls. */
class Drift {
  constructor(root) {
    this.root = root;
  }

  get active() { return element(this.root, 'drift-active'); }
  get cosine() { return element(this.root, 'drift-cosine'); }
  get relL2() { return element(this.root, 'drift-rel-l2'); }
  get tokenDrift() { return element(this.root, 'token-drift'); }
  get tokenRows() { return this.tokenDrift.locator('li'); }
  get pruneK() { return element(this.root, 'prune-k'); }
  get pruneRandom() { return element(this.root, 'prune-random'); }
  get restoreAll() { return element(this.root, 'restore-all'); }
  get exportImportanceCsv() { return element(this.root, 'export-importance-csv'); }
  get exportCurveCsv() { return element(this.root, 'export-drift-csv'); }
  get exportTokenCsv() { return element(this.root, 'export-token-drift-csv'); }
}

/** The charts: the model configurations (with its key and hover line) and the drift curve. */
class Chart {
  constructor(root) {
    this.root = root;
  }

  get config() { return element(this.root, 'config-chart'); }
  get key() { return element(this.root, 'chart-key'); }
  get keyItems() { return this.key.locator('li'); }
  get hover() { return element(this.root, 'chart-hover'); }
  get summary() { return element(this.root, 'chart-summary'); }
  get drift() { return element(this.root, 'drift-chart'); }
  get panel() { return this.root.locator('.chart-panel'); }
  get exportPng() { return element(this.root, 'export-chart-png'); }
  get exportSvg() { return element(this.root, 'export-chart-svg'); }
  get exportDriftSvg() { return element(this.root, 'export-drift-svg'); }

  /**
   * Waits until `canvas` (one of the charts) is laid out and backed by its CSS width times
   * `ratio`; resolves to [backing width, CSS width].
   */
  waitSharp(canvas, ratio) {
    return this.root.waitForFunction(([selector, ratio]) => {
      const c = document.querySelector(selector);
      return c.clientWidth > 0 && c.width === Math.round(c.clientWidth * ratio) ? [c.width, c.clientWidth] : null;
    }, [byId(canvas.testId), ratio]).then((h) => h.jsonValue());
  }

  /** Waits until the configuration chart's backing is narrower than `width` pixels. */
  waitNarrowerThan(width) {
    return this.root.waitForFunction(([selector, width]) => document.querySelector(selector).width < width,
      [byId(this.config.testId), width]);
  }

  /** Waits until the chart's key is shown on screen (not kept for screen readers only). */
  waitKeyShown() {
    return this.root.waitForFunction((selector) => !document.querySelector(selector).classList.contains('sr-only'),
      byId(this.key.testId));
  }
}

/** The seed's sortable table of models. */
class Models {
  constructor(root) {
    this.root = root;
  }

  sort(column) { return element(this.root, `sort-${column}`); }
  pick(model) { return element(this.root, `model-pick-${model}`); }
  get sortedDescending() { return this.root.locator('th[aria-sort=descending]'); }

  /** The model of the table's first row. */
  async first() {
    return (await this.root.locator(byPrefix(MODEL_ROW)).first().getAttribute('data-testid')).slice(MODEL_ROW.length);
  }
}

/** The claims measured on the page: batched against one head, the pruning claim. */
class Claims {
  constructor(root) {
    this.root = root;
  }

  get measureBatched() { return element(this.root, 'measure-batched'); }
  get batchedResult() { return element(this.root, 'batched-result'); }
  get pruningClaim() { return element(this.root, 'pruning-claim'); }
}

/** The handbook's function stepped line by line on live tensors. */
class CodeWalk {
  constructor(root) {
    this.root = root;
  }

  line(i) { return element(this.root, `code-line-${i}`); }
  get lines() { return element(this.root, 'code-lines'); }
  get next() { return element(this.root, 'code-next'); }
  get position() { return element(this.root, 'code-position'); }
  get shape() { return element(this.root, 'code-shape'); }
  get slice() { return element(this.root, 'code-slice'); }
  get values() { return element(this.root, 'code-values'); }
  get agreement() { return element(this.root, 'code-agreement'); }
  get head() { return element(this.root, 'code-head'); }
  get token() { return element(this.root, 'code-token'); }
  get timeLoop() { return element(this.root, 'code-time-loop'); }
  get loopResult() { return element(this.root, 'code-loop-result'); }

  /** Waits until line `i` is the selected one. */
  waitSelected(i) {
    return this.root.waitForFunction((id) => document.querySelector('[aria-selected=true]')?.id === id, `code-line-${i}`);
  }

  /** Waits until the token picker's last option is `value`. */
  waitLastToken(value) {
    return this.root.waitForFunction(([selector, value]) => document.querySelector(selector)?.value === value,
      [`${byId(this.token.testId)} option:last-child`, value]);
  }
}

/** The attention-flow picture and the sentence under it. */
class Flow {
  constructor(root) {
    this.root = root;
  }

  get section() { return element(this.root, 'flow'); }
  get picture() { return element(this.root, 'flow-picture'); }
  get change() { return element(this.root, 'flow-change'); }
  get exportSvg() { return element(this.root, 'flow-svg'); }

  /** Waits until the picture holds its SVG. */
  waitDrawn(options) {
    return this.root.waitForFunction((selector) => document.querySelector(selector), `${byId(this.picture.testId)} svg`, options);
  }

  /** Waits until the picture holds its SVG, or the page has no flow section. */
  waitDrawnOrAbsent() {
    return this.root.waitForFunction(([svg, section]) => document.querySelector(svg) || !document.querySelector(section),
      [`${byId(this.picture.testId)} svg`, byId(this.section.testId)]);
  }

  /** The picture's SVG as shown, and the sentence under it. */
  async read() {
    return { svg: await this.picture.innerHTML(), change: await this.change.textContent() };
  }
}

/** The trained model's panel: loading, the sentence, its heads, the grid of 72, importance. */
class Trained {
  constructor(root) {
    this.root = root;
  }

  heatmap(h) { return element(this.root, `trained-heatmap-${h}`); }
  grid(layer, head) { return element(this.root, `${GRID}${layer}-${head}`); }
  get text() { return element(this.root, 'text'); }
  get tokens() { return element(this.root, 'tokens'); }
  get shownTokens() { return this.tokens.locator('.token'); }
  get tokenCount() { return element(this.root, 'token-count'); }
  get tokensCut() { return element(this.root, 'tokens-cut'); }
  get cosine() { return element(this.root, 'trained-cosine'); }
  get cosineLine() { return this.cosine.locator('..'); }
  get check() { return element(this.root, 'trained-check'); }
  get contrast() { return element(this.root, 'trained-contrast'); }
  get backend() { return element(this.root, 'trained-backend'); }
  get note() { return element(this.root, 'trained-note'); }
  get precision() { return element(this.root, 'precision'); }
  get precisionNote() { return element(this.root, 'precision-note'); }
  get importanceMeasure() { return element(this.root, 'importance-measure'); }
  get importanceStatus() { return element(this.root, 'importance-status'); }
  get pruneK() { return element(this.root, 'trained-prune-k'); }
  get restore() { return element(this.root, 'trained-restore'); }
  get layer() { return element(this.root, 'layer'); }
  get modelError() { return element(this.root, 'model-error'); }
  get modelDrop() { return element(this.root, 'model-drop'); }
  get modelFiles() { return element(this.root, 'model-files'); }
  get modelFolder() { return element(this.root, 'model-folder'); }
  get modelBuiltIn() { return element(this.root, 'model-built-in'); }
  get modelProgress() { return element(this.root, 'model-progress'); }
  get modelLoad() { return element(this.root, 'model-load'); }
  get modelNotes() { return element(this.root, 'model-notes'); }
  get modelWanted() { return element(this.root, 'model-wanted'); }
  get modelCredit() { return element(this.root, 'model-credit'); }
  get linkNotes() { return element(this.root, 'trained-link-notes'); }
  get exportImportanceCsv() { return element(this.root, 'export-trained-importance-csv'); }

  /** Waits until the model is loaded and its layer's last head drawn (MiniLM's 12th by default). */
  waitReady(options, heads = 12) {
    return this.heatmap(heads - 1).waitFor(options);
  }

  /** Waits until the model named `name` is on show with its layer's `heads` heatmaps drawn. */
  async waitModel(name, heads, options) {
    await this.modelLoad.waitText(new RegExp(`^${name} \\(`), options);
    await this.waitReady(options, heads);
  }

  /** Types `value` as the sentence and leaves the box, which runs it. */
  async setText(value) {
    await this.text.fill(value);
    await this.text.blur();
  }

  /** The pruned model's cosine at full precision (the text is rounded to the digits the f16 weights support). */
  async cosineValue() {
    return Number(await this.cosine.getAttribute('data-value'));
  }

  /** Waits until the cosine's line counts `pruned` (e.g. "3 of 72") and the cosine is below 1. */
  waitPrunedCosine(pruned, options) {
    return this.root.waitForFunction(([selector, pruned]) => (document.querySelector(selector)?.parentElement.textContent ?? '').includes(pruned)
      && /^0\.\d{3,6}$/.test((document.querySelector(selector)?.textContent ?? '')), [byId(this.cosine.testId), pruned], options);
  }

  /** Waits until the prune slider can be used. */
  waitPruneKEnabled() {
    return this.root.waitForFunction((selector) => !document.querySelector(selector).disabled, byId(this.pruneK.testId));
  }

  /** Waits until the importance measure is no longer measuring. */
  waitImportanceDone(options) {
    return this.importanceStatus.waitTextNot(/^Measuring/, options);
  }

  /** Waits until a grid head has the full shade (the grid is shaded by a finished measure). */
  waitShaded() {
    return this.root.waitForFunction((selector) => [...document.querySelectorAll(selector)].some((b) => b.style.getPropertyValue('--weight') === '1.000'),
      byPrefix(GRID));
  }

  /** Each grid head's shade (its importance's share of the largest), in head order. */
  shades() {
    return this.root.evaluate((selector) => [...document.querySelectorAll(selector)]
      .map((b) => Number(b.style.getPropertyValue('--weight'))), byPrefix(GRID));
  }

  /** Waits until `n` grid heads are pruned. */
  waitPrunedCount(n) {
    return this.root.waitForFunction(([selector, n]) => document.querySelectorAll(selector).length === n,
      [`${byPrefix(GRID)}[aria-pressed=false]`, n]);
  }

  /** The pruned grid heads, by their number in the grid (0 to 71). */
  pruned() {
    return this.root.evaluate((selector) => [...document.querySelectorAll(selector)]
      .map((b, i) => [i, b.getAttribute('aria-pressed')]).filter(([, p]) => p === 'false').map(([i]) => i), byPrefix(GRID));
  }
}

/** The task panel: the pruning curves, the really pruned model's line, the heads' roles. */
class Task {
  constructor(root) {
    this.root = root;
  }

  get panel() { return element(this.root, 'task'); }
  get run() { return element(this.root, 'task-run'); }
  get status() { return element(this.root, 'task-status'); }
  get progress() { return element(this.root, 'task-progress'); }
  get chart() { return element(this.root, 'task-chart'); }
  get prunedLine() { return element(this.root, 'pruned-line'); }
  get leverRun() { return element(this.root, 'lever-run'); }
  get leverLine() { return element(this.root, 'lever-line'); }
  get threadsNote() { return element(this.root, 'task-threads-note'); }
  get rolesSummary() { return element(this.root, 'roles-summary'); }

  /** How many threads the panel computes on (its data-threads). */
  threads() {
    return this.panel.getAttribute('data-threads');
  }

  /** The curves the chart shows, as the page saved them (JSON of model::curves::Curves). */
  async curves() {
    return JSON.parse(await this.chart.getAttribute('data-curves'));
  }

  /** Waits until every order in `orders` has a point at every number of pruned heads in `ks`. */
  waitPoints(orders, ks, options) {
    return this.root.waitForFunction(([selector, orders, ks]) => {
      const c = JSON.parse(document.querySelector(selector).dataset.curves);
      return orders.every((o) => ks.every((k) => (c.points[o] ?? []).some((p) => p[0] === k)));
    }, [byId(this.chart.testId), orders, ks], options);
  }

  /** Evaluations done, from the status line (-1 while it counts none). */
  async evaluationsDone() {
    return Number(((await this.status.textContent()).match(/: (\d+) of \d+ evaluations/) ?? [0, -1])[1]);
  }

  /** Waits until the status line counts at least `n` evaluations done. */
  waitEvaluations(n, options) {
    return this.root.waitForFunction(([selector, n]) => {
      const m = (document.querySelector(selector)?.textContent ?? '').match(/: (\d+) of \d+ evaluations/);
      return m && Number(m[1]) >= n;
    }, [byId(this.status.testId), n], options);
  }

  /** The reader's set's quality, to every digit, once measured. */
  async quality(options) {
    await this.root.waitForFunction((selector) => document.querySelector(selector)?.dataset.quality, byId(this.prunedLine.testId), options);
    return Number(await this.prunedLine.getAttribute('data-quality'));
  }
}

/** The page objects of the app in `root` (a page, or the frame it is embedded in). */
class Atlas {
  constructor(root) {
    this.root = root;
  }

  get panel() { return element(this.root, 'atlas'); }
  get run() { return element(this.root, 'atlas-run'); }
  get status() { return element(this.root, 'atlas-status'); }
  get summary() { return element(this.root, 'atlas-summary'); }
  get clusters() { return element(this.root, 'atlas-clusters'); }
  get matrix() { return element(this.root, 'atlas-matrix'); }
  get head() { return element(this.root, 'atlas-head'); }
  get near() { return element(this.root, 'atlas-near'); }
  get exportCsv() { return element(this.root, 'export-atlas-csv'); }
  get exportSvg() { return element(this.root, 'export-atlas-svg'); }
  get filter() { return element(this.root, 'head-filter'); }
  get filterCount() { return element(this.root, 'head-filter-count'); }

  /** The heads the grid shows under the filter (numbered as the model numbers them). */
  shownHeads() {
    return this.root.locator(byPrefix(GRID)).evaluateAll((cells) => cells
      .map((c, i) => [c.dataset.shown === 'true', i]).filter(([shown]) => shown).map(([, i]) => i));
  }

  /** Every head's cluster on the grid (from 1), or null before the atlas is in. */
  gridClusters() {
    return this.root.locator(byPrefix(GRID)).evaluateAll((cells) => cells.map((c) => (c.dataset.cluster ? Number(c.dataset.cluster) : null)));
  }
}

class Patching {
  constructor(root) {
    this.root = root;
  }

  get panel() { return element(this.root, 'patching'); }
  get clean() { return element(this.root, 'patch-clean'); }
  get corrupted() { return element(this.root, 'patch-corrupted'); }
  get cleanTokens() { return element(this.root, 'patch-clean-tokens'); }
  get corruptedTokens() { return element(this.root, 'patch-corrupted-tokens'); }
  get metric() { return element(this.root, 'patch-metric'); }
  get run() { return element(this.root, 'patch-run'); }
  get refused() { return element(this.root, 'patch-refused'); }
  get status() { return element(this.root, 'patch-status'); }
  get summary() { return element(this.root, 'patch-summary'); }
  get exportCsv() { return element(this.root, 'export-patching-csv'); }
  grid(kind) { return element(this.root, `patch-grid-${kind}`); }

  /** Types `value` as the corrupted sentence and leaves the box. */
  async setCorrupted(value) {
    await this.corrupted.fill(value);
    await this.corrupted.blur();
  }

  /** Every head's share of `kind` ('restored' or 'lost'), in the model's head order. */
  shares(kind) {
    return this.grid(kind).locator('.share-cell').evaluateAll((cells) => cells.map((c) => Number(c.dataset.value)));
  }
}

/** A GPT-2 decoder in the trained panel: the next-token table, the loss strip, its grid, the induction test. */
class Decoder {
  constructor(root) {
    this.root = root;
  }

  heatmap(h) { return element(this.root, `decoder-heatmap-${h}`); }
  head(index) { return element(this.root, `decoder-head-${index}`); }
  get nextDrift() { return element(this.root, 'next-drift'); }
  get nextTokens() { return element(this.root, 'next-tokens'); }
  get lossStrip() { return element(this.root, 'loss-strip'); }
  get lossSummary() { return element(this.root, 'loss-summary'); }
  get pruned() { return element(this.root, 'decoder-pruned'); }
  get unprune() { return element(this.root, 'decoder-unprune'); }
  get inductionRun() { return element(this.root, 'induction-run'); }
  get inductionPrune() { return element(this.root, 'induction-prune'); }
  get inductionResult() { return element(this.root, 'induction-result'); }
  get inductionLosses() { return element(this.root, 'induction-losses'); }
  get layer() { return element(this.root, 'layer'); }
  get measure() { return element(this.root, 'decoder-measure'); }
  get measureSet() { return element(this.root, 'decoder-measure-set'); }
  get importanceStatus() { return element(this.root, 'decoder-importance-status'); }
  get importance() { return element(this.root, 'decoder-importance'); }
  get pruneK() { return element(this.root, 'decoder-prune-k'); }
  get pruneRandom() { return element(this.root, 'decoder-prune-random'); }
  get driftChart() { return element(this.root, 'decoder-drift-chart'); }
  get setMeasure() { return element(this.root, 'set-measure'); }
  get memoryNote() { return element(this.root, 'memory-note'); }
  get precisionRun() { return element(this.root, 'decoder-precision-run'); }
  get precisionStatus() { return element(this.root, 'decoder-precision-status'); }
  get precisionLine() { return element(this.root, 'decoder-precision'); }
  /** The comparison's numbers: perplexity at f16 and at 8 bits, mean KL, top-1 agreement. */
  async precisionNumbers() {
    const [f16, int8, kl, agree] = await Promise.all(['data-f16', 'data-int8', 'data-kl', 'data-agree'].map((a) => this.precisionLine.getAttribute(a)));
    return { f16: Number(f16), int8: Number(int8), kl: Number(kl), agree: Number(agree) };
  }
  get curvesRun() { return element(this.root, 'decoder-curves-run'); }
  get curvesStatus() { return element(this.root, 'decoder-curves-status'); }
  get curvesSummary() { return element(this.root, 'decoder-curves-summary'); }
  get curvesChart() { return element(this.root, 'decoder-curves-chart'); }

  /** The pruning curves the chart draws: `{ ks, iterative, one_shot, random, passages }`. */
  async curves() {
    return JSON.parse(await this.curvesChart.getAttribute('data-curves'));
  }
  get setStatus() { return element(this.root, 'set-status'); }
  get setPerplexity() { return element(this.root, 'set-perplexity'); }

  /** The text set's perplexity with every head and with the heads last measured. */
  async setPerplexities() {
    const [full, pruned] = await Promise.all(['data-full', 'data-pruned'].map((a) => this.setPerplexity.getAttribute(a)));
    return { full: Number(full), pruned: Number(pruned) };
  }

  /** Each head's measured importance (KL when removed alone), in head order (`NaN` before it is measured). */
  importances() {
    return this.root.evaluate(() => [...document.querySelectorAll('[data-testid^="decoder-head-"]')]
      .map((b) => Number(b.dataset.importance ?? NaN)));
  }

  /** The heads pruned, in head order. */
  prunedHeads() {
    return this.root.evaluate(() => [...document.querySelectorAll('[data-testid^="decoder-head-"]')]
      .flatMap((b, i) => (b.getAttribute('aria-pressed') === 'false' ? [i] : [])));
  }

  /** Each loss cell's losses, `[full, pruned]`, in token order (from the second token). */
  losses() {
    return this.root.evaluate((selector) => [...document.querySelectorAll(`${selector} .loss-cell`)]
      .map((c) => [Number(c.dataset.full), Number(c.dataset.pruned)]), byId(this.lossStrip.testId));
  }

  /** The next-token drift: KL (nats) and whether the top token changed. */
  async drift() {
    return { kl: Number(await this.nextDrift.getAttribute('data-kl')), changed: (await this.nextDrift.getAttribute('data-changed')) === 'true' };
  }

  /** Waits until `count` heads are pruned and the passes show it. */
  async waitPruned(count, total, options) {
    await this.pruned.waitText(new RegExp(`^${count} of ${total} heads pruned`), options);
    await this.root.waitForFunction(([selector, pruned]) => {
      const d = document.querySelector(selector);
      return d && (pruned ? Number(d.dataset.kl) > 0 : Number(d.dataset.kl) === 0);
    }, [byId(this.nextDrift.testId), count > 0], options);
  }
}

/**
 * Records the elements of `testIds` (their text and data attributes; null while absent) as each
 * frame shows them (read before the browser renders it), until `stop()`, which returns the
 * readings that differ from the one before: each state a reader saw.
 */
export async function watchStates(page, testIds) {
  await page.evaluate((ids) => {
    const read = () => ids.map((id) => {
      const el = document.querySelector(`[data-testid="${id}"]`);
      return el ? { text: el.textContent, data: { ...el.dataset } } : null;
    });
    const watch = { states: [], last: '', on: true };
    const frame = () => {
      const now = read(), key = JSON.stringify(now);
      if (key !== watch.last) watch.states.push(now);
      watch.last = key;
      if (watch.on) requestAnimationFrame(frame);
    };
    frame();
    window.__headlabStates = watch;
  }, testIds);
  return { stop: () => page.evaluate(() => { window.__headlabStates.on = false; return window.__headlabStates.states; }) };
}

/**
 * Drops the files `names` of the folder served at `base` on the page's model drop zone, as a drop
 * made by script carries them: files, no folder entries.
 */
export function dropFiles(page, base, names) {
  return page.evaluate(async ([base, names]) => {
    const data = new DataTransfer();
    for (const name of names) {
      const bytes = await (await fetch(`${base}/${name}`)).arrayBuffer();
      data.items.add(new File([bytes], name));
    }
    const zone = document.querySelector('[data-testid="model-drop"]');
    zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true }));
    zone.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
  }, [base, names]);
}

export class Lab {
  constructor(root) {
    this.root = root;
    this.settings = new Settings(root);
    this.status = new Status(root);
    this.heads = new Heads(root);
    this.drift = new Drift(root);
    this.chart = new Chart(root);
    this.models = new Models(root);
    this.claims = new Claims(root);
    this.code = new CodeWalk(root);
    this.flow = new Flow(root);
    this.trained = new Trained(root);
    this.decoder = new Decoder(root);
    this.task = new Task(root);
    this.patching = new Patching(root);
    this.atlas = new Atlas(root);
    this.header = root.locator('.page-header');
    this.footer = root.locator('.page-footer');
  }

  /** Waits until `n` heatmaps are shown while the timing line matches `timing`. */
  waitHeatmapsWith(n, timing) {
    return this.root.waitForFunction(([canvas, selector, n, source, flags]) => document.querySelectorAll(canvas).length === n
      && new RegExp(source, flags).test((document.querySelector(selector)?.textContent ?? '')),
    [HEATMAP, byId(this.status.timing.testId), n, timing.source, timing.flags]);
  }
}

/** The handbook page (dist/handbook.html), the host that embeds the app in iframes. */
export class Handbook {
  constructor(page) {
    this.page = page;
  }

  /** The iframe named `name`: the handbook's own are chart, code and prune. */
  iframe(name) { return element(this.page, `frame-${name}`); }
  get theme() { return element(this.page, 'host-theme'); }

  /** The frame inside the iframe named `name`. */
  async frame(name) {
    return (await this.iframe(name).elementHandle()).contentFrame();
  }

  /** Replaces the page's content with iframes, each { name, src, width, height }. */
  replaceWithFrames(frames) {
    return this.page.evaluate((frames) => {
      document.body.replaceChildren();
      for (const { testId, src, width, height } of frames) {
        const f = document.createElement('iframe');
        f.dataset.testid = testId;
        f.src = src;
        f.style.width = width;
        f.style.height = height;
        document.body.append(f);
      }
    }, frames.map(({ name, ...frame }) => ({ testId: this.iframe(name).testId, ...frame })));
  }

  /** Waits until the iframe named `name` has been given a height. */
  waitHeightSet(name, options) {
    return this.page.waitForFunction((selector) => document.querySelector(selector).style.height !== '', byId(this.iframe(name).testId), options);
  }

  /** Posts `message` to the app in the iframe named `name`, for `origin`. */
  post(name, message, origin) {
    return this.page.evaluate(({ selector, message, origin }) =>
      document.querySelector(selector).contentWindow.postMessage(message, origin), { selector: byId(this.iframe(name).testId), message, origin });
  }
}
