// What the Node benchmarks compute from their rounds and outputs, once. (bench/relaxed.mjs
// computes its medians inside the page it drives, where this module is not loaded.)

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The largest |a - b| relative to the largest |b|. */
export function relativeDifference(a, b) {
  let scale = 0, worst = 0;
  for (let i = 0; i < a.length; i++) {
    scale = Math.max(scale, Math.abs(b[i]));
    worst = Math.max(worst, Math.abs(a[i] - b[i]));
  }
  return worst / scale;
}

/**
 * `rounds` interleaved rounds of `runs` (`{ side: async () => ... }`): each round runs every side
 * once, starting with another side each round so that none always runs right after the same one.
 * Resolves to `{ times, ratios }`: each side's milliseconds, one per round, and for each
 * `[side, peer]` of `pairs` the per-round ratios of their times, keyed `side/peer`.
 */
export async function interleaved(runs, rounds, pairs) {
  const times = Object.fromEntries(Object.keys(runs).map((k) => [k, []]));
  const ratios = Object.fromEntries(pairs.map(([a, b]) => [`${a}/${b}`, []]));
  const order = Object.keys(runs);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < order.length; j++) {
      const k = order[(r + j) % order.length];
      const t0 = performance.now();
      await runs[k]();
      times[k].push(performance.now() - t0);
    }
    for (const [a, b] of pairs) ratios[`${a}/${b}`].push(times[a].at(-1) / times[b].at(-1));
  }
  return { times, ratios };
}
