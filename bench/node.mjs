// Runs the wasm build of the CPU benchmark in Node (see bench/run.sh, which builds it first).
import { createRequire } from 'node:module';

const { bench_report } = createRequire(import.meta.url)('../target/bench-node/headlab.js');
const rounds = Number(process.argv[2] ?? 15);
console.log(bench_report(768, 12, 128, rounds));
