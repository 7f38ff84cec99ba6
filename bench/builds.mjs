// The page's two wasm builds as Node modules, for the benchmarks that compare headlab with a peer
// (bench/ort.mjs, bench/transformers.mjs). bench/run.sh makes both with wasm-bindgen's Node target:
//   target/bench-node          simd128, which every engine runs (WebKit gets this one)
//   target/bench-node-relaxed  the same with f32x4.relaxed_madd in the matrix product's
//                              micro-kernel, which the page loads where the engine validates
//                              relaxed SIMD (Chromium and Firefox: scripts/relaxed-loader.py)
// Node 20 validates relaxed SIMD only with --experimental-wasm-relaxed-simd; bench/run.sh and
// scripts/test.sh pass it, so the relaxed build is measured beside the simd128 one in the same
// process and rounds. Without the flag the benchmarks measure the simd128 build alone and say so.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const folder = (name) => fileURLToPath(new URL(`../target/${name}/headlab.js`, import.meta.url));

/** A module holding one relaxed-SIMD instruction (i8x16.relaxed_swizzle): valid where the engine
 * has relaxed SIMD. The page's loader asks the same question; bench/relaxed.mjs asks it in the
 * browser with these bytes. */
export const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1,
  0, 10, 15, 1, 13, 0, 65, 0, 253, 15, 65, 0, 253, 15, 253, 128, 2, 11]);

/** Whether this engine runs relaxed SIMD. */
const relaxedSimd = WebAssembly.validate(RELAXED_PROBE);

/** The simd128 build (the one every engine runs). */
export const simd128 = () => require(folder('bench-node'));

/**
 * The builds to measure: `[{ name, label, folder, lib }]` (`folder` under target/), the simd128
 * build first, then the relaxed-SIMD build where this engine runs it. Refuses a relaxed-capable engine without the relaxed build, so
 * that a table never silently lacks the build a Chromium reader gets.
 */
export function headlabBuilds() {
  const builds = [{ name: 'simd128', label: 'simd128', folder: 'bench-node', lib: simd128() }];
  if (!relaxedSimd) return builds;
  const path = folder('bench-node-relaxed');
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: build it as bench/run.sh does (cargo rustc ... --features bench,relaxed-simd, then wasm-bindgen --target nodejs --out-dir target/bench-node-relaxed)`);
  }
  builds.push({ name: 'relaxed', label: 'relaxed SIMD', folder: 'bench-node-relaxed', lib: require(path) });
  return builds;
}

/** A line saying which builds a table holds. */
export function buildsNote(builds) {
  return builds.length > 1
    ? 'headlab: the simd128 build and the relaxed-SIMD build (what Chromium and Firefox load), side by side'
    : 'headlab: the simd128 build only (this Node does not validate relaxed SIMD: run it with --experimental-wasm-relaxed-simd to measure the relaxed build as well)';
}
