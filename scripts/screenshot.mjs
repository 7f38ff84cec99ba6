// The README's screenshot: the built page (dist/, from `trunk build --release`) at BERT-base with
// four heads pruned and one enlarged, after its WebGPU pass, in headless Chromium; the top of
// the page at 1600 x 1000 CSS pixels.
//   node scripts/screenshot.mjs [OUT.jpg] [DEVICE_PIXEL_RATIO]
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';

const out = process.argv[2] ?? 'docs/screenshot.jpg';
const scale = Number(process.argv[3] ?? 1);
const app = await serveDist();
const browser = await launch({ webgpu: true });
const { page, problems } = await openPage(browser, `${app.base}/?preset=bert-base&seq=12&theme=light&pruned=2,5,8,10`, {
  viewport: { width: 1600, height: 1000 },
  deviceScaleFactor: scale,
});
await page.waitForFunction(() => /^Forward pass on WebGPU/.test(document.querySelector('[data-testid=timing]')?.textContent ?? ''), null, { timeout: 60000 });
await page.getByTestId('heatmap-4').click();
await page.evaluate(() => window.scrollTo(0, 0));
await page.waitForTimeout(300);
await page.screenshot({ path: out, type: out.endsWith('.png') ? 'png' : 'jpeg', quality: out.endsWith('.png') ? undefined : 80 });
console.log(`${out}: ${problems.length ? problems.join('; ') : 'no problems'}`);
await browser.close();
app.server.close();
