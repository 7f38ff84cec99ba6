// The trained model pruned for real, as wasm in Node: full against structurally pruned forward
// time at 8, 32 and 128 tokens, one quality evaluation of the pruning curves (simd128), and the
// importance sweep of one sentence (72 passes, each without one head) at 128, 256 and 512 tokens
// and one encoder layer's time stage by stage at 128 and 512, on each of the page's builds
// (bench/builds.mjs; bench/run.sh builds the wasm and the model asset first, and passes
// --experimental-wasm-relaxed-simd so that the relaxed build is measured).
//   node [--experimental-wasm-relaxed-simd] bench/trained.mjs [ROUNDS] [all|smoke]
import { readFileSync } from 'node:fs';
import { cpuLine } from './machine.mjs';
import { buildsNote, headlabBuilds, simd128 } from './builds.mjs';

const { bench_pruned, bench_evaluation } = simd128();
const rounds = Number(process.argv[2] ?? 15);
const smoke = process.argv[3] === 'smoke';
console.log(cpuLine());
const lengths = smoke ? [8] : [8, 32, 128];
const asset = readFileSync(new URL('../target/model/minilm-f16.bin', import.meta.url));
console.log(bench_pruned(asset, new Uint32Array(lengths), rounds));
// One quality evaluation of the pruning curves (every sentence pair), single-threaded.
const pairs = readFileSync(new URL('../target/model/sts-pairs.tsv', import.meta.url));
console.log(bench_evaluation(asset, pairs, new Uint32Array([]), smoke ? 1 : 3));
// The sweep a reader's sentence gets, on one thread (the page deals its heads out to workers).
const builds = headlabBuilds();
console.log(buildsNote(builds));
for (const { label, lib } of builds) {
  console.log(`${label}: ${lib.bench_sweep(asset, new Uint32Array(smoke ? [32] : [128, 256, 512]), smoke ? 1 : Math.min(rounds, 3), 'f16')}`);
}
// Where a pass's time goes: one encoder layer, stage by stage, on each build.
for (const { label, lib } of builds) {
  console.log(`${label}:\n${lib.bench_layer_profile(asset, new Uint32Array(smoke ? [32] : [128, 512]), smoke ? 1 : Math.min(rounds, 9), 'f16')}`);
}
