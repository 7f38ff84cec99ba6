//! The handbook's second claim, timed on the page's backend: all heads batched against one head
//! of the same width, and the batched function against the loop over heads it replaces.

use super::choice::Backend;
use super::timing::interleaved;
use crate::attention::clock::Clock;
use crate::attention::{Inputs, ModelConfig, Weights};
use crate::cpu;
use crate::gpu::GpuError;

/// The batched-heads experiment: all heads of a configuration in one pass, against one head of
/// the full width (the handbook's "cost is essentially that of single-head attention").
#[derive(Clone, Debug)]
pub struct Batched {
    /// The configuration with all its heads.
    pub config: ModelConfig,
    /// Where both ran.
    pub backend: Backend,
    /// Median milliseconds of a pass with all heads.
    pub all_heads_ms: f64,
    /// Median milliseconds of a pass with one head of width `d_model`.
    pub one_head_ms: f64,
    /// The finest step these medians can tell: the clock's step over the passes each sample
    /// repeated (see `attention::clock`).
    pub step_ms: f64,
}

impl Batched {
    /// All heads' time over one head's.
    pub fn ratio(&self) -> f64 {
        self.all_heads_ms / self.one_head_ms
    }
}

/// Rounds of the batched-heads experiment timed (after one untimed warm-up of each).
pub const BATCHED_ROUNDS: usize = 3;

/// The largest pass a timing runs on the page's thread: a timed pass is one call (cutting it
/// into steps would time the steps), and no call may hold the page for more than about 200 ms
/// (BENCHMARKS.md section 20). About 100 ms of the CPU kernel in wasm.
pub const TIMED_CPU_PASS_MAX_FLOPS: u64 = 2_500_000_000;

/// The largest weights a timing makes (in one piece, before its passes): 64 MiB, d_model 2048.
pub const TIMED_WEIGHTS_MAX_BYTES: u64 = 64 << 20;

/// Why `config` cannot be timed on `backend` on this page, when it cannot: its weights are
/// generated on the fly (each pass takes seconds), too large to make at once, or one pass on
/// the CPU would hold the page's thread too long.
pub fn untimeable(backend: &Backend, config: &ModelConfig) -> Option<String> {
    let flops = config.forward_flops();
    if config.generates_weights() {
        Some("this model's weights are generated on the fly, so each pass takes seconds; time it on one of the other presets".to_string())
    } else if config.weight_bytes() > TIMED_WEIGHTS_MAX_BYTES {
        Some(format!(
            "a timing makes this layer's {} MiB of weights in one piece, too long for the page's thread; time a layer of d_model {} or less",
            config.weight_bytes() >> 20,
            2048
        ))
    } else if matches!(backend, Backend::Cpu(_)) && flops > TIMED_CPU_PASS_MAX_FLOPS {
        Some(format!(
            "one pass of this shape is {:.1} GFLOP, too long to time on the page's thread (a timed pass cannot be cut into steps); time it with fewer tokens, or on the GPU",
            flops as f64 / 1e9
        ))
    } else {
        None
    }
}

/// Times `config` with all its heads against one head of width `d_model` on `backend`, in
/// interleaved rounds with the same weights and inputs, awaiting `between` after each sample (the
/// page lets the browser draw). A sample repeats its pass as often as `clock` needs to tell it.
pub async fn time_batched(
    backend: &Backend,
    config: ModelConfig,
    clock: &impl Clock,
    mut between: impl AsyncFnMut(),
) -> Result<Batched, GpuError> {
    let one = ModelConfig { num_heads: 1, ..config };
    let weights = Weights::generate(config.d_model, 1);
    let inputs = Inputs::generate(&config, 1);
    let timed = interleaved(BATCHED_ROUNDS, clock, &mut between, async |single| {
        backend.forward(if single { &one } else { &config }, &inputs.x, &weights).await.map(drop)
    })
    .await?;
    Ok(Batched {
        config,
        backend: backend.clone(),
        all_heads_ms: timed.first_ms,
        one_head_ms: timed.second_ms,
        step_ms: timed.step_ms,
    })
}

/// The handbook's batched function against the loop over heads it replaces, timed side by side
/// on one backend: on the CPU kernel [`cpu::head_loop`] (six small products per head), on the GPU
/// the heads dispatched one after another (five dispatches per head instead of three in all).
#[derive(Clone)]
pub struct LoopVsBatched {
    /// The configuration.
    pub config: ModelConfig,
    /// Where both ran.
    pub backend: Backend,
    /// Median milliseconds of the batched pass.
    pub batched_ms: f64,
    /// Median milliseconds of the loop over heads.
    pub loop_ms: f64,
    /// The finest step these medians can tell (see `attention::clock`).
    pub step_ms: f64,
    /// Largest difference between the two outputs, relative to the largest output value.
    pub difference: f64,
}

