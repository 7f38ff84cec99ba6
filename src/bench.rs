//! The CPU benchmark, shared by the native runner (`benches/mha.rs`) and the wasm build run in
//! Node (`bench/node.mjs`): one forward pass on each kernel and the head-toggle path, interleaved
//! round by round so that ratios compare like with like on a noisy machine.

use crate::attention::{drift, HeadMask, Inputs, ModelConfig, Weights};
use crate::cpu::{self, Forward, Kernel};

/// Timings of one benchmark run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The configuration measured.
    pub config: ModelConfig,
    /// Where it ran, e.g. "native SIMD".
    pub platform: &'static str,
    /// Median forward time per kernel, in milliseconds, in [`Kernel::ALL`] order.
    pub forward_ms: Vec<(Kernel, f64)>,
    /// Median over rounds of (scalar time / SIMD time), measured in the same round.
    pub scalar_over_simd: f64,
    /// Median time of one head toggle to new drift numbers (recompose + drift), milliseconds.
    pub toggle_ms: f64,
    /// Rounds measured.
    pub rounds: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Runs `rounds` interleaved rounds at `config`; `now` returns milliseconds from any origin.
pub fn run(now: &dyn Fn() -> f64, config: ModelConfig, rounds: usize) -> Report {
    config.validate().expect("benchmark configuration must be valid");
    let rounds = rounds.max(1);
    let weights = Weights::generate(config.d_model, 42);
    let inputs = Inputs::generate(&config, 42);
    let mut out = Forward::filled(&config, 0.0);
    let time = |f: &mut dyn FnMut()| {
        let t0 = now();
        f();
        now() - t0
    };

    // One untimed pass per kernel warms caches and the allocator.
    for kernel in Kernel::ALL {
        cpu::forward_into(kernel, &config, &inputs.x, &weights, &mut out);
    }
    let mut per_kernel = vec![Vec::new(); Kernel::ALL.len()];
    let mut ratios = Vec::new();
    for _ in 0..rounds {
        for (k, kernel) in Kernel::ALL.into_iter().enumerate() {
            per_kernel[k]
                .push(time(&mut || cpu::forward_into(kernel, &config, &inputs.x, &weights, &mut out)));
        }
        let last = |k: usize| per_kernel[k][per_kernel[k].len() - 1];
        ratios.push(last(1) / last(0));
    }

    // Toggle path: flip one head, rebuild the output from cached contributions, recompute drift.
    cpu::forward_into(Kernel::Simd, &config, &inputs.x, &weights, &mut out);
    let mut mask = HeadMask::all(config.num_heads);
    let mut pruned = vec![0.0f32; out.output.len()];
    const TOGGLES_PER_SAMPLE: usize = 10;
    let toggle_samples: Vec<f64> = (0..rounds.max(20))
        .map(|s| {
            time(&mut || {
                for t in 0..TOGGLES_PER_SAMPLE {
                    mask.toggle((s * TOGGLES_PER_SAMPLE + t) % config.num_heads);
                    out.contributions.recompose_into(&mask, &mut pruned);
                    std::hint::black_box(drift(&out.output, &pruned, config.d_model));
                }
            }) / TOGGLES_PER_SAMPLE as f64
        })
        .collect();

    Report {
        config,
        platform: Kernel::Simd.describe(),
        forward_ms: Kernel::ALL.into_iter().zip(per_kernel.into_iter().map(median)).collect(),
        scalar_over_simd: median(ratios),
        toggle_ms: median(toggle_samples),
        rounds,
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.config;
        let gflop = c.forward_flops() as f64 / 1e9;
        writeln!(
            f,
            "MHA forward, d_model {} / {} heads / n = {} ({:.3} GFLOP), {} rounds, vector path = {}",
            c.d_model, c.num_heads, c.seq_len, gflop, self.rounds, self.platform
        )?;
        writeln!(f, "| path | median ms | GFLOP/s |")?;
        writeln!(f, "|---|---:|---:|")?;
        for (kernel, ms) in &self.forward_ms {
            writeln!(f, "| forward, {:?} kernel | {ms:.3} | {:.2} |", kernel, gflop / (ms / 1e3))?;
        }
        writeln!(f, "| head toggle -> new drift | {:.4} | - |", self.toggle_ms)?;
        let simd_ms = self.forward_ms[0].1;
        writeln!(f, "scalar / SIMD time (median of per-round ratios): {:.2}x", self.scalar_over_simd)?;
        write!(
            f,
            "head toggle / SIMD forward time: {:.4} ({:.0}x cheaper)",
            self.toggle_ms / simd_ms,
            simd_ms / self.toggle_ms
        )
    }
}

