// Shared by the end-to-end tests: a static server for the built page (dist/), Debian's headless
// Chromium through playwright-core, and page helpers. Screenshots land in target/e2e/.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { countDrawnHeatmaps, root, serveDist } from './serve.mjs';

export { root, serveDist };
export const artifacts = join(root, 'target/e2e');
export const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const { chromium } = createRequire(join(toolsDir, 'package.json'))('playwright-core');

const chromiumArgs = ['--headless=new', '--no-sandbox', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

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
export const drawnHeatmaps = (page, n) => page.evaluate(countDrawnHeatmaps, n);
