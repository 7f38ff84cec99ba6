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
// compared with the float64 numpy reference (tests/reference/decoders.py). With two threads,
// headlab's pass is also cut across this thread and a worker thread (src/model/decoder/sharded.rs:
// each holds half the heads, feed-forward units and vocabulary rows; the rows of each step pass
// through shared memory), at both precisions of the last build.
// Full: 1 and 2 threads, 5 s of warm-up per side, ROUNDS (default 5) interleaved rounds, medians of
// times and of per-round ratios; then, one thread, headlab's 8-bit pass against the peer's 8-bit
// graphs at 8, 32 and 512 tokens. Smoke: 1 thread, 2 rounds, 1 s of warm-up (the cut pass
// still runs, for its numbers: its time beside a one-thread peer is no target).
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
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
      { name: b.name, label: `${b.label} f16`, model: new b.lib.DecoderCase(bytes), build: b },
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
  // The cut pass: two threads with transformers.js's two (and in the smoke run, to check it).
  const cut = threads === 2 || smoke ? await cutSides(builds.slice(-2), bytes, idsU32) : null;
  if (cut) Object.assign(runs, cut.runs);
  const last = await warmUp(runs, warmupMs);
  const out = Object.fromEntries(Object.entries(last).map(([k, v]) => [k, Array.from(v)]));
  const pairs = [...builds, ...(cut?.sides ?? [])].flatMap((b) => Object.keys(peers).map((k) => [b.name, k]));
  for (const side of cut?.sides ?? []) pairs.push([side.of, side.name]);
  const { times, ratios } = await interleaved(runs, rounds, pairs);
  const row = {
    threads,
    ms: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])),
    ratio: Object.fromEntries([...builds, ...(cut?.sides ?? [])].map((b) => [b.name, Object.fromEntries(Object.keys(peers).map((k) => [k, median(ratios[`${b.name}/${k}`])]))])),
    cut: cut && cut.sides.map((side) => ({ ...side, gain: median(ratios[`${side.of}/${side.name}`]), lossDiff: cut.lossDiff(side) })),
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
  cut?.stop();
  console.error(`  ${threads} thread(s): ${Object.keys(runs).map((k) => `${k} ${row.ms[k].toFixed(1)} ms`).join(', ')}`);
  console.log(JSON.stringify({ ortVersion, builds: builds.map(({ name, label, int8 }) => ({ name, label, int8: !!int8 })), peers: Object.keys(peers), row }));
}

// The worker thread holding the second shard of headlab's cut pass, at both precisions. It
// serves steps from shared memory: it spins, then sleeps, on the request word, runs the step
// written there on the input beside it, writes its part after the input and publishes the
// request's number as done (bench/int8.mjs's page worker, as a Node worker thread).
const shardWorker = `const { workerData, parentPort } = require('node:worker_threads');
const { path, bytes, form, words, values, targets, capacity } = workerData;
const lib = require(path);
lib.bench_dot_form(form);
const shards = { f16: new lib.DecoderShard(bytes, 1, 2, 'f16'), int8: new lib.DecoderShard(bytes, 1, 2, 'int8') };
parentPort.postMessage('ready');
// words: [0] the request's number (-1: stop), [1] the last one done (minus it: failed), [2] its
// step, [3] its input's length, [4] its precision (1: 8-bit), [5] the text's next tokens.
for (let seen = 0; ; ) {
  const until = performance.now() + 1;
  while (Atomics.load(words, 0) === seen && performance.now() < until);
  Atomics.wait(words, 0, seen);
  seen = Atomics.load(words, 0);
  if (seen < 0) break;
  try {
    const shard = shards[words[4] ? 'int8' : 'f16'];
    values.set(shard.run_view(words[2], values.subarray(0, words[3]), targets.subarray(0, words[5])), capacity);
    Atomics.store(words, 1, seen);
  } catch (e) {
    Atomics.store(words, 1, -seen);
    parentPort.postMessage(String(e));
  }
}`;

/** headlab's pass over `idsU32` cut across this thread and a worker thread, for each of
 * `models` (the last build at f16 and at 8 bits): `{ runs, sides, lossDiff, stop }`, `sides`
 * naming each cut run and the one-thread run it is timed against. */