/// Runs the benchmark from JavaScript (Node or a browser) with `performance.now()` as the clock
/// and returns the report as text.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn bench_report(
    d_model: usize,
    num_heads: usize,
    seq_len: usize,
    rounds: usize,
) -> Result<String, String> {
    #[wasm_bindgen::prelude::wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = performance)]
        fn now() -> f64;
    }
    let config = ModelConfig { d_model, num_heads, seq_len };
    config.validate().map_err(|e| e.to_string())?;
    Ok(run(&now, config, rounds).to_string())
}

/// Largest relative error of `y` against `reference`: `max |y - ref| / max |ref|` (the same
/// normwise measure for every runtime compared).
pub fn normwise_error(y: &[f32], reference: &[f64]) -> f64 {
    let scale = reference.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
    let worst = y.iter().zip(reference).fold(0.0f64, |m, (a, b)| m.max((*a as f64 - b).abs()));
    if y.len() == reference.len() {
        worst / scale
    } else {
        f64::INFINITY
    }
}

/// One benchmark shape, its seeded weights and inputs, and its forward pass, for JavaScript:
/// `bench/ort.mjs` hands the same weights to onnxruntime-web and times both in one process.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub struct MhaCase {
    config: ModelConfig,
    weights: Weights,
    inputs: Inputs,
    out: Forward,
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
impl MhaCase {
    /// The case for a shape, with weights and inputs from seed 42.
    #[wasm_bindgen(constructor)]
    pub fn new(d_model: usize, num_heads: usize, seq_len: usize) -> Result<MhaCase, String> {
        let config = ModelConfig { d_model, num_heads, seq_len };
        config.validate().map_err(|e| e.to_string())?;
        Ok(MhaCase {
            config,
            weights: Weights::generate(d_model, 42),
            inputs: Inputs::generate(&config, 42),
            out: Forward::filled(&config, f32::NAN),
        })
    }

    /// The input, `seq_len x d_model`, row-major.
    pub fn x(&self) -> Vec<f32> {
        self.inputs.x.clone()
    }

    /// `W_qkv`, `d_model x 3 d_model`, row-major, columns `[Q | K | V]`.
    pub fn w_qkv(&self) -> Vec<f32> {
        self.weights.w_qkv.clone()
    }

    /// `W_o`, `d_model x d_model`, row-major.
    pub fn w_o(&self) -> Vec<f32> {
        self.weights.w_o.clone()
    }

    /// One forward pass on the simd128 kernel, as the page runs it (attention weights and
    /// per-head contributions kept for pruning).
    pub fn forward(&mut self) {
        cpu::forward_into(Kernel::Simd, &self.config, &self.inputs.x, &self.weights, &mut self.out);
    }

    /// The last forward pass's output, `seq_len x d_model`.
    pub fn output(&self) -> Vec<f32> {
        self.out.output.clone()
    }

    /// The naive f64 oracle's output (slow: seconds at the largest shapes).
    pub fn oracle(&self) -> Vec<f64> {
        let mask = HeadMask::all(self.config.num_heads);
        crate::attention::oracle::multihead_attention(
            &self.config,
            &self.inputs.x,
            &self.weights.w_qkv,
            &self.weights.w_o,
            &mask,
        )
        .output
    }

