// The trained model pruned for real, as wasm (simd128) in Node: full against structurally pruned
// forward time at 8, 32 and 128 tokens (bench/run.sh builds the wasm and the model asset first).
//   node bench/trained.mjs [ROUNDS] [all|smoke]
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const { bench_pruned } = createRequire(import.meta.url)('../target/bench-node/headlab.js');
const rounds = Number(process.argv[2] ?? 15);
const lengths = process.argv[3] === 'smoke' ? [8] : [8, 32, 128];
const asset = readFileSync(new URL('../target/model/minilm-f16.bin', import.meta.url));
console.log(bench_pruned(asset, new Uint32Array(lengths), rounds));
