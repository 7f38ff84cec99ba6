// headlab's wasm multi-head attention against onnxruntime-web's wasm backend, single thread,
// same inputs and weights, interleaved rounds: in one Node process, or with --browser in one page
// of headless Chromium (what a reader's browser runs: its V8 is newer than Node 20's, and runs
// relaxed SIMD without a flag).
//   node --experimental-wasm-relaxed-simd bench/ort.mjs [ROUNDS] [SHAPES]
//   node bench/ort.mjs [ROUNDS] [SHAPES] --browser
// (bench/run.sh builds the wasm first: target/bench-node* for Node, target/bench-web/ for the
// page). Both of the page's builds run where the engine validates relaxed SIMD (in Node, with the
// flag; bench/builds.mjs): simd128, and relaxed SIMD, which Chromium and Firefox load.
// SHAPES: "all" (Transformer 512/8, BERT-base 768/12, GPT-2 Large 1280/20 at n = 16, 64, 128,
// 512) or "smoke" (BERT-base at n = 128). Prints a Markdown table: median times, the median of
// per-round time ratios (headlab / onnxruntime), GFLOP/s, and each output's error against the
// naive f64 oracle, for each build; then where each build's time goes at BERT-base n = 128.
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { mhaModel } from './onnx.mjs';
import { interleaved, median } from './stats.mjs';
import { buildsNote, headlabBuilds } from './builds.mjs';
import { cpuLine } from './machine.mjs';
import { measureShape, profiles } from './mha-peer.mjs';

const browser = process.argv.includes('--browser');
const [roundsArg, shapesArg] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const rounds = Number(roundsArg ?? 15);
const shapes = shapesArg === 'smoke'
  ? [['BERT-base', 768, 12, [128]]]
  : [['Transformer', 512, 8, [16, 64, 128, 512]], ['BERT-base', 768, 12, [16, 64, 128, 512]],
    ['GPT-2 Large', 1280, 20, [16, 64, 128, 512]]];
const cases = shapes.flatMap(([name, d, h, lengths]) => lengths.map((n) => ({ name, d, h, n, rounds })));
const profiled = { d: 768, h: 12, n: 128, rounds };
const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');
const ortDir = join(toolsDir, 'node_modules/onnxruntime-web');
const ortVersion = JSON.parse(await readFile(join(ortDir, 'package.json'), 'utf8')).version;

const { builds, engine, rows, profile } = browser ? await inChromium() : await inNode();
console.log(`MHA forward, single thread, ${rounds} interleaved rounds; ${cpuLine()}; ${engine}, onnxruntime-web ${ortVersion}`);
console.log(buildsNote(builds));
// Per build: its time, its ratios to both graphs, its GFLOP/s and its error.
const perBuild = (f) => builds.map((b) => f(b)).join(' | ');
console.log(`| shape | n | ${perBuild((b) => `headlab ${b.label} ms`)} | ORT ms | ORT fused ms | ${perBuild((b) => `${b.label} / ORT | ${b.label} / ORT fused`)} | ${perBuild((b) => `${b.label} GFLOP/s`)} | ${perBuild((b) => `error ${b.label}`)} | error ORT | error ORT fused |`);
console.log(`|---|---:|${'---:|'.repeat(2 + builds.length * 5 + 2)}`);
for (const { name, d, h, n, times, ratios, errors, flops, fusedError } of rows) {
  if (fusedError) console.error(`fused Attention op unavailable: ${fusedError}`);
  const ms = (k) => (times[k]?.length ? median(times[k]).toFixed(2) : '-');
  const rt = (b, k) => (ratios[`${b}/${k}`]?.length ? median(ratios[`${b}/${k}`]).toFixed(2) : '-');
  const error = (k) => (k in errors ? errors[k].toExponential(1) : '-');
  const gflops = (b) => (flops / 1e6 / median(times[b])).toFixed(1);
  const each = (f) => builds.map((b) => f(b.name)).join(' | ');
  console.log(`| ${name} ${d}/${h} | ${n} | ${each(ms)} | ${ms('ort')} | ${ms('fused')} | ${each((b) => `${rt(b, 'ort')} | ${rt(b, 'fused')}`)} | ${each(gflops)} | ${each(error)} | ${error('ort')} | ${error('fused')} |`);
}
for (const b of builds) console.log(`\n${profile[b.name]}`);

