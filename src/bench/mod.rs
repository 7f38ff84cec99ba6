//! The benchmarks, built only with the `bench` feature (the shipped page carries none of it):
//! the CPU forward pass on each kernel and the head-toggle path, interleaved round by round so
//! that ratios compare like with like on a noisy machine, its per-stage profile and GPT-3 with
//! generated weights ([`run`], [`profile`], [`generated_report`]; natively `bench/native/mha.rs`, as
//! wasm in Node through [`wasm`]), and the GPU path per dispatch ([`gpu`]; `bench/native/gpu.rs`).

pub mod decoder;
pub mod encoder;
pub mod gpu;
#[cfg(target_arch = "wasm32")]
pub mod wasm;
#[cfg(target_arch = "wasm32")]
pub mod wasm_decoder;

use crate::attention::{drift, HeadSet, Inputs, ModelConfig, Weights};
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

/// "CPU: <model name> (family F model M), N logical cores", read from `/proc/cpuinfo` (every
/// table holds only for the CPU it was measured on, so each native benchmark prints this first;
/// the family and model tell apart the generations one model name covers; "unknown CPU" where
/// there is no such file).
pub fn cpu_line() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == name).then(|| value.trim())
        })
    };
    let model = field("model name").unwrap_or("unknown CPU");
    let generation = match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!(" (family {f} model {m})"),
        _ => String::new(),
    };
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!("CPU: {model}{generation}, {cores} logical cores")
}

/// The median of `times` (NaN for none).
fn median(times: Vec<f64>) -> f64 {
    crate::attention::stats::median(&times).unwrap_or(f64::NAN)
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
    let mut mask = HeadSet::all(config.num_heads);
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
        time(3, &mut || out.contributions.recompose_into(&HeadSet::all(h_count), &mut out.output));
    }
    let total: f64 = stages.iter().map(|s| median(s.2.clone())).sum();
    // What the products could reach: the micro-kernel alone on panels in L1 (98 MFLOP a round).
    let reps = 4000;
    // Short calls first, for 200 ms, so that the engine has optimised it (a wasm engine tiers a
    // function up between calls, not inside one).
    let t0 = now();
    while now() - t0 < 200.0 {
        std::hint::black_box(cpu::packed::micro_kernel_ceiling(reps / 40));
    }
    let ceiling: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let t0 = now();
            std::hint::black_box(cpu::packed::micro_kernel_ceiling(reps));
            now() - t0
        })
        .collect();
    let ceiling = (reps * cpu::packed::CEILING_FLOPS_PER_REP) as f64 / 1e6 / median(ceiling);
    let mut text = format!(
        "Profile of one forward pass, d_model {d} / {h_count} heads / n = {n}, {} kernel:\n| stage | median ms | share | GFLOP/s |\n|---|---:|---:|---:|\n",
        kernel.describe()
    );
    for (name, flops, times) in stages {
        let ms = median(times);
        text += &format!("| {name} | {ms:.3} | {:.0} % | {:.1} |\n", 100.0 * ms / total, flops / 1e6 / ms);
    }
    text += &format!("| total | {total:.3} | 100 % | {:.1} |", config.forward_flops() as f64 / 1e6 / total);
    text + &format!(
        "\n| the micro-kernel alone, panels in L1 (what a product can reach) | | | {ceiling:.1} |"
    )
}

/// GPT-3's layer (12288 wide, 96 heads) at `seq_len` with its weights generated inside the
/// packed GEMM instead of stored: median time of `rounds` passes, as a table row.
pub fn generated_report(now: &dyn Fn() -> f64, seq_len: usize, rounds: usize) -> String {
    let config = ModelConfig { d_model: 12288, num_heads: 96, seq_len };
    config.validate().expect("GPT-3 at this length fits the budget");
    let inputs = Inputs::generate(&config, 42);
    let weights = crate::attention::LayerWeights::Generated(crate::attention::GeneratedWeights {
        d_model: 12288,
        seed: 42,
    });
    let times: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let t0 = now();
            std::hint::black_box(
                crate::cpu::stepped::SteppedPass::new(&config, &inputs.x, &weights).finish(),
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
