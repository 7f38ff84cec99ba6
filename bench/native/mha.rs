//! Native CPU benchmark: `cargo bench --features bench --bench mha [-- ROUNDS]`.
//! The same measurement as wasm in Node: `bench/run.sh`. Results: BENCHMARKS.md.

use headlab::attention::config::preset_by_id;
use std::time::Instant;

fn main() {
    // cargo passes `--bench`; the first number given is the round count.
    let rounds = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(15);
    let bert = preset_by_id("bert-base").expect("BERT-base is a preset").with_seq_len(128);
    let origin = Instant::now();
    let now = || origin.elapsed().as_secs_f64() * 1e3;
    println!("{}", headlab::bench::cpu_line());
    println!("{}", headlab::bench::run(&now, bert, rounds));
}
