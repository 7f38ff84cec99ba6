// A decoder's first complete perplexity curves (Michel et al.'s three orders on the shipped
// Moby-Dick passages: every point of each) as a reader gets them: the built page in headless
// Chromium, the decoder served beside it (?model=), "Compute the three pruning curves" clicked,
// timed from the click to the curves on show; once on the page's own thread (?threads=1) and once
// on two web workers (?threads=2), side by side in one run, rounds interleaved. Both must give the
// same numbers, bit for bit (the same pieces run the same wasm wherever they run). The model is
// GPT-2 small's shape with its 50 257-row vocabulary (`scripts/make-checkpoints.sh bench`,
// random weights: the time does not depend on them), or any decoder folder under one root
// (--model=DIR). Prints the CPU model and the ratio workers / page's thread (target: at most
// 0.55 with two workers). Needs the release build (`trunk build --release`).
//
//   node bench/decoder-curves.mjs [ROUNDS] [smoke] [--model=DIR] [--precision=int8] [--threads=2]
//
// --precision=int8: the page at 8 bits (?precision=int8: its workers hold the 8-bit copy).
// --threads=N: one side only (1: the page's thread; 2: two workers), no ratio: for a model whose
// page-thread run would take the better part of an hour (gpt2-medium's shape:
// `scripts/make-checkpoints.sh large`).
//
// Smoke: the tests' gpt2-odd folder (2 layers of 4 heads, seconds a run), one round: the script
// and the page's controls still work.
import { execFileSync } from 'node:child_process';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuLine } from './machine.mjs';
import { median } from './stats.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const positional = args.filter((a) => !a.startsWith('--'));
const rounds = Number(positional[0] ?? 1);
const smoke = positional[1] === 'smoke';
const made = (which) =>
  execFileSync(join(root, 'scripts/make-checkpoints.sh'), which ? [which] : [], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
const folder = flag('model') ? resolve(flag('model')) : smoke ? join(made(), 'gpt2-odd') : join(made('bench'), 'gpt2-shaped');
// The page's server serves the folders under one root as /__checkpoints/ (tests/e2e/serve.mjs).
process.env.HEADLAB_CHECKPOINTS = dirname(folder);
const { launch, openPage, serveDist } = await import('../tests/e2e/harness.mjs');
const { CHECKPOINTS_PATH } = await import('../tests/e2e/serve.mjs');
const LONG = 3_600_000;

/** One run of the curves with `threads` threads: seconds from the click to the curves, and their JSON. */
async function run(browser, base, threads) {
  const precision = flag('precision') ? `&precision=${flag('precision')}` : '';
  const query = `?backend=cpu&threads=${threads}${precision}&model=${encodeURIComponent(CHECKPOINTS_PATH + basename(folder))}`;
  const { page, problems } = await openPage(browser, `${base}/${query}`);
  const run = page.getByTestId('decoder-curves-run');
  await run.waitFor({ timeout: LONG });
  await page.waitForFunction(() => !document.querySelector('[data-testid=decoder-curves-run]').disabled, null, { timeout: LONG });
  const t0 = Date.now();
  await run.click();
  const handle = await page.waitForFunction(
    () => document.querySelector('[data-testid=decoder-curves-chart]')?.getAttribute('data-curves'),
    null,
    { polling: 50, timeout: LONG },
  );
  const seconds = (Date.now() - t0) / 1000;
  const curves = await handle.jsonValue();
  const where = await page.getByTestId('trained-backend').textContent();
  await page.close();
  // A served folder is asked for every file a folder may have: those it lacks answer 404.
  const real = problems.filter((p) => !/status of 404/.test(p));
  if (real.length) throw new Error(`the page reported problems: ${real.join('; ')}`);
  return { seconds, curves, where };
}

const server = await serveDist();
const browser = await launch({ webgpu: false });
try {
  console.log(cpuLine());
  const only = flag('threads') ? [Number(flag('threads'))] : null;
  if (only && ![1, 2].includes(only[0])) throw new Error(`--threads=${flag('threads')}: 1 or 2`);
  const sides = only ? (only[0] === 1 ? "the page's thread only" : 'two workers only') : "the page's thread and two workers interleaved";
  console.log(`Chromium ${browser.version()} headless; ${basename(folder)} at ${flag('precision') ?? 'f16'}; ${rounds} round${rounds === 1 ? '' : 's'}, ${sides}`);
  const times = { 1: [], 2: [] };
  let first;
  for (let r = 0; r < rounds; r++) {
    for (const threads of only ?? (r % 2 === 0 ? [1, 2] : [2, 1])) {
      const done = await run(browser, server.base, threads);
      first ??= done.curves;
      if (done.curves !== first) throw new Error(`${threads} thread(s) gave other curves than the first run:\n${done.curves}\n${first}`);
      times[threads].push(done.seconds);
      console.log(`round ${r + 1}, ${threads === 1 ? "the page's thread" : 'two workers'}: ${done.seconds.toFixed(1)} s (${done.where.replace(/^Your text runs on .*?; the measurements/, 'the measurements')})`);
    }
  }
  const summary = JSON.parse(first);
  const side = (t) => (t.length ? `${median(t).toFixed(1)} s` : '-');
  const ratios = only ? [] : times[2].map((t, i) => t / times[1][i]);
  const ratio = only ? '-' : `${median(ratios).toFixed(3)} (each round: ${ratios.map((x) => x.toFixed(3)).join(', ')})`;
  console.log(`\n| curves (${summary.ks.length} points x 3 orders, ${summary.passages} passages) | page's thread | two workers | workers / page's thread |`);
  console.log('|---|---|---|---|');
  console.log(`| ${basename(folder)} | ${side(times[1])} | ${side(times[2])} | ${ratio} |`);
  if (!only) console.log('\nthe same curves, bit for bit, on both');
} finally {
  await browser.close();
  server.server.close();
}