async function cutSides(models, bytes, idsU32) {
  const c = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8'));
  const capacity = c.n_positions * c.n_embd + c.vocab_size;
  const words = new Int32Array(new SharedArrayBuffer(6 * 4));
  const values = new Float32Array(new SharedArrayBuffer(2 * capacity * 4));
  const targets = new Uint32Array(new SharedArrayBuffer(4 * c.n_positions));
  // The build both shards run (the f16 entry carries it).
  const { lib, folder: buildDir } = models[0].build;
  const form = lib.bench_dot_form('retime');
  const path = join(root, 'target', buildDir, 'headlab.js');
  const worker = new Worker(shardWorker, { eval: true, workerData: { path, bytes, form, words, values, targets, capacity } });
  const failures = [];
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  worker.on('message', (m) => failures.push(m));
  let request = 0;
  const pass = (model, int8) => {
    model.split_begin(idsU32, 2);
    targets.set(idsU32.subarray(1));
    words[5] = idsU32.length - 1;
    for (let code = model.split_step(); code >= 0; code = model.split_step()) {
      // A view on this instance's memory, copied at once: no new array per step.
      const x = model.split_input_view();
      values.set(x);
      words[2] = code;
      words[3] = x.length;
      words[4] = int8 ? 1 : 0;
      Atomics.store(words, 0, ++request);
      Atomics.notify(words, 0);
      model.split_local();
      // This thread may not sleep: it spins until the worker's part is there.
      for (let done; (done = Atomics.load(words, 1)) !== request; ) {
        if (done === -request) throw new Error(`the shard worker failed on step ${code}: ${failures.join('; ')}`);
      }
      model.split_absorb(values.subarray(capacity, capacity + model.split_others_len()));
    }
    return model.split_next_logits();
  };
  const sides = models.map((b) => ({ name: `${b.name}-cut`, label: `${b.label}, cut across 2 threads`, of: b.name, int8: !!b.int8 }));
  const runs = Object.fromEntries(sides.map((side, i) => [side.name, async () => pass(models[i].model, side.int8)]));
  // The cut pass's losses and the same precision's one-thread pass's against the f16 one-thread
  // pass's (largest difference, nats): at f16 the cut regroups sums; at 8 bits each thread also
  // quantizes its own part of W_proj's and W_mlp's inputs, so it is held to the 8-bit pass's own
  // distance from f16.
  const lossDiff = (side) => {
    const model = models[sides.indexOf(side)].model;
    const f16 = models[0].model.losses(idsU32);
    const off = (losses) => Math.max(...f16.map((v, i) => Math.abs(v - losses[i])));
    pass(model, side.int8);
    return { cut: off(model.split_losses()), whole: off(model.losses(idsU32)) };
  };
  const stop = () => {
    Atomics.store(words, 0, -1);
    Atomics.notify(words, 0);
    worker.terminate();
  };
  return { runs, sides, lossDiff, stop };
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
  const cutRow = results.find(({ row }) => row.cut)?.row;
  if (cutRow) printCut(cutRow, eightBit, name);
  for (const profile of results[0].row.profiles ?? []) console.log(`\n${profile}`);
  const cutF16 = (row) => (row.cut ?? []).filter((side) => !side.int8).map((side) => row.error[side.name]);
  const worst = Math.max(...results.map(({ row }) => Math.max(...f16Builds.map((b) => row.error[b.name]), ...cutF16(row))));
  console.log(`next-token logits against the float64 reference (largest difference over the largest logit): headlab ${worst.toExponential(1)} (< 1e-5: ${worst < 1e-5 ? 'yes' : 'NO'})`);
  if (!(worst < 1e-5)) process.exitCode = 1;
}

/** The cut pass's table: its time beside the peer's on the same thread count, what the cut
 * gains over the same build's one-thread pass, and its agreement with the one-thread pass. */
function printCut(row, eightBit, name) {
  const peerNote = smoke ? ' (smoke: transformers.js on one thread, so no target)' : '';
  console.log(`\nheadlab's pass cut across this thread and a worker thread (src/model/decoder/sharded.rs), transformers.js on ${row.threads} thread(s)${peerNote}:`);
  console.log(`| headlab | ms | ${eightBit.map((k) => `/ ${name(k)}`).join(' | ')} | speed-up over its one-thread pass | next-token KL to f64 | every position's loss, largest difference from f16's one-thread pass: cut / one thread (nats) |`);
  console.log(`|---|---:|${'---:|'.repeat(eightBit.length + 3)}`);
  for (const side of row.cut) {
    const { cut, whole } = side.lossDiff;
    console.log(`| ${side.label} | ${row.ms[side.name].toFixed(1)} | ${eightBit.map((k) => row.ratio[side.name][k].toFixed(2)).join(' | ')} | ${side.gain.toFixed(2)}x | ${row.kl[side.name].toExponential(1)} | ${cut.toExponential(1)} / ${whole.toExponential(1)} |`);
  }
  const int8 = row.cut.find((side) => side.int8);
  if (!smoke && int8) {
    const q8 = row.ratio[int8.name].q8;
    console.log(`target, headlab 8-bit against transformers.js q8, both on two threads, ${TOKENS} tokens: ${q8.toFixed(2)}x (<= 0.85: ${q8 <= 0.85 ? 'holds' : 'misses'})`);
  }
  // f16: the same sums regrouped; 8 bits: no further from f16 than twice the one-thread 8-bit pass.
  const bad = row.cut.filter(({ int8, lossDiff: { cut, whole } }) => !(int8 ? cut <= 2 * whole + 1e-3 : cut < 1e-3));
  for (const side of bad) {
    console.log(`${side.label}: its losses are ${side.lossDiff.cut} nats off f16's (one thread: ${side.lossDiff.whole})`);
    process.exitCode = 1;
  }
}

const threads = flag('threads');
if (threads) await child(Number(threads));
else await main();