/** Every shape in this Node process. */
async function inNode() {
  const builds = headlabBuilds();
  const ort = createRequire(join(toolsDir, 'package.json'))('onnxruntime-web');
  Object.assign(ort.env.wasm, { numThreads: 1, simd: true, proxy: false });
  ort.env.logLevel = 'error';
  const libs = Object.fromEntries(builds.map((b) => [b.name, b.lib]));
  const rows = [];
  for (const c of cases) rows.push({ ...c, ...(await measureShape({ libs, ort, mhaModel, interleaved }, c)) });
  return { builds, engine: `Node ${process.version}`, rows, profile: profiles(libs, profiled) };
}

/** Every shape in one page of headless Chromium: both builds (target/bench-web/) and
 * onnxruntime-web's wasm bundle, loaded as a reader's page would load them. */
async function inChromium() {
  const { launch, openPage, root, serveDist } = await import('../tests/e2e/harness.mjs');
  const types = { js: 'text/javascript', mjs: 'text/javascript', wasm: 'application/wasm' };
  const benchModules = ['mha-peer.mjs', 'onnx.mjs', 'protobuf.mjs', 'stats.mjs'];
  const app = await serveDist({
    extra: async (path) => {
      if (path === '/bench.html') return { type: 'text/html', body: '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>MHA against onnxruntime-web</title>' };
      const build = /^\/(simd128|relaxed)\/(headlab(?:_bg)?\.(js|wasm))$/.exec(path);
      if (build) return { type: types[build[3]], body: await readFile(join(root, 'target/bench-web', build[1], build[2])) };
      const own = /^\/bench\/([\w-]+\.mjs)$/.exec(path);
      if (own && benchModules.includes(own[1])) return { type: types.mjs, body: await readFile(join(root, 'bench', own[1])) };
      const runtime = /^\/ort\/(ort\.wasm\.min\.mjs|ort-wasm-simd-threaded\.(mjs|wasm))$/.exec(path);
      if (runtime) return { type: types[runtime[2] ?? 'mjs'], body: await readFile(join(ortDir, 'dist', runtime[1])) };
      return null;
    },
  });
  const chromium = await launch({ webgpu: false });
  try {
    const { page, problems } = await openPage(chromium, `${app.base}/bench.html`);
    const result = await page.evaluate(async ({ cases, profiled }) => {
      const { measureShape, profiles } = await import('/bench/mha-peer.mjs');
      const { mhaModel } = await import('/bench/onnx.mjs');
      const { interleaved } = await import('/bench/stats.mjs');
      const ort = await import('/ort/ort.wasm.min.mjs');
      Object.assign(ort.env.wasm, { wasmPaths: '/ort/', numThreads: 1, proxy: false });
      ort.env.logLevel = 'error';
      const libs = {};
      for (const b of ['simd128', 'relaxed']) {
        libs[b] = await import(`/${b}/headlab.js`);
        await libs[b].default({ module_or_path: `/${b}/headlab_bg.wasm` });
      }
      const rows = [];
      for (const c of cases) rows.push({ ...c, ...(await measureShape({ libs, ort, mhaModel, interleaved }, c)) });
      return { rows, profile: profiles(libs, profiled), agent: navigator.userAgent };
    }, { cases, profiled });
    if (problems.length) throw new Error(`the benchmark's page: ${problems.join('; ')}`);
    const builds = [{ name: 'simd128', label: 'simd128' }, { name: 'relaxed', label: 'relaxed SIMD' }];
    return { builds, engine: `headless ${/Chrom(e|ium)\/[\d.]+/.exec(result.agent)?.[0]}`, rows: result.rows, profile: result.profile };
  } finally {
    await chromium.close();
    app.server.close();
  }
}
