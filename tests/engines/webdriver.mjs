// The three browser engines through standard WebDriver (selenium-webdriver, one client for all):
// Chromium with chromedriver, Firefox ESR with geckodriver, and WebKitGTK's MiniBrowser with
// WebKitWebDriver (under Xvfb: WebKitGTK has no headless mode). Each engine's driver is started
// here on a free loopback port and spoken to with plain W3C WebDriver, so no driver is downloaded.
// Also the test server: dist/ with a probe script injected into every page (probe.js).
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { extname, join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');
export const artifacts = join(root, 'target/e2e/engines');
const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const require = createRequire(join(toolsDir, 'package.json'));
const { By, WebDriver } = require('selenium-webdriver');
const http = require('selenium-webdriver/http');
export { By };

const chromiumArgs = ['--headless=new', '--no-sandbox', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
  '--enable-unsafe-webgpu', '--window-size=1400,1000'];

/** How each engine is started: its driver's command line and the session's capabilities. */
export const ENGINES = {
  chromium: {
    driver: (port) => [process.env.CHROMEDRIVER ?? '/usr/bin/chromedriver', `--port=${port}`],
    capabilities: {
      browserName: 'chrome',
      'goog:chromeOptions': { binary: process.env.CHROMIUM ?? '/usr/bin/chromium', args: chromiumArgs },
    },
  },
  firefox: {
    driver: (port) => [process.env.GECKODRIVER ?? 'geckodriver', `--port=${port}`, '--log=error'],
    capabilities: {
      browserName: 'firefox',
      'moz:firefoxOptions': {
        binary: process.env.FIREFOX ?? '/usr/bin/firefox-esr',
        args: ['-headless', '-width=1400', '-height=1000'],
        // No update checks, telemetry or remote settings: the page's origin is the only network.
        prefs: {
          'app.update.enabled': false, 'browser.shell.checkDefaultBrowser': false,
          'datareporting.policy.dataSubmissionEnabled': false, 'toolkit.telemetry.enabled': false,
          'network.connectivity-service.enabled': false, 'browser.safebrowsing.update.enabled': false,
        },
      },
    },
  },
  webkit: {
    // WebKitGTK's MiniBrowser needs a display: xvfb-run gives it a virtual one.
    driver: (port) => ['xvfb-run', '-a', '-s', '-screen 0 1400x1000x24', process.env.WEBKITWEBDRIVER ?? 'WebKitWebDriver', `--port=${port}`],
    capabilities: { 'webkitgtk:browserOptions': { args: ['--automation'] } },
  },
};

const freePort = () => new Promise((ok) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => ok(port));
  });
});

/** Starts `name`'s driver and a session on it; resolves to { driver, engine, version, stop }. */
export async function startEngine(name) {
  const spec = ENGINES[name];
  const port = await freePort();
  const [cmd, ...args] = spec.driver(port);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      const status = await (await fetch(`${url}/status`)).json();
      if (status.value?.ready !== false) break;
    } catch { /* not listening yet */ }
    if (i > 150 || proc.exitCode !== null) throw new Error(`${name}: ${cmd} did not start: ${stderr}`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
  const executor = new http.Executor(new http.HttpClient(url));
  const driver = await WebDriver.createSession(executor, spec.capabilities);
  await driver.manage().setTimeouts({ script: 120000, pageLoad: 60000 });
  // Chromium and Firefox take their window size from the command line; WebKit from here.
  if (name === 'webkit') await driver.manage().window().setRect({ width: 1400, height: 1000 });
  const caps = await driver.getCapabilities();
  const stop = async () => {
    await driver.quit().catch(() => {});
    try { process.kill(-proc.pid, 'SIGTERM'); } catch { /* already gone */ }
  };
  return { driver, engine: name, browser: caps.get('browserName'), version: caps.get('browserVersion'), stop };
}

const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
const probeTag = '<script src="/__headlab_probe.js"></script>';

/** Serves dist/ on a free loopback port, with probe.js first in every HTML page after its CSP. */
export async function serveDist() {
  const dist = join(root, 'dist');
  const probe = await readFile(join(import.meta.dirname, 'probe.js'));
  const server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (path === '/__headlab_probe.js') return res.writeHead(200, { 'content-type': types['.js'] }).end(probe);
    // A phone's screen for engines whose windows cannot be that narrow: the page in a 390 px frame.
    if (path === '/__phone.html') {
      const src = new URL(req.url, 'http://x').searchParams.get('src') ?? '/';
      return res.writeHead(200, { 'content-type': types['.html'] })
        .end(`<!doctype html><title>phone</title><iframe data-testid="phone" src="${src.replace(/"/g, '')}" style="width:390px;height:900px;border:0"></iframe>`);
    }
    const file = join(dist, path === '/' ? 'index.html' : path);
    try {
      let body = await readFile(file);
      if (extname(file) === '.html') {
        const html = body.toString();
        const csp = html.match(/<meta\s+http-equiv="Content-Security-Policy"[^>]*>/);
        if (!csp) throw new Error(`${path} has no CSP meta tag`);
        body = html.replace(csp[0], `${csp[0]}\n${probeTag}`);
      }
      res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch (e) {
      res.writeHead(e.code === 'ENOENT' ? 404 : 500).end(String(e.message));
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  await mkdir(artifacts, { recursive: true });
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

/** Saves the viewport as target/e2e/engines/<engine>-<what>.png. */
export async function screenshot({ driver, engine }, what) {
  await writeFile(join(artifacts, `${engine}-${what}.png`), Buffer.from(await driver.takeScreenshot(), 'base64'));
}
