// Shared by the end-to-end tests: a static server for the built page (dist/), Debian's headless
// Chromium through playwright-core, each test file's setup, and downloads. The page objects are
// in pages.mjs. Screenshots land in target/e2e/.
import { after, before } from 'node:test';
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { Lab } from './pages.mjs';
import { root, serveDist } from './serve.mjs';

export { root, serveDist };
export const artifacts = join(root, 'target/e2e');
export const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const { chromium } = createRequire(join(toolsDir, 'package.json'))('playwright-core');

const chromiumArgs = ['--headless=new', '--no-sandbox', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

/**
 * Launches headless Chromium. With `webgpu`, it offers WebGPU (a SwiftShader adapter), which
 * headless Chromium does only with --enable-unsafe-webgpu; without, it is a browser with no WebGPU.
 * `HEADLAB_JS_FLAGS` passes V8 flags, for the benchmarks: `--no-enable-avx-vnni` makes V8 lower
 * relaxed SIMD's integer dot product as on a CPU without VEX VNNI (a Zen 4, an older Xeon).
 */
export function launch({ webgpu }) {
  const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
  const v8 = process.env.HEADLAB_JS_FLAGS ? [`--js-flags=${process.env.HEADLAB_JS_FLAGS}`] : [];
  return chromium.launch({ executablePath, args: [...chromiumArgs, ...v8, ...(webgpu ? ['--enable-unsafe-webgpu'] : [])] });
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

/**
 * A test file's shared setup: registers node:test `before` and `after` hooks that start a static
 * server of dist/ (with `host`, a second one: another origin, for a host page) and the browsers
 * asked for (`gpu`: with WebGPU, `noGpu`: without), and close them all. Returns an object that
 * `before` fills in: `base` and `hostBase` (the servers' addresses), `gpuBrowser` and
 * `noGpuBrowser`, and `open(where, options)`, which opens `where` (a path or query on the app's
 * server, or a whole URL) with openPage in `options.via` (a browser or context; by default the
 * WebGPU browser where there is one) and resolves to { page, problems, lab }, `lab` the page's
 * page objects.
 */
export function suite({ gpu = false, noGpu = false, host = false } = {}) {
  const servers = [];
  const setup = {
    async open(where = '', { via = setup.gpuBrowser ?? setup.noGpuBrowser, ...options } = {}) {
      const url = /^https?:/.test(where) ? where : `${setup.base}/${where}`;
      const { page, problems } = await openPage(via, url, options);
      return { page, problems, lab: new Lab(page) };
    },
  };
  const serve = async () => {
    const { server, base } = await serveDist();
    servers.push(server);
    return base;
  };
  before(async () => {
    setup.base = await serve();
    if (host) setup.hostBase = await serve();
    if (gpu) setup.gpuBrowser = await launch({ webgpu: true });
    if (noGpu) setup.noGpuBrowser = await launch({ webgpu: false });
  });
  after(async () => {
    await setup.gpuBrowser?.close();
    await setup.noGpuBrowser?.close();
    for (const server of servers) server.close();
  });
  return setup;
}

/** Clicks `button` in `page` and saves the download in target/e2e/; resolves to its name and bytes. */
export async function download(page, button) {
  const [file] = await Promise.all([page.waitForEvent('download'), button.click()]);
  const path = join(artifacts, file.suggestedFilename());
  await file.saveAs(path);
  return { name: file.suggestedFilename(), bytes: await readFile(path) };
}
