// What both end-to-end suites share without a browser driver: the static server for the built
// page (dist/), and the in-page check that heatmaps are drawn. tests/e2e/ uses them through
// harness.mjs (Playwright), tests/engines/ through webdriver.mjs (WebDriver).
import { createServer } from 'node:http';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
import { extname, join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');
/** Where the page finds the test checkpoints, and where they are on disk. */
export const CHECKPOINTS_PATH = '/__checkpoints/';
/** A path the server redirects to the same checkpoints on another origin (localhost for 127.0.0.1). */
export const REDIRECT_PATH = '/__redirect/';
/** The paths asked for on that other origin: a page that followed the redirect would be here. */
export const followedRedirects = [];
export const checkpoints = process.env.HEADLAB_CHECKPOINTS ?? join(root, 'target/checkpoints');
export const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };

/**
 * Serves dist/ (or `dist`) on a free loopback port; resolves to { server, base }. `extra(path, url)` may
 * answer a path itself (resolve to { type, body, headers? }) and `html(path, text)` may rewrite each page.
 */
export async function serveDist({ extra = async () => null, html = (_, text) => text, artifacts = join(root, 'target/e2e'), dist = join(root, 'dist') } = {}) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    if (req.headers.host?.startsWith('localhost')) followedRedirects.push(url.pathname);
    try {
      const own = await extra(url.pathname, url);
      if (own) return res.writeHead(200, { 'content-type': own.type, ...own.headers }).end(own.body);
      if (url.pathname.startsWith(REDIRECT_PATH)) {
        const elsewhere = `http://localhost:${server.address().port}${CHECKPOINTS_PATH}${url.pathname.slice(REDIRECT_PATH.length)}`;
        return res.writeHead(302, { location: elsewhere }).end();
      }
      // The random checkpoints scripts/make-checkpoints.sh makes, served as a handbook would
      // serve a model folder beside the page (?model=/__checkpoints/<name>).
      const file = url.pathname.startsWith(CHECKPOINTS_PATH)
        ? join(checkpoints, decodeURIComponent(url.pathname.slice(CHECKPOINTS_PATH.length)))
        : join(dist, url.pathname === '/' ? 'index.html' : url.pathname);
      const type = types[extname(file)] ?? 'application/octet-stream';
      // One byte range, as static servers answer them (the page reads a checkpoint's tensors
      // so), read alone from the file: a tensor of a large model is not a read of all of it.
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (range || req.method === 'HEAD') {
        const { size } = await stat(file);
        const headers = { 'content-type': type, 'accept-ranges': 'bytes', 'content-length': size };
        if (req.method === 'HEAD') return res.writeHead(200, headers).end();
        const [start, end] = [Number(range[1]), Math.min(Number(range[2]), size - 1)];
        if (start > end) return res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
        const part = Buffer.alloc(end - start + 1);
        const handle = await open(file);
        try {
          await handle.read(part, 0, part.length, start);
        } finally {
          await handle.close();
        }
        return res.writeHead(206, { ...headers, 'content-length': part.length, 'content-range': `bytes ${start}-${end}/${size}` }).end(part);
      }
      let body = await readFile(file);
      if (extname(file) === '.html') body = html(url.pathname, body.toString());
      res.writeHead(200, { 'content-type': type, 'accept-ranges': 'bytes', 'content-length': body.length }).end(body);
    } catch (e) {
      res.writeHead(['ENOENT', 'EISDIR'].includes(e.code) ? 404 : 500).end(['ENOENT', 'EISDIR'].includes(e.code) ? '' : String(e.message));
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  await mkdir(artifacts, { recursive: true });
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

/**
 * In the page: the number of heatmap canvases drawn at n x n with more than one colour (a 1x1
 * heatmap is one colour by definition). Self-contained, so either driver can run its source.
 */
export function countDrawnHeatmaps(n) {
  return [...document.querySelectorAll('canvas.heatmap')].filter((c) => {
    if (c.width !== n || c.height !== n) return false;
    const px = c.getContext('2d').getImageData(0, 0, n, n).data;
    for (let i = 4; i < px.length; i += 4) if (px[i] !== px[0] || px[i + 1] !== px[1]) return true;
    return n === 1;
  }).length;
}
