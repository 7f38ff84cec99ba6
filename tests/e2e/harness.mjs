// Shared by the end-to-end tests: a static server for the built page (dist/), Debian's headless
// Chromium through playwright-core, and page helpers. Screenshots land in target/e2e/.
import { createServer } from 'node:http';
import { readFile, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { extname, join, resolve } from 'node:path';
import { homedir } from 'node:os';

export const root = resolve(import.meta.dirname, '../..');
export const artifacts = join(root, 'target/e2e');
export const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const { chromium } = createRequire(join(toolsDir, 'package.json'))('playwright-core');

const dist = join(root, 'dist');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
const chromiumArgs = ['--headless=new', '--no-sandbox', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

/** Serves dist/ on a free loopback port; resolves to { server, base }. */
export async function serveDist() {
  const server = createServer(async (req, res) => {
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
  await mkdir(artifacts, { recursive: true });
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

/**
 * Launches headless Chromium. With `webgpu`, it offers WebGPU (a SwiftShader adapter), which
 * headless Chromium does only with --enable-unsafe-webgpu; without, it is a browser with no WebGPU.
 */
export function launch({ webgpu }) {
  const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
  return chromium.launch({ executablePath, args: webgpu ? [...chromiumArgs, '--enable-unsafe-webgpu'] : chromiumArgs });
}

/**
 * Opens `url` in a new page of `browser`, collecting uncaught errors, console errors and requests
 * that leave the `allowed` origins into `problems`.
 */
export async function openPage(browser, url, { viewport = { width: 1400, height: 1000 }, allowed = [new URL(url).origin], ...options } = {}) {
  const page = await browser.newPage({ viewport, ...options });
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console error: ${m.text()}`));
  page.on('request', (r) => !allowed.some((o) => r.url().startsWith(o)) && problems.push(`off-origin request: ${r.url()}`));
  await page.goto(url);
  return { page, problems };
}

/** The text of the element with `data-testid=id`. */
export const text = (page, id) => page.getByTestId(id).textContent();

/** Number of canvases that hold a drawn heatmap (right size, not all one colour). */
export const drawnHeatmaps = (page, n) => page.evaluate((n) => [...document.querySelectorAll('canvas.heatmap')].filter((c) => {
  if (c.width !== n || c.height !== n) return false;
  const px = c.getContext('2d').getImageData(0, 0, n, n).data;
  for (let i = 4; i < px.length; i += 4) if (px[i] !== px[0] || px[i + 1] !== px[1]) return true;
  return n === 1; // a 1x1 heatmap is one colour by definition
}).length, n);