    /// [`normwise_error`] of `y` against `reference`.
    pub fn error(y: &[f32], reference: &[f64]) -> f64 {
        normwise_error(y, reference)
    }

    /// [`profile`] of this shape over `rounds`, as a Markdown table.
    pub fn profile(&self, rounds: usize) -> String {
        #[wasm_bindgen::prelude::wasm_bindgen]
        extern "C" {
            #[wasm_bindgen(js_namespace = performance)]
            fn now() -> f64;
        }
        profile(&now, self.config, rounds)
    }

    /// Floating-point operations of one forward pass.
    pub fn flops(&self) -> f64 {
        self.config.forward_flops() as f64
    }
}

/// Where one forward pass spends its time: each stage of [`cpu::forward_into`] timed alone on
/// the simd128 kernel (median of `rounds`), with its share of the FLOPs.
pub fn profile(now: &dyn Fn() -> f64, config: ModelConfig, rounds: usize) -> String {
    let (n, d, h_count, d_k) = (config.seq_len, config.d_model, config.num_heads, config.d_k());
    let weights = Weights::generate(d, 42);
    let inputs = Inputs::generate(&config, 42);
    let mut out = Forward::filled(&config, 0.0);
    let mut qkv = vec![0.0f32; n * 3 * d];
    let kernel = Kernel::Simd;
    let mut stages: Vec<(&str, f64, Vec<f64>)> = vec![
        ("QKV projection (one GEMM n x d x 3d)", (6 * n * d * d) as f64, vec![]),
        ("attention (QK^T, softmax, PV per head)", (4 * n * n * d) as f64, vec![]),
        ("output projection (H GEMMs n x d_k x d)", (2 * n * d * d) as f64, vec![]),
        ("sum of per-head contributions", (h_count * n * d) as f64, vec![]),
    ];
    for _ in 0..rounds.max(1) {
        let mut time = |stage: usize, f: &mut dyn FnMut()| {
            let t0 = now();
            f();
            stages[stage].2.push(now() - t0);
        };
        time(0, &mut || cpu::project_qkv(kernel, &config, &inputs.x, &weights.w_qkv, &mut qkv));
        time(1, &mut || cpu::attend(kernel, &qkv, n, h_count, d_k, &mut out.attention, &mut out.heads));
        time(2, &mut || {
            for (h, block) in out.contributions.data.chunks_exact_mut(n * d).enumerate() {
                cpu::project_head(kernel, &config, &out.heads, &weights.w_o, h, block);
            }
        });
        time(3, &mut || out.contributions.recompose_into(&HeadMask::all(h_count), &mut out.output));
    }
    let total: f64 = stages.iter().map(|s| median(s.2.clone())).sum();
    let mut text = format!(
        "Profile of one forward pass, d_model {d} / {h_count} heads / n = {n}, {} kernel:\n| stage | median ms | share | GFLOP/s |\n|---|---:|---:|---:|\n",
        kernel.describe()
    );
    for (name, flops, times) in stages {
        let ms = median(times);
        text += &format!("| {name} | {ms:.3} | {:.0} % | {:.1} |\n", 100.0 * ms / total, flops / 1e6 / ms);
    }
    text + &format!("| total | {total:.3} | 100 % | {:.1} |", config.forward_flops() as f64 / 1e6 / total)
}

/// GPT-3's layer (12288 wide, 96 heads) at `seq_len` with its weights generated inside the
/// packed GEMM instead of stored: median time of `rounds` passes, as a table row.
pub fn generated_report(now: &dyn Fn() -> f64, seq_len: usize, rounds: usize) -> String {
    let config = ModelConfig { d_model: 12288, num_heads: 96, seq_len };
    config.validate().expect("GPT-3 at this length fits the budget");
    let inputs = Inputs::generate(&config, 42);
    let weights = crate::attention::GeneratedWeights { d_model: 12288, seed: 42 };
    let times: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let t0 = now();
            std::hint::black_box(
                crate::cpu::generated::GeneratedPass::new(&config, &inputs.x, weights).finish(),
            );
            now() - t0
        })
        .collect();
    let ms = median(times);
    let weights_made = 4.0 * 12288.0 * 12288.0;
    format!(
        "| GPT-3 12288/96, weights generated | {seq_len} | {ms:.0} | {:.1} | {:.0} M weights/s | {} |",
        config.forward_flops() as f64 / 1e6 / ms,
        weights_made / 1e3 / ms,
        rounds.max(1)
    )
}

