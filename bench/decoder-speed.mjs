// A GPT-2-family decoder's pass over a text as headlab's page makes it (both of the page's wasm
// builds where Node runs relaxed SIMD: bench/builds.mjs) against transformers.js's
// AutoModelForCausalLM on an ONNX export of the same checkpoint (bench/onnx-gpt2.mjs: fp32, and the
// 8-bit file it picks by default for wasm, q8), run on onnxruntime-web's WebAssembly backend with 1
// and 2 threads, in one Node process per thread count. The model is the tests' random
// GPT-2-small-shaped checkpoint (`scripts/make-checkpoints.sh bench`: 12 layers x 12 heads,
// d_model 768, GPT-2's 50257-row vocabulary) by default, or any GPT-2 folder with a float64
// reference and a 128-token case (--model=DIR),
// converted to the page's model file by the page's loader (convert-model) and exported by
// bench/onnx-gpt2.mjs, both made here when missing. The full run has the peer's own tools make
// the graphs instead (bench/peer/convert.py: optimum's export and onnxslim, onnxruntime's
// quantizer as transformers.js's conversion calls it, and a third side, onnxruntime's transformer
// optimizer then quantized, `fused q8`); the smoke run keeps the hand-written ones. The table
// says which ran.
//
//   node --experimental-wasm-relaxed-simd bench/decoder-speed.mjs [ROUNDS] [smoke] [--model=DIR]
//
// Both sides compute the same thing: every layer over the text's tokens and the output head's
// logits at every position (headlab also each position's loss). headlab runs at f16 (its weights
// widened to f32) and at 8 bits (the page's Decoder::at_precision), each build. The text is the reference's
// 128-token case (its ids: both sides read the same tokens); each side's next-token logits are
// compared with the float64 numpy reference (tests/reference/decoders.py). headlab's decoder has
// no pass cut across threads yet: its one-thread time stands beside transformers.js's on 1 and 2.
// Full: 1 and 2 threads, 5 s of warm-up per side, ROUNDS (default 5) interleaved rounds, medians of
// times and of per-round ratios; then, one thread, headlab's 8-bit pass against the peer's 8-bit
// graphs at 8, 32 and 512 tokens. Smoke: 1 thread, 2 rounds, 1 s of warm-up.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { interleaved, median, relativeDifference } from './stats.mjs';
import { buildsNote, headlabBuilds } from './builds.mjs';
import { cpuLine } from './machine.mjs';
import { graphsLine, peerToolGraphs, prepareModel, transformersDir, transformersOn, version } from './peer.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const positional = args.filter((a) => !a.startsWith('--'));
const rounds = Number(positional[0] ?? 5);
const smoke = positional[1] === 'smoke';
const warmupMs = smoke ? 1000 : 5000;
const TOKENS = 128;
// The full run's other lengths for the 8-bit sides, one thread (the issue's 8 to 512 tokens).
const SWEEP = [8, 32, 512];

// GPT-2 small's every size (its 50 257 embedding rows too: the output head is a third of a short
// text's work) from `make-checkpoints.sh bench`; the smoke run takes the tests' GPT-2-small-shaped
// folder instead (a 427-piece vocabulary: the same blocks, a small output head), which CI makes.
const made = (which) => execFileSync(join(root, 'scripts/make-checkpoints.sh'), which ? [which] : [], { encoding: 'utf8' }).trim();
const folder = flag('model') ? resolve(flag('model')) : smoke ? join(made(), 'gpt2-small-shaped') : join(made('bench'), 'gpt2-shaped');
const modelsDir = join(root, 'target/transformers');
const modelName = basename(folder);
const assetFile = join(modelsDir, `${modelName}.headlab.bin`);

/** The reference's case of TOKENS tokens: its ids and its float64 next-token logits. */
function referenceCase() {
  const ref = JSON.parse(readFileSync(join(folder, 'reference.json'), 'utf8'));
  const found = ref.forward.find((c) => c.ids.length === TOKENS);
  if (!found) throw new Error(`${folder}/reference.json has no ${TOKENS}-token case`);
  return { ids: found.ids, logits: found.next_logits };
}

/** KL(p || q) in nats of the next-token distributions of the logits `p` (float64) and `q`. */
function klFrom(p, q) {
  const logSoftmax = (l) => {
    const max = Math.max(...l);
    const z = max + Math.log(l.reduce((s, v) => s + Math.exp(v - max), 0));
    return l.map((v) => v - z);
  };
  const [lp, lq] = [logSoftmax(p), logSoftmax(q)];
  return Math.max(0, lp.reduce((s, a, i) => s + Math.exp(a) * (a - lq[i]), 0));
}

const cosine = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
};

