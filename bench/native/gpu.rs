//! Native GPU benchmark: `cargo bench --features bench --bench gpu [-- ROUNDS] [smoke|all]`.
//! On lavapipe or SwiftShader only ratios mean anything; built once (`cargo bench --features bench --bench gpu
//! --no-run`), the same binary runs unchanged on a machine with a real GPU. Results: BENCHMARKS.md.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    use headlab::attention::config::preset_by_id;
    use std::time::Instant;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5);
    let all = !args.iter().any(|a| a == "smoke");
    let ctx = match pollster::block_on(headlab::gpu::GpuContext::acquire()) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("no GPU adapter: {e}");
            std::process::exit(1);
        }
    };
    let preset = |id: &str, n: usize| preset_by_id(id).expect("a preset").with_seq_len(n);
    let software = ctx.is_software();
    // A software adapter runs at about 1 GFLOP/s: keep its run short.
    let configs = match (all, software) {
        (false, _) => vec![preset("bert-base", 128)],
        (true, true) => vec![preset("bert-base", 128), preset("bert-base", 512)],
        (true, false) => vec![
            preset("bert-base", 128),
            preset("bert-base", 512),
            preset("gpt2-large", 512),
            preset("gpt2-large", 1024),
        ],
    };
    let peak_size = if software { 512 } else { 4096 };
    let origin = Instant::now();
    let now = || origin.elapsed().as_secs_f64() * 1e3;
    println!("{}", headlab::bench::cpu_line());
    match pollster::block_on(headlab::bench::gpu::gpu_report(&ctx, &now, &configs, peak_size, rounds)) {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("GPU benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
