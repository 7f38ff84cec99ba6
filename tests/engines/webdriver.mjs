// The three browser engines through standard WebDriver (selenium-webdriver, one client for all):
// Chromium with chromedriver, Firefox ESR with geckodriver, and WebKitGTK's MiniBrowser with
// WebKitWebDriver (under Xvfb: WebKitGTK has no headless mode). Each engine's driver is started
// here on a free loopback port and spoken to with plain W3C WebDriver, so no driver is downloaded.
// Also the test server: dist/ with a probe script injected into every page (probe.js).
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { root, serveDist as serveShared, types } from '../e2e/serve.mjs';

export { countDrawnHeatmaps } from '../e2e/serve.mjs';
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

const probeTag = '<script src="/__headlab_probe.js"></script>';

/**
 * Serves dist/ with probe.js first in every HTML page after its CSP, and /__phone.html: the page
 * in a 390 px frame, a phone's screen for engines whose windows cannot be that narrow.
 */
export async function serveDist() {
  const probe = await readFile(join(import.meta.dirname, 'probe.js'));
  const extra = async (path, url) => {
    if (path === '/__headlab_probe.js') return { type: types['.js'], body: probe };
    if (path !== '/__phone.html') return null;
    const src = (url.searchParams.get('src') ?? '/').replace(/"/g, '');
    return { type: types['.html'], body: `<!doctype html><title>phone</title><iframe data-testid="phone" src="${src}" style="width:390px;height:900px;border:0"></iframe>` };
  };
  const html = (path, text) => {
    const csp = text.match(/<meta\s+http-equiv="Content-Security-Policy"[^>]*>/);
    if (!csp) throw new Error(`${path} has no CSP meta tag`);
    return text.replace(csp[0], `${csp[0]}\n${probeTag}`);
  };
  return serveShared({ extra, html, artifacts });
}

/** Saves the viewport as target/e2e/engines/<engine>-<what>.png. */
export async function screenshot({ driver, engine }, what) {
  await writeFile(join(artifacts, `${engine}-${what}.png`), Buffer.from(await driver.takeScreenshot(), 'base64'));
}
