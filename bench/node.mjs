// Runs the wasm build of the CPU benchmark in Node (see bench/run.sh, which builds it first).
//   node bench/node.mjs [ROUNDS] [all|smoke]
import { createRequire } from 'node:module';
import { cpuLine } from './machine.mjs';

const { bench_report, bench_generated } = createRequire(import.meta.url)('../target/bench-node/headlab.js');
const rounds = Number(process.argv[2] ?? 15);
console.log(cpuLine());
const lengths = process.argv[3] === 'smoke' ? [16] : [16, 64];
console.log(bench_report(768, 12, 128, rounds));
console.log();
console.log('GPT-3 without stored weights (each of its 604 M attention weights generated once per pass):');
console.log('| layer | n | median ms | GFLOP/s | weights generated | rounds |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const n of lengths) console.log(bench_generated(n, Math.min(rounds, 3)));
