// One shape of the multi-head attention forward, headlab's builds against onnxruntime-web's wasm
// backend: what bench/ort.mjs measures, in Node and in a page of headless Chromium alike. It
// imports nothing of Node's and takes what differs between the two places as arguments, so the
// page loads this same file (bench/ort.mjs serves it).

/**
 * Measures every side at `d` / `h` / `n` over `rounds` interleaved rounds. `libs` maps a build's
 * name to its wasm module (each exports `MhaCase`), `ort` is onnxruntime-web (set to its wasm
 * backend on one thread), `mhaModel` and `interleaved` are bench/onnx.mjs's and bench/stats.mjs's.
 * Resolves to `{ times, ratios, errors, flops, fusedError, repeat }`: each side's milliseconds a pass
 * (sides: the builds, `ort`, and `fused` where onnxruntime has the fused Attention op), per-round
 * ratios keyed `build/ort` and `build/fused`, each output's error against the f64 oracle
 * (`max |y - oracle| / max |oracle|`), the pass's floating-point operations, why the fused graph
 * did not load (or null), and how many passes each sample timed.
 */
export async function measureShape({ libs, ort, mhaModel, interleaved }, { d, h, n, rounds }) {
  const names = Object.keys(libs);
  // The same seeded shape in every build: the same inputs and weights.
  const cases = names.map((b) => new libs[b].MhaCase(d, h, n));
  const first = cases[0];
  const x = first.x();
  const weights = { n, d, h, wQkv: first.w_qkv(), wO: first.w_o() };
  const options = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  const plain = await ort.InferenceSession.create(mhaModel('plain', weights), options);
  let fused = null;
  let fusedError = null;
  try {
    fused = await ort.InferenceSession.create(mhaModel('fused', weights), options);
  } catch (e) {
    fusedError = e.message;
  }
  const feedPlain = { x: new ort.Tensor('float32', x, [n, d]) };
  const feedFused = { x: new ort.Tensor('float32', x, [1, n, d]) };
  const runs = Object.fromEntries(names.map((b, i) => [b, async () => {
    cases[i].forward();
    return cases[i].output();
  }]));
  runs.ort = async () => (await plain.run(feedPlain)).y.data;
  if (fused) runs.fused = async () => (await fused.run(feedFused)).y.data;
  try {
    // Warm-up, then every output against the oracle.
    const reference = first.oracle();
    const errors = {};
    for (const [k, run] of Object.entries(runs)) errors[k] = libs[names[0]].MhaCase.error(await run(), reference);
    // A page that is not cross-origin isolated reads performance.now() in steps of 0.1 ms: each
    // sample repeats a side's pass until the fastest side's sample spans about 20 ms.
    let fastest = Infinity;
    for (const run of Object.values(runs)) {
      const t0 = performance.now();
      await run();
      fastest = Math.min(fastest, performance.now() - t0);
    }
    const repeat = Math.min(64, Math.max(1, Math.ceil(20 / Math.max(fastest, 0.1))));
    const samples = Object.fromEntries(Object.entries(runs).map(([k, run]) => [k, async () => {
      for (let i = 0; i < repeat; i++) await run();
    }]));
    const pairs = names.flatMap((b) => [[b, 'ort'], ...(fused ? [[b, 'fused']] : [])]);
    const { times, ratios } = await interleaved(samples, rounds, pairs);
    for (const t of Object.values(times)) t.forEach((ms, i) => { t[i] = ms / repeat; });
    return { times, ratios, errors, flops: first.flops(), fusedError, repeat };
  } finally {
    await plain.release();
    await fused?.release();
    cases.forEach((c) => c.free());
  }
}

/** Where each build's time goes at d / h / n: its own profile table, per build name. */
export function profiles(libs, { d, h, n, rounds }) {
  return Object.fromEntries(Object.entries(libs).map(([b, lib]) => {
    const c = new lib.MhaCase(d, h, n);
    try {
      return [b, c.profile(rounds)];
    } finally {
      c.free();
    }
  }));
}