/** One thread count in this process: the row of the table, as JSON on stdout's last line. */
async function child(threads) {
  const { ids, logits: want } = referenceCase();
  const { transformers: { AutoModelForCausalLM, Tensor }, ortVersion, options } = await transformersOn('web', threads, modelsDir);
  // The peer's tools' graphs (bench/peer/convert.py) where the full run made them, with
  // onnxruntime's optimizer's quantized as a third side; else the hand-written export's.
  const peerTools = flag('peer-tools') === '1';
  const name = peerTools ? `${modelName}-peer` : modelName;
  const peers = {
    fp32: await AutoModelForCausalLM.from_pretrained(name, options('fp32')),
    q8: await AutoModelForCausalLM.from_pretrained(name, options('q8')),
  };
  if (peerTools) peers['fused-q8'] = await AutoModelForCausalLM.from_pretrained(name, { ...options('q8'), model_file_name: 'model_fused', device: { model_fused: '' } });
  const bytes = readFileSync(assetFile);
  // Each build at f16 (its weights widened to f32) and at 8 bits (Decoder::at_precision, as the page makes it).
  const builds = headlabBuilds().flatMap((b) => {
    const int8 = new b.lib.DecoderCase(bytes);
    int8.set_precision('int8');
    return [
      { name: b.name, label: `${b.label} f16`, model: new b.lib.DecoderCase(bytes) },
      { name: `${b.name}-int8`, label: `${b.label} 8-bit`, model: int8, int8: true },
    ];
  });
  const { idsU32, inputs } = sideInputs(ids, Tensor);
  const vocab = want.length;
  const lastRow = (t) => t.data.subarray((ids.length - 1) * vocab, ids.length * vocab);
  const runs = {
    ...Object.fromEntries(builds.map((b) => [b.name, async () => b.model.forward(idsU32)])),
    ...Object.fromEntries(Object.entries(peers).map(([k, peer]) => [k, async () => lastRow((await peer(inputs)).logits)])),
  };
  const last = await warmUp(runs, warmupMs);
  const out = Object.fromEntries(Object.entries(last).map(([k, v]) => [k, Array.from(v)]));
  const pairs = builds.flatMap((b) => Object.keys(peers).map((k) => [b.name, k]));
  const { times, ratios } = await interleaved(runs, rounds, pairs);
  const row = {
    threads,
    ms: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])),
    ratio: Object.fromEntries(builds.map((b) => [b.name, Object.fromEntries(Object.keys(peers).map((k) => [k, median(ratios[`${b.name}/${k}`])]))])),
    error: Object.fromEntries(Object.keys(runs).map((k) => [k, relativeDifference(out[k], want)])),
    cos: Object.fromEntries(Object.keys(runs).map((k) => [k, cosine(out[k], want)])),
    kl: Object.fromEntries(Object.keys(runs).map((k) => [k, klFrom(want, out[k])])),
  };
  // Where headlab's pass goes, stage by stage, for the last build at both precisions (one thread: its pass has one).
  if (threads === 1) {
    const last = builds.slice(-2);
    row.profiles = last.map((b) => `${b.label}: ${b.model.profile(idsU32, rounds)}`);
  }
  if (threads === 1 && !smoke) row.sweep = await sweep(builds.filter((b) => b.int8).at(-1), peers, ids, Tensor, vocab);
  console.error(`  ${threads} thread(s): ${Object.keys(runs).map((k) => `${k} ${row.ms[k].toFixed(1)} ms`).join(', ')}`);
  console.log(JSON.stringify({ ortVersion, builds: builds.map(({ name, label, int8 }) => ({ name, label, int8: !!int8 })), peers: Object.keys(peers), row }));
}

/** `ids` as each side takes them: headlab's u32 ids, transformers.js's int64 tensors. */
function sideInputs(ids, Tensor) {
  const n = ids.length;
  return {
    idsU32: Uint32Array.from(ids),
    inputs: {
      input_ids: new Tensor('int64', BigInt64Array.from(ids, BigInt), [1, n]),
      attention_mask: new Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]),
    },
  };
}

/** Each of `runs` again and again for `ms` of warm-up; each one's last output. */
async function warmUp(runs, ms) {
  const last = {};
  for (const [k, run] of Object.entries(runs)) {
    const t0 = performance.now();
    do last[k] = await run(); while (performance.now() - t0 < ms);
  }
  return last;
}

/** The last build at 8 bits against the peer's 8-bit graphs at the sweep's other lengths (the
 * reference text's ids repeated or cut; speed only), one thread: `[{ n, ms, ratio }]`. */
async function sweep(int8, peers, ids, Tensor, vocab) {
  const rows = [];
  for (const n of SWEEP) {
    const { idsU32, inputs } = sideInputs(Array.from({ length: n }, (_, i) => ids[i % ids.length]), Tensor);
    const eightBit = Object.keys(peers).filter((k) => k !== 'fp32');
    const runs = {
      [int8.name]: async () => int8.model.forward(idsU32),
      ...Object.fromEntries(eightBit.map((k) => [k, async () => (await peers[k](inputs)).logits.data.subarray((n - 1) * vocab)])),
    };
    await warmUp(runs, warmupMs / 2);
    const { times, ratios } = await interleaved(runs, rounds, eightBit.map((k) => [int8.name, k]));
    rows.push({
      n,
      ms: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])),
      ratio: Object.fromEntries(eightBit.map((k) => [k, median(ratios[`${int8.name}/${k}`])])),
    });
  }
  return rows;
}