impl LoopVsBatched {
    /// The loop's time over the batched pass's.
    pub fn ratio(&self) -> f64 {
        self.loop_ms / self.batched_ms
    }

    /// Operations the loop runs per head on this backend, and what they are called.
    pub fn per_head(&self) -> (usize, &'static str) {
        if self.backend.is_gpu() {
            (5, "dispatches")
        } else {
            (6, "products")
        }
    }
}

/// One pass of `config`, batched or head by head, on `backend`: the output.
async fn pass_output(
    backend: &Backend,
    config: &ModelConfig,
    x: &[f32],
    weights: &Weights,
    by_head: bool,
) -> Result<Vec<f32>, GpuError> {
    Ok(match (backend, by_head) {
        (Backend::Gpu(ctx), true) => ctx.forward_head_by_head(config, x, weights).await?.output,
        (Backend::Cpu(kernel), true) => cpu::head_loop::forward_head_by_head(*kernel, config, x, weights),
        (_, false) => backend.forward(config, x, weights).await?.output,
    })
}

/// Times `config`'s batched pass against the same heads one by one on `backend` (stored
/// weights only: the caller refuses a configuration that generates them), in interleaved rounds.
pub async fn time_loop(
    backend: &Backend,
    config: ModelConfig,
    seed: u32,
    clock: &impl Clock,
    mut between: impl AsyncFnMut(),
) -> Result<LoopVsBatched, GpuError> {
    let weights = Weights::generate(config.d_model, seed);
    let inputs = Inputs::generate(&config, seed);
    let looped = pass_output(backend, &config, &inputs.x, &weights, true).await?;
    let batched = pass_output(backend, &config, &inputs.x, &weights, false).await?;
    let scale = batched.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE) as f64;
    let difference =
        looped.iter().zip(&batched).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max) / scale;
    let timed = interleaved(BATCHED_ROUNDS, clock, &mut between, async |by_head| {
        pass_output(backend, &config, &inputs.x, &weights, by_head).await.map(drop)
    })
    .await?;
    Ok(LoopVsBatched {
        config,
        backend: backend.clone(),
        batched_ms: timed.first_ms,
        loop_ms: timed.second_ms,
        step_ms: timed.step_ms,
        difference,
    })
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::cpu::Kernel;

    #[test]
    fn a_timing_that_would_hold_the_page_too_long_is_refused_with_its_reason() {
        let cpu = Backend::Cpu(Kernel::Simd);
        let at = |d_model, num_heads, seq_len| ModelConfig { d_model, num_heads, seq_len };
        assert_eq!(untimeable(&cpu, &at(768, 12, 128)), None);
        assert_eq!(untimeable(&cpu, &at(2048, 16, 64)), None);
        let slow = untimeable(&cpu, &at(2048, 16, 1024)).unwrap();
        assert!(slow.contains("42.9 GFLOP") && slow.contains("fewer tokens"), "{slow}");
        let wide = untimeable(&cpu, &at(4096, 32, 8)).unwrap();
        assert!(wide.contains("256 MiB") && wide.contains("2048"), "{wide}");
        assert!(untimeable(&cpu, &at(12288, 96, 16)).unwrap().contains("generated on the fly"));
    }

    #[test]
    fn batched_heads_are_timed_against_one_head_of_the_full_width() {
        let config = ModelConfig { d_model: 64, num_heads: 8, seq_len: 6 };
        let clock = std::cell::Cell::new(0.0);
        // A clock that advances 1 ms per reading: every pass takes 1 ms, so the ratio is 1.
        let now = || {
            clock.set(clock.get() + 1.0);
            clock.get()
        };
        let mut passes = 0;
        let b = pollster::block_on(time_batched(&Backend::Cpu(Kernel::Scalar), config, &now, async || {
            passes += 1
        }))
        .unwrap();
        assert_eq!(passes, 2 * (BATCHED_ROUNDS + 1));
        assert_eq!((b.all_heads_ms, b.one_head_ms, b.ratio(), b.step_ms), (1.0, 1.0, 1.0, 0.0));
    }

    #[test]
    fn the_loop_over_heads_is_timed_against_the_batched_pass_and_gives_its_output() {
        let config = ModelConfig { d_model: 96, num_heads: 12, seq_len: 7 };
        let clock = std::cell::Cell::new(0.0);
        let now = || {
            clock.set(clock.get() + 1.0);
            clock.get()
        };
        let mut turns = 0;
        let backend = Backend::Cpu(Kernel::Simd);
        let t = pollster::block_on(time_loop(&backend, config, 3, &now, async || turns += 1)).unwrap();
        assert_eq!(turns, 2 * (BATCHED_ROUNDS + 1), "the browser gets a turn after every sample");
        assert_eq!((t.batched_ms, t.loop_ms, t.ratio()), (1.0, 1.0, 1.0));
        assert!(t.difference < 1e-5, "{}", t.difference);
        assert_eq!((t.config, t.per_head()), (config, (6, "products")));
    }
}
