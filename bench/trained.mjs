// The trained model pruned for real, as wasm (simd128) in Node: full against structurally pruned
// forward time at 8, 32 and 128 tokens, and one quality evaluation of the pruning curves
// (bench/run.sh builds the wasm and the model asset first).
//   node bench/trained.mjs [ROUNDS] [all|smoke]
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { cpuLine } from './machine.mjs';

const { bench_pruned, bench_evaluation } = createRequire(import.meta.url)('../target/bench-node/headlab.js');
const rounds = Number(process.argv[2] ?? 15);
console.log(cpuLine());
const lengths = process.argv[3] === 'smoke' ? [8] : [8, 32, 128];
const asset = readFileSync(new URL('../target/model/minilm-f16.bin', import.meta.url));
console.log(bench_pruned(asset, new Uint32Array(lengths), rounds));
// One quality evaluation of the pruning curves (every sentence pair), single-threaded.
const pairs = readFileSync(new URL('../target/model/sts-pairs.tsv', import.meta.url));
console.log(bench_evaluation(asset, pairs, new Uint32Array([]), process.argv[3] === 'smoke' ? 1 : 3));