/** The folder's model in a few words, from its config.json. */
function describe() {
  const c = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8'));
  return `${c.model_type}, ${c.n_layer} layers x ${c.n_head} heads, d_model ${c.n_embd}, vocabulary ${c.vocab_size}`;
}

async function main() {
  const exportDir = join(modelsDir, modelName);
  prepareModel({ root, folder, assetFile, exporter: 'onnx-gpt2.mjs', exportDir });
  // The full run's peer graphs are the peer's own tools' (a venv made on first use); the smoke
  // run keeps the hand-written ones.
  const made = smoke ? null : peerToolGraphs({ root, folder, handDir: exportDir, peerDir: `${exportDir}-peer` });
  const results = [];
  for (const threads of smoke ? [1] : [1, 2]) {
    const run = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), String(rounds), smoke ? 'smoke' : 'all', `--threads=${threads}`, `--model=${folder}`, ...(made ? ['--peer-tools=1'] : [])],
      { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 1 << 24 });
    if (run.status !== 0) throw new Error(`the run with ${threads} thread(s) failed (exit ${run.status}): ${run.stdout}`);
    results.push(JSON.parse(run.stdout.trim().split('\n').at(-1)));
  }
  const { builds, ortVersion, peers } = results[0];
  const each = (f) => builds.map(f).join(' | ');
  const eachPeer = (f) => peers.map(f).join(' | ');
  const name = (k) => k.replace('-', ' ');
  const eightBit = peers.filter((k) => k !== 'fp32');
  console.log(`${modelName} (${describe()}), a ${TOKENS}-token text, every position's logits: headlab (the page's CPU pass, 1 thread) against transformers.js ${version(transformersDir)} AutoModelForCausalLM on ${ortVersion} (wasm); ${rounds} interleaved rounds after ${warmupMs / 1000} s of warm-up per side; ${cpuLine()}; Node ${process.version}; ${new Date().toISOString().slice(0, 10)}`);
  console.log(buildsNote(builds));
  console.log(graphsLine(made));
  console.log(`| transformers.js threads | ${each((b) => `headlab ${b.label} ms`)} | ${eachPeer((k) => `${name(k)} ms`)} | ${peers.map((k) => each((b) => `${b.label} / ${name(k)}`)).join(' | ')} | logits error: headlab f16 | fp32 | next-token KL to f64: ${each((b) => b.label)} | ${eightBit.map(name).join(' | ')} |`);
  console.log(`|---:|${'---:|'.repeat(builds.length * (2 + peers.length) + peers.length + 2 + eightBit.length)}`);
  const f16Builds = builds.filter((b) => !b.int8);
  for (const { row: r } of results) {
    const worstHeadlab = Math.max(...f16Builds.map((b) => r.error[b.name]));
    console.log(`| ${r.threads} | ${each((b) => r.ms[b.name].toFixed(1))} | ${eachPeer((k) => r.ms[k].toFixed(1))} | ${peers.map((k) => each((b) => r.ratio[b.name][k].toFixed(2))).join(' | ')} | ${worstHeadlab.toExponential(1)} | ${r.error.fp32.toExponential(1)} | ${each((b) => r.kl[b.name].toExponential(1))} | ${eightBit.map((k) => r.kl[k].toExponential(1)).join(' | ')} |`);
  }
  console.log('(random weights: the KL figures say the quantizers work, not what they cost a trained model)');
  const swept = results[0].row.sweep;
  if (swept) {
    const int8 = builds.filter((b) => b.int8).at(-1);
    const eightBit = Object.keys(swept[0].ratio);
    console.log(`\nheadlab ${int8.label} against the peer's 8-bit graphs at other lengths, one thread each (the reference text's ids repeated or cut; median ms):`);
    console.log(`| tokens | headlab ${int8.label} | ${eightBit.map(name).join(' | ')} | ${eightBit.map((k) => `/ ${name(k)}`).join(' | ')} |`);
    console.log(`|---:|${'---:|'.repeat(1 + 2 * eightBit.length)}`);
    const at128 = { n: TOKENS, ms: results[0].row.ms, ratio: results[0].row.ratio[int8.name] };
    for (const r of [...swept, at128].sort((a, b) => a.n - b.n)) {
      console.log(`| ${r.n} | ${r.ms[int8.name].toFixed(1)} | ${eightBit.map((k) => r.ms[k].toFixed(1)).join(' | ')} | ${eightBit.map((k) => r.ratio[k].toFixed(2)).join(' | ')} |`);
    }
  }
  for (const profile of results[0].row.profiles ?? []) console.log(`\n${profile}`);
  const worst = Math.max(...results.map(({ row }) => Math.max(...f16Builds.map((b) => row.error[b.name]))));
  console.log(`next-token logits against the float64 reference (largest difference over the largest logit): headlab ${worst.toExponential(1)} (< 1e-5: ${worst < 1e-5 ? 'yes' : 'NO'})`);
  if (!(worst < 1e-5)) process.exitCode = 1;
}

const threads = flag('threads');
if (threads) await child(Number(threads));
else await main();