/// [`generated_report`] from JavaScript, with `performance.now()` as the clock.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn bench_generated(seq_len: usize, rounds: usize) -> String {
    #[wasm_bindgen::prelude::wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = performance)]
        fn now() -> f64;
    }
    generated_report(&now, seq_len, rounds)
}

/// The GPU benchmark: the adapter's matrix-product peak (a `peak_size` cube on the forward
/// pass's own kernel), then for each configuration the end-to-end forward time (upload, three
/// dispatches, readback; wall clock) and each dispatch's GPU time from timestamp queries, with
/// GFLOP/s against that peak. `now` is a millisecond clock. Natively: `benches/gpu.rs`.
pub async fn gpu_report(
    ctx: &crate::gpu::GpuContext,
    now: &dyn Fn() -> f64,
    configs: &[ModelConfig],
    peak_size: u32,
    rounds: usize,
) -> Result<String, crate::gpu::GpuError> {
    let mut text = format!(
        "GPU: {} (timestamp queries: {}); 3 dispatches per forward pass (QKV projection, fused attention, output projection)\n",
        ctx.adapter_label(),
        if ctx.has_timestamps() { "yes" } else { "no: wall-clock times only" }
    );
    let peak = match ctx.time_square_matmul(peak_size, rounds).await? {
        Some(ms) => {
            let gflops = 2.0 * (peak_size as f64).powi(3) / 1e6 / ms;
            text += &format!(
                "matrix-product peak ({peak_size}^3 on matmul.wgsl): {ms:.3} ms, {gflops:.1} GFLOP/s\n"
            );
            Some(gflops)
        }
        None => None,
    };
    text += "| config | n | end-to-end ms | QKV ms | attention ms | output ms | GPU GFLOP/s | of peak |\n";
    text += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for config in configs {
        let weights = Weights::generate(config.d_model, 42);
        let inputs = Inputs::generate(config, 42);
        ctx.forward(config, &inputs.x, &weights).await?; // warm-up: buffers and pipelines
        let (mut wall, mut gpu) = (Vec::new(), Vec::new());
        for _ in 0..rounds.max(1) {
            let t0 = now();
            ctx.forward(config, &inputs.x, &weights).await?;
            wall.push(now() - t0);
            if let Some(t) = ctx.time_dispatches(config, &inputs.x, &weights).await? {
                gpu.push(t);
            }
        }
        let flops = config.forward_flops() as f64;
        let cell = |f: &dyn Fn(&crate::gpu::DispatchTimes) -> f64| {
            if gpu.is_empty() {
                "-".to_string()
            } else {
                format!("{:.3}", median(gpu.iter().map(f).collect()))
            }
        };
        let total = (!gpu.is_empty()).then(|| median(gpu.iter().map(|t| t.total_ms()).collect()));
        let gflops = total.map(|ms| flops / 1e6 / ms);
        text += &format!(
            "| {}/{} | {} | {:.2} | {} | {} | {} | {} | {} |\n",
            config.d_model,
            config.num_heads,
            config.seq_len,
            median(wall),
            cell(&|t| t.qkv_ms),
            cell(&|t| t.attention_ms),
            cell(&|t| t.output_ms),
            gflops.map_or("-".into(), |g| format!("{g:.1}")),
            match (gflops, peak) {
                (Some(g), Some(p)) => format!("{:.0} %", 100.0 * g / p),
                _ => "-".into(),
            }
        );
    }
    Ok(text)
}
