// Threads for one pass cut across threads that share no memory, as the page's web workers would
// run it: Node worker_threads, each with a wasm instance of its own, messages that copy or
// transfer their buffers, no SharedArrayBuffer. Used by bench/split.mjs and bench/transformers.mjs.
//
// The thread that makes a SplitPool drives each pass and computes its first shard itself; the
// pool's `threads - 1` workers compute the others (src/cpu/head_shards.rs: heads of the attention
// layer; src/model/sharded.rs: heads and feed-forward units of the trained model, two steps per
// layer).
import { createRequire } from 'node:module';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
/** The wasm build in target/`folder` (bench/builds.mjs names them; the simd128 one by default). */
const wasm = (folder = 'bench-node') => require(`../target/${folder}/headlab.js`);
export const assetPath = fileURLToPath(new URL('../target/model/minilm-f16.bin', import.meta.url));

/** How far a cut pass may be from the single-thread one: the native tests' bound
 * (src/cpu/head_shards.rs: the same bits; tests/minilm_passes.rs: 2e-6 relative). */
export const SPLIT_BOUND = 2e-6;

function concat(parts) {
  if (parts.length === 1) return parts[0];
  const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

export class SplitPool {
  /** `threads` in all (this one and threads - 1 workers), the workers on the build in
   * target/`folder`: the one the driving thread's model comes from; a trained model's shards
   * read the page's model file at `model` (the built-in MiniLM's by default). */
  constructor(threads, folder = 'bench-node', model = assetPath) {
    this.threads = threads;
    this.folder = folder;
    this.workers = Array.from({ length: threads - 1 }, (_, i) =>
      new Worker(fileURLToPath(import.meta.url), { workerData: { index: i + 1, count: threads, folder, model } }));
    // One question at a time per worker: each answer settles the one waiting.
    this.waiting = this.workers.map(() => null);
    this.workers.forEach((w, i) => {
      w.on('message', (answer) => this.waiting[i].resolve(answer));
      w.on('error', (e) => this.waiting[i]?.reject(e));
    });
  }

  /** One message out to every worker, every answer back, in worker order. */
  ask(messages, transfer = []) {
    return Promise.all(this.workers.map((w, i) => new Promise((resolve, reject) => {
      this.waiting[i] = { resolve, reject };
      w.postMessage(messages[i], transfer);
    })));
  }

  /** The MHA pass of `c` (an MhaCase of d, h, n) cut by heads; its output is then c.output(). */
  async mha(c, d, h, n, x) {
    // The heads cut as the Rust side cuts them (src/cpu/head_shards.rs), pairs [start, end].
    const cut = wasm(this.folder).even_ranges(h, this.threads);
    const ranges = Array.from({ length: cut.length / 2 }, (_, s) => [cut[2 * s], cut[2 * s + 1]]);
    // The input goes out (copied, as a page's message would), the first shard is computed here
    // meanwhile, then the others come back transferred.
    const pending = this.ask(ranges.slice(1).map(([lo, hi]) => ({ kind: 'mha', d, h, n, lo, hi, x })));
    c.forward_first(this.threads);
    c.assemble(this.threads, concat(await pending));
  }

  /** The sentence embedding of `text` by `model` (a EncoderCase), cut into one shard per thread. */
  async embed(model, text) {
    model.split_begin(text, this.threads);
    for (let code = model.split_step(); code >= 0; code = model.split_step()) {
      const x = model.split_input();
      const pending = this.ask(this.workers.map(() => ({ kind: 'trained', code, x })), this.workers.length === 1 ? [x.buffer] : []);
      model.split_local();
      model.split_absorb(concat(await pending));
    }
    return model.split_embedding();
  }

  close() {
    return Promise.all(this.workers.map((w) => w.terminate()));
  }
}

/** A worker: one shard of each pass the driver cuts, answered with its buffer transferred. */
function serve() {
  const { index, count, folder, model } = workerData;
  const { MhaCase, EncoderShard } = wasm(folder);
  const cases = new Map();
  let shard = null;
  parentPort.on('message', (m) => {
    let out;
    if (m.kind === 'mha') {
      const key = `${m.d}/${m.h}/${m.n}`;
      if (!cases.has(key)) cases.set(key, new MhaCase(m.d, m.h, m.n));
      out = cases.get(key).forward_heads(m.x, m.lo, m.hi);
    } else {
      shard ??= new EncoderShard(readFileSync(model), index, count, 'f16');
      out = shard.run(m.code, m.x);
    }
    parentPort.postMessage(out, [out.buffer]);
  });
}

if (!isMainThread && workerData?.count) serve();
