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
