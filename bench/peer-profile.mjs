// Where each side's time goes at 8 bits, side by side in one headless Chromium page, one thread
// each: the peer's graphs made by its own tools (bench/peer/convert.py: q8, and onnxruntime's
// optimizer's graph quantized, fused q8) run by the onnxruntime-web that transformers.js loads,
// with onnxruntime's own profiler on (every node's kernel time, printed to the console as JSON
// and summed here by operator and by stage); and headlab's encoder layer, stage by stage
// (bench_layer_profile, the relaxed build at 8 bits), on the same model at the same length.
//
//   node bench/peer-profile.mjs [ROUNDS] [--model=DIR] [--tokens=128]
//
// The built-in all-MiniLM-L6-v2 by default, or a BERT folder (the tests' BERT-base-shaped one:
// scripts/make-checkpoints.sh); its page model file and the peer's graphs are made as
// bench/transformers.mjs's full run makes them. ROUNDS (default 10) profiled runs per graph after
// 3 s of warm-up; per operator the mean over the runs. Needs the relaxed web build
// (bench/run.sh) and the peer's tools (a venv made on first use).
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, openPage, serveDist } from '../tests/e2e/harness.mjs';
import { cpuLine } from './machine.mjs';
import { graphsLine, ortWebDir, peerToolGraphs, prepareModel } from './peer.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(args.find((a) => !a.startsWith('--')) ?? 10);
const tokens = Number(flag('tokens') ?? 128);
const folder = flag('model') ? resolve(flag('model')) : null;
const modelsDir = join(root, 'target/transformers');
const modelName = folder ? basename(folder) : 'all-MiniLM-L6-v2';
const assetFile = folder ? join(modelsDir, `${modelName}.headlab.bin`) : join(root, 'target/model/minilm-f16.bin');
const build = join(root, 'target/bench-web/relaxed');
if (!existsSync(join(build, 'headlab_bg.wasm'))) throw new Error(`${build} is missing: bench/run.sh builds it`);
if (folder) prepareModel({ root, folder, assetFile, exporter: 'onnx-bert.mjs', exportDir: join(modelsDir, modelName) });
const checkpoint = folder ?? execFileSync(join(root, 'scripts/fetch-model.sh'), { encoding: 'utf8' }).trim();
const peerDir = join(modelsDir, `${modelName}-peer`);
const made = peerToolGraphs({ root, folder: checkpoint, handDir: join(modelsDir, modelName), peerDir });
const vocab = JSON.parse(await readFile(join(checkpoint, 'config.json'), 'utf8')).vocab_size;
const GRAPHS = [['q8', 'model_quantized.onnx'], ['fused q8', 'model_fused_quantized.onnx']];

/** An operator's stage, as headlab's layer profile names its stages. */
function stage(op) {
  if (/MatMulInteger|DynamicQuantizeMatMul|QAttention|QGemm/.test(op)) return 'integer products (activations quantized inside)';
  if (/QuantizeLinear|DequantizeLinear/.test(op)) return 'quantizing and dequantizing activations';
  if (/^Attention$|MultiHeadAttention|Softmax|FusedMatMul|^MatMul$/.test(op)) return 'attention in f32 (Q K^T, softmax, P V)';
  if (/Gelu|Erf/.test(op)) return 'GELU';
  if (/LayerNorm/.test(op)) return 'LayerNorms (and fused residual adds)';
  if (/^(Add|Mul|Div|Sub)$/.test(op)) return 'element-wise (biases, residuals, scales)';
  if (/Transpose|Reshape|Shape|Gather|Unsqueeze|Concat|Slice|Cast|Expand|Where|Equal|ConstantOfShape|Squeeze/.test(op)) return 'shapes, gathers and copies';
  return 'other';
}

const types = { js: 'text/javascript', mjs: 'text/javascript', wasm: 'application/wasm', onnx: 'application/octet-stream', bin: 'application/octet-stream' };
const isolated = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
async function answer(path) {
  if (path === '/profile.html') return { type: 'text/html', body: '<!doctype html><meta charset="utf-8"><title>peer profile</title>' };
  const ours = /^\/build\/(headlab(?:_bg)?\.(js|wasm))$/.exec(path);
  if (ours) return { type: types[ours[2]], body: await readFile(join(build, ours[1])) };
  if (path === '/model.bin') return { type: types.bin, body: await readFile(assetFile) };
  const graph = /^\/graphs\/([\w.]+\.onnx)$/.exec(path);
  if (graph) return { type: types.onnx, body: await readFile(join(peerDir, 'onnx', graph[1])) };
  const ort = /^\/ort\/([\w.-]+)$/.exec(path);
  if (ort) return { type: types[extname(ort[1]).slice(1)] ?? 'application/octet-stream', body: await readFile(join(ortWebDir, 'dist', ort[1])) };
  return null;
}

