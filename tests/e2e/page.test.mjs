// End-to-end test of the built page (`trunk build --release` -> dist/) in Debian's headless
// Chromium, driven by playwright-core. Run with `node --test tests/e2e/`; scripts/test.sh does.
// Screenshots land in target/e2e/ as test artifacts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { extname, join, resolve } from 'node:path';
import { homedir } from 'node:os';

const root = resolve(import.meta.dirname, '../..');
const dist = join(root, 'dist');
const artifacts = join(root, 'target/e2e');
const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const { chromium } = createRequire(join(toolsDir, 'package.json'))('playwright-core');

const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
let server, base, browser;

before(async () => {
  // A static server for dist/ on a free loopback port.
  server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const file = join(dist, path === '/' ? 'index.html' : path);
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  base = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless=new', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  await mkdir(artifacts, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.close();
});

/** Opens the page at `query`, failing the test on any uncaught error or off-origin request. */
async function open(query = '', viewport = { width: 1400, height: 1000 }) {
  const page = await browser.newPage({ viewport });
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console error: ${m.text()}`));
  page.on('request', (r) => !r.url().startsWith(base) && problems.push(`off-origin request: ${r.url()}`));
  await page.goto(`${base}/${query}`);
  return { page, problems };
}

const text = (page, id) => page.getByTestId(id).textContent();

/** Number of canvases that hold a drawn heatmap (right size, not all one colour). */
const drawnHeatmaps = (page, n) => page.evaluate((n) => [...document.querySelectorAll('canvas.heatmap')].filter((c) => {
  if (c.width !== n || c.height !== n) return false;
  const px = c.getContext('2d').getImageData(0, 0, n, n).data;
  for (let i = 4; i < px.length; i += 4) if (px[i] !== px[0] || px[i + 1] !== px[1]) return true;
  return n === 1; // a 1x1 heatmap is one colour by definition
}).length, n);

test('default page draws every head, names the backend, and drift follows toggles', async () => {
  const { page, problems } = await open();
  await page.getByTestId('heatmap-11').waitFor();
  assert.equal(await page.locator('canvas.heatmap').count(), 12);
  assert.equal(await drawnHeatmaps(page, 16), 12, 'all 12 BERT-base heads drawn at 16x16');
  assert.match(await text(page, 'backend-badge'), /CPU · wasm simd128/);
  assert.match(await text(page, 'timing'), /Forward pass: [\d.]+ ms .* d_model 768, 12 heads of d_k = 64, 16 tokens/);
  assert.equal(await text(page, 'drift-cosine'), '1.000000');
  assert.equal(await text(page, 'drift-active'), '12 of 12');
  await page.screenshot({ path: join(artifacts, 'page.png'), fullPage: true });

  await page.getByTestId('head-toggle-3').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=drift-cosine]').textContent !== '1.000000');
  const cosine = Number(await text(page, 'drift-cosine'));
  const rel = Number(await text(page, 'drift-rel-l2'));
  assert.ok(cosine > 0 && cosine < 1, `cosine ${cosine}`);
  assert.ok(rel > 0 && rel < 1, `relative L2 ${rel}`);
  assert.equal(await text(page, 'drift-active'), '11 of 12');
  assert.equal(await page.getByTestId('head-toggle-3').getAttribute('aria-pressed'), 'false');
  assert.equal(await page.getByTestId('token-drift').locator('li').count(), 16);

  // Pruning more heads moves the output further; restoring all returns to no drift.
  for (const h of [0, 5, 7]) await page.getByTestId(`head-toggle-${h}`).click();
  assert.equal(await text(page, 'drift-active'), '8 of 12');
  assert.ok(Number(await text(page, 'drift-rel-l2')) > rel, 'four heads pruned drift more than one');
  await page.screenshot({ path: join(artifacts, 'page-pruned.png'), fullPage: true });
  await page.getByTestId('restore-all').click();
  assert.equal(await text(page, 'drift-cosine'), '1.000000');
  assert.deepEqual(problems, []);
  await page.close();
});

test('presets and the sequence slider recompute and redraw', async () => {
  const { page, problems } = await open('?preset=gpt2-large&seq=24');
  await page.getByTestId('heatmap-19').waitFor();
  assert.equal(await drawnHeatmaps(page, 24), 20);
  await page.getByTestId('preset').selectOption({ label: 'Transformer (orig.) — 512/8, d_k 64' });
  await page.waitForFunction(() => document.querySelectorAll('canvas.heatmap').length === 8);
  await page.getByTestId('seq-slider').fill('40');
  await page.waitForFunction(() => document.querySelector('canvas.heatmap').width === 40);
  assert.equal(await drawnHeatmaps(page, 40), 8);
  assert.match(page.url(), /preset=transformer&seq=40/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('bad configurations explain themselves and the page keeps working', async () => {
  const cases = [
    ['?preset=custom&d_model=768&heads=7', /768 is not divisible by 7 heads.*try 6 or 8 heads/],
    ['?seq=0', /at least one token/],
    ['?seq=100000', /100000 tokens is over this page's limit of 1024/],
    ['?preset=gpt3', /needs 2.33 GiB \(2.25 GiB of it weights\), over the 1.00 GiB/],
  ];
  for (const [query, message] of cases) {
    const { page, problems } = await open(query);
    const error = page.getByTestId('config-error');
    await error.waitFor();
    assert.match(await error.textContent(), message, query);
    assert.equal(await page.locator('canvas.heatmap').count(), 0, query);
    assert.equal(await page.getByTestId('panic-banner').isHidden(), true, query);
    assert.deepEqual(problems, [], query);
    await page.close();
  }
  // Garbage in the URL gives a note and defaults, and the settings can be fixed in place.
  const { page, problems } = await open('?seq=abc&preset=%F0%9F%92%A5');
  assert.match(await text(page, 'url-notes'), /seq=abc is not a whole number.*preset=💥 is not a known model/s);
  await page.getByTestId('heatmap-11').waitFor();
  await page.getByTestId('preset').selectOption('custom');
  await page.getByTestId('custom-heads').fill('7');
  await page.getByTestId('custom-heads').press('Enter');
  await page.getByTestId('config-error').waitFor();
  await page.getByTestId('custom-heads').fill('8');
  await page.getByTestId('custom-heads').press('Enter');
  await page.getByTestId('heatmap-7').waitFor();
  assert.equal(await drawnHeatmaps(page, 16), 8);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a phone-width screen gets one readable column', async () => {
  const { page, problems } = await open('', { width: 390, height: 844 });
  await page.getByTestId('heatmap-11').waitFor();
  await page.screenshot({ path: join(artifacts, 'page-phone.png'), fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  assert.deepEqual(problems, []);
  await page.close();
});