const app = await serveDist({ extra: async (path) => { const own = await answer(path); return own && { ...own, headers: isolated }; } });
const browser = await launch({ webgpu: false });
try {
  const { page } = await openPage(browser, `${app.base}/profile.html`);
  // onnxruntime's profiler prints each event as a line of JSON on the console.
  const events = [];
  page.on('console', (m) => {
    const text = m.text().trim().replace(/^\[|,$|\]$/g, '');
    if (text.startsWith('{"cat"')) { try { events.push(JSON.parse(text)); } catch { /* not an event */ } }
  });
  const result = await page.evaluate(async ({ graphs, rounds, tokens, vocab }) => {
    const ort = await import('/ort/ort.webgpu.bundle.min.mjs');
    Object.assign(ort.env.wasm, { wasmPaths: '/ort/', numThreads: 1, proxy: false });
    const runs = {};
    for (const [name, file] of graphs) {
      const session = await ort.InferenceSession.create(`/graphs/${file}`, { executionProviders: ['wasm'], enableProfiling: true });
      const feeds = {};
      for (const input of session.inputNames) {
        const values = BigInt64Array.from({ length: tokens }, (_, i) => (input === 'input_ids' ? BigInt(1 + ((i * 37) % (vocab - 1))) : input === 'attention_mask' ? 1n : 0n));
        feeds[input] = new ort.Tensor('int64', values, [1, tokens]);
      }
      for (const t0 = performance.now(); performance.now() - t0 < 3000;) await session.run(feeds);
      // The profiled runs (the warm-up's events are left out by their model_run spans).
      const times = [];
      for (let r = 0; r < rounds; r++) {
        const t0 = performance.now();
        await session.run(feeds);
        times.push(performance.now() - t0);
      }
      session.endProfiling();
      await session.release();
      runs[name] = times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
    }
    const m = await import('/build/headlab.js');
    await m.default({ module_or_path: '/build/headlab_bg.wasm' });
    const bytes = new Uint8Array(await (await fetch('/model.bin')).arrayBuffer());
    m.bench_int8_product(tokens, 384, 384, 3);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const form = m.bench_dot_form('retime');
    m.bench_layer_profile(bytes, new Uint32Array([tokens]), 2, 'int8');
    const headlab = m.bench_layer_profile(bytes, new Uint32Array([tokens]), rounds, 'int8');
    return { runs, headlab, form, agent: navigator.userAgent };
  }, { graphs: GRAPHS, rounds, tokens, vocab });
  // Each graph's events: its session's node events from its last `rounds` runs (the profiler
  // names each run "model_run"; the warm-up's come first).
  console.log(`${modelName}, ${tokens} tokens, one thread each, headless Chromium (${/Chrom(e|ium)\/[\d.]+/.exec(result.agent)?.[0]}); ${cpuLine()}; ${new Date().toISOString().slice(0, 10)}`);
  console.log(graphsLine(made));
  const sessions = splitBySession(events, GRAPHS.length);
  for (const [i, [name]] of GRAPHS.entries()) {
    const evs = sessions[i];
    const runsOf = evs.filter((e) => e.cat === 'Session' && e.name === 'model_run').slice(-rounds);
    const from = runsOf[0]?.ts ?? 0;
    const nodes = evs.filter((e) => e.cat === 'Node' && e.ts >= from && e.name.endsWith('_kernel_time'));
    const byOp = new Map();
    for (const e of nodes) byOp.set(e.args.op_name, (byOp.get(e.args.op_name) ?? 0) + e.dur / 1000 / runsOf.length);
    const total = [...byOp.values()].reduce((s, v) => s + v, 0);
    const runMs = runsOf.reduce((s, e) => s + e.dur / 1000, 0) / runsOf.length;
    console.log(`\ntransformers.js ${name} (${GRAPHS[i][1]}): a run ${result.runs[name].toFixed(1)} ms (median, unprofiled clock), ${runMs.toFixed(1)} ms as the profiler times it, ${total.toFixed(1)} ms in kernels; mean per run over ${runsOf.length} runs`);
    const byStage = new Map();
    for (const [op, ms] of byOp) byStage.set(stage(op), [...(byStage.get(stage(op)) ?? []), [op, ms]]);
    console.log('| stage | operators (ms per run) | ms | share |');
    console.log('|---|---|---:|---:|');
    for (const [s, ops] of [...byStage].sort((a, b) => sum(b[1]) - sum(a[1]))) {
      const list = ops.sort((a, b) => b[1] - a[1]).map(([op, ms]) => `${op} ${ms.toFixed(2)}`).join(', ');
      console.log(`| ${s} | ${list} | ${sum(ops).toFixed(1)} | ${((100 * sum(ops)) / total).toFixed(0)} % |`);
    }
  }
  console.log(`\nheadlab, the relaxed build at 8 bits (its products in the ${result.form} form), one layer:\n${result.headlab}`);
} finally {
  await browser.close();
  app.server.close();
}

function sum(ops) {
  return ops.reduce((s, [, ms]) => s + ms, 0);
}

/** The events cut into one list per session, in order: each session's begin with its
 * "model_loading_array" event. */
function splitBySession(events, count) {
  const out = [];
  for (const e of events) {
    if (e.cat === 'Session' && e.name.startsWith('model_loading')) out.push([]);
    out.at(-1)?.push(e);
  }
  if (out.length !== count) throw new Error(`${out.length} profiled sessions on the console, ${count} expected`);
  return out;
}
