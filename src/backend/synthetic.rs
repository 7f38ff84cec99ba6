//! The synthetic layer's pass on the session's backend: stored weights where they were measured
//! faster, generated weights in the GPU's kernel or the CPU kernel's packing, and what the page
//! says about where it ran.

use std::sync::Arc;

use super::calibrate::QUICK_CPU_FLOPS;
use super::choice::Backend;
use super::placement::{Choice, Place};
use super::session::Session;
use crate::attention::analysis::{Importance, Measuring};
use crate::attention::clock::Clock;
use crate::attention::rollout::add_head;
use crate::attention::turns::SLICE_MS;
use crate::attention::{ConfigError, Inputs, LayerWeights, ModelConfig, Weights};
use crate::cpu::stepped::SteppedPass;
use crate::cpu::{Forward, Kernel};

/// Whether `config` is quick enough on the CPU kernel to draw before the GPU is ready, and to
/// run without first letting the page paint a "computing" status.
pub fn is_quick(config: &ModelConfig) -> bool {
    config.validate().is_ok() && config.forward_flops() <= QUICK_CPU_FLOPS
}

/// How a pass got its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsIn {
    /// Stored in memory.
    Memory,
    /// Generated in the GPU's matrix-product kernel.
    GpuKernel,
    /// Generated on the fly by the CPU kernel; `software_gpu` when a (slow) software GPU was
    /// passed over for it.
    CpuKernel {
        /// The session had a GPU, but a software one.
        software_gpu: bool,
    },
}

/// One completed forward pass of the synthetic layer and what the page shows about it.
#[derive(Debug)]
pub struct Run {
    /// The seed of its weights and inputs.
    pub seed: u32,
    /// The configuration (validated).
    pub config: ModelConfig,
    /// Attention weights, per-head contributions and the full output.
    pub forward: Forward,
    /// Each head's importance and the drift curves of pruning in either order.
    pub importance: Arc<Importance>,
    /// Every head's attention weights summed, `n x n` in f64: the layer's rollout for any heads
    /// starts from it ([`crate::attention::rollout::one_layer_rollout`]).
    pub attention_sum: Vec<f64>,
    /// The word at each position.
    pub words: Vec<&'static str>,
    /// The words and their embeddings `x` (`seq_len x d_model`), the pass's input.
    pub inputs: Inputs,
    /// Wall time of the forward pass, milliseconds (on the GPU: upload, dispatch and readback).
    pub forward_ms: f64,
    /// The backend that computed it.
    pub backend: Backend,
    /// Where its weights came from.
    pub weights: WeightsIn,
    /// The measured choice that put it there, when the page chose ([`Session::layer_choice`]).
    pub choice: Option<Choice>,
}

impl Run {
    /// Where it ran, for the page: "CPU · wasm simd128 (weights generated on the fly)".
    pub fn ran_on(&self) -> String {
        let label = self.backend.label();
        match self.weights {
            WeightsIn::Memory => label,
            WeightsIn::GpuKernel => format!("{label} (weights generated in the kernel)"),
            WeightsIn::CpuKernel { software_gpu: false } => format!("{label} (weights generated on the fly)"),
            WeightsIn::CpuKernel { software_gpu: true } => {
                format!("{label} (weights generated on the fly, as the GPU is a software adapter)")
            }
        }
    }

    /// Where passes of this run's model run now in `session`: where it ran, unless that was a GPU
    /// that has failed since.
    pub fn backend_in(&self, session: &Session) -> Backend {
        match (&self.backend, session.gpu()) {
            (Backend::Gpu(_), None) => Backend::Cpu(Kernel::Simd),
            (backend, _) => backend.clone(),
        }
    }

    /// The badge's text: the backend, and "measured faster here" when a measurement chose it.
    pub fn badge(&self) -> String {
        match self.choice {
            Some(_) => format!("{} · measured faster here", self.backend.label()),
            None => self.backend.label(),
        }
    }
}

/// Weights or embeddings made per piece: about 10 ms of the generator in wasm.
const MADE_PER_PIECE: usize = 1 << 20;

/// Why a pass has no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Halted {
    /// The configuration cannot run, and why.
    Refused(ConfigError),
    /// The caller stopped it between two slices (the reader asked for something else).
    Stopped,
}

/// The caller's `between_steps`, called once a slice of the page's thread is spent.
struct Slices<'c, C, F> {
    clock: &'c C,
    between: F,
    since: f64,
}

impl<C: Clock, F: AsyncFnMut(f64) -> bool> Slices<'_, C, F> {
    /// Gives the browser a turn if this slice is spent; `Err` if the caller stopped the pass.
    async fn tick(&mut self, progress: f64) -> Result<(), Halted> {
        if self.clock.now_ms() - self.since < SLICE_MS {
            return Ok(());
        }
        let go_on = (self.between)(progress).await;
        self.since = self.clock.now_ms();
        if go_on {
            Ok(())
        } else {
            Err(Halted::Stopped)
        }
    }
}

/// One forward pass of the synthetic layer `config` with seed `seed`, on `session`'s backend,
/// and each head's importance. A GPU failure ends the session's use of the GPU and the pass is
/// done on the CPU kernel. Weights too large to store are generated inside the kernels: on a
/// hardware GPU in its matrix-product shader; otherwise in the CPU kernel's packing. Stored
/// weights go where the session measured them faster ([`Session::layer_choice`]).
///
/// Whatever runs on the page's thread (making the inputs and weights, the CPU kernel's pass,
/// the importance measure) runs in steps of bounded work ([`SteppedPass`], [`Measuring`]);
/// once a slice of [`SLICE_MS`] is spent, `between_steps(progress)` is awaited (the page
/// paints its progress bar and answers the reader there) and the pass stops if it says `false`.
pub async fn run(
    session: &Session,
    config: ModelConfig,
    seed: u32,
    clock: &impl Clock,
    between_steps: impl AsyncFnMut(f64) -> bool,
) -> Result<Run, Halted> {
    config.validate().map_err(Halted::Refused)?;
    let mut slices = Slices { clock, between: between_steps, since: clock.now_ms() };
    let inputs = make_inputs(&config, seed, &mut slices).await?;
    let weights = make_weights(&config, seed, &mut slices).await?;
    let gpu = session.gpu();
    // A software adapter generates weights about 40x slower than the CPU kernel (GPT-3 at 16
    // tokens: 40 s on SwiftShader against 1 s), so there the CPU kernel runs them.
    let usable = gpu.filter(|ctx| !(config.generates_weights() && ctx.is_software()));
    let (usable, choice) = match (usable, &weights) {
        (Some(ctx), LayerWeights::Stored(stored)) => {
            match session.layer_choice(&ctx, &config, stored, clock).await {
                Ok(Some(choice)) => ((choice.place == Place::Gpu).then_some(ctx), Some(choice)),
                Ok(None) => (Some(ctx), None),
                Err(e) => {
                    session.fail(e);
                    (None, None)
                }
            }
        }
        (other, _) => (other, None),
    };
    let t0 = clock.now_ms();
    let mut ran = None;
    if let Some(ctx) = usable {
        match ctx.forward_layer(&config, &inputs.x, &weights).await {
            Ok(forward) => {
                let weights =
                    if config.generates_weights() { WeightsIn::GpuKernel } else { WeightsIn::Memory };
                ran = Some((forward, Backend::Gpu(ctx), weights, choice));
            }
            Err(e) => session.fail(e),
        }
    }
    let (forward, backend, weights, choice) = match ran {
        Some(ran) => ran,
        None => {
            let mut pass = SteppedPass::new(&config, &inputs.x, &weights);
            while pass.step() {
                slices.tick(0.1 + 0.8 * pass.progress()).await?;
            }
            let weights = match weights {
                LayerWeights::Stored(_) => WeightsIn::Memory,
                LayerWeights::Generated(_) => WeightsIn::CpuKernel { software_gpu: session.gpu().is_some() },
            };
            (pass.finish(), Backend::Cpu(Kernel::Simd), weights, choice.filter(|c| c.place == Place::Cpu))
        }
    };
    let forward_ms = clock.now_ms() - t0;
    let mut measuring = Measuring::new(&forward.contributions, &forward.output, seed);
    while measuring.step() {
        slices.tick(0.9 + 0.1 * measuring.progress()).await?;
    }
    let importance = Arc::new(measuring.finish());
    let n = config.seq_len;
    let mut attention_sum = vec![0.0; n * n];
    for h in 0..config.num_heads {
        add_head(&mut attention_sum, &forward.attention, n, h);
        slices.tick(1.0).await?;
    }
    let words = inputs.words().collect();
    Ok(Run {
        seed,
        config,
        forward,
        importance,
        attention_sum,
        words,
        inputs,
        forward_ms,
        backend,
        weights,
        choice,
    })
}

/// The pass's inputs, made a few rows at a time.
async fn make_inputs<C: Clock, F: AsyncFnMut(f64) -> bool>(
    config: &ModelConfig,
    seed: u32,
    slices: &mut Slices<'_, C, F>,
) -> Result<Inputs, Halted> {
    let mut inputs = Inputs::tokens(config, seed);
    let rows = (MADE_PER_PIECE / config.d_model).max(1);
    for r0 in (0..config.seq_len).step_by(rows) {
        inputs.fill_rows(seed, r0..(r0 + rows).min(config.seq_len));
        slices.tick(0.05 * r0 as f64 / config.seq_len as f64).await?;
    }
    Ok(inputs)
}

/// The pass's weights: the seed alone where they are generated in the kernels, else made a
/// piece at a time.
async fn make_weights<C: Clock, F: AsyncFnMut(f64) -> bool>(
    config: &ModelConfig,
    seed: u32,
    slices: &mut Slices<'_, C, F>,
) -> Result<LayerWeights, Halted> {
    if config.generates_weights() {
        return Ok(LayerWeights::for_config(config, seed));
    }
    let mut weights = Weights::zeroed(config.d_model);
    let len = weights.len();
    for i0 in (0..len).step_by(MADE_PER_PIECE) {
        weights.fill(seed, i0..(i0 + MADE_PER_PIECE).min(len));
        slices.tick(0.05 + 0.05 * i0 as f64 / len as f64).await?;
    }
    Ok(LayerWeights::Stored(weights))
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::cpu;

    #[test]
    fn a_cpu_run_is_the_cpu_kernels_pass_and_a_bad_shape_is_refused() {
        let session = Session::cpu_only();
        let config = ModelConfig { d_model: 48, num_heads: 6, seq_len: 5 };
        let ran = pollster::block_on(run(&session, config, 9, &|| 0.0, async |_| true)).unwrap();
        let inputs = Inputs::generate(&config, 9);
        let want = cpu::forward(Kernel::Simd, &config, &inputs.x, &Weights::generate(48, 9));
        let importance = Importance::measure(&want.contributions, &want.output, 9);
        assert_eq!(ran.ran_on(), Backend::Cpu(Kernel::Simd).label());
        assert_eq!(*ran.importance, importance);
        assert_eq!((ran.forward, ran.weights, ran.words.len()), (want, WeightsIn::Memory, 5));
        let bad = ModelConfig { num_heads: 7, ..config };
        let refused = pollster::block_on(run(&session, bad, 9, &|| 0.0, async |_| true));
        assert_eq!(refused.unwrap_err(), Halted::Refused(bad.validate().unwrap_err()));
    }

    /// With a clock that moves a slice per reading, the browser gets a turn between every two
    /// pieces of work, the progress it is told only grows, and a `false` stops the pass.
    #[test]
    fn a_long_pass_gives_the_browser_turns_and_stops_when_told() {
        let session = Session::cpu_only();
        let config = ModelConfig { d_model: 64, num_heads: 4, seq_len: 33 };
        let now = Cell::new(0.0);
        let clock = || {
            now.set(now.get() + SLICE_MS);
            now.get()
        };
        let seen = std::cell::RefCell::new(Vec::new());
        let ran = pollster::block_on(run(&session, config, 3, &clock, async |p| {
            seen.borrow_mut().push(p);
            true
        }))
        .unwrap();
        let seen = seen.into_inner();
        assert!(seen.len() > 10, "{} turns", seen.len());
        assert!(seen.windows(2).all(|w| w[0] <= w[1]) && seen.iter().all(|p| (0.0..=1.0).contains(p)));
        let alone = pollster::block_on(run(&session, config, 3, &|| 0.0, async |_| true)).unwrap();
        assert_eq!((ran.forward, ran.importance), (alone.forward, alone.importance));
        let turns = Cell::new(0);
        let stopped = pollster::block_on(run(&session, config, 3, &clock, async |_| {
            turns.set(turns.get() + 1);
            turns.get() < 3
        }));
        assert_eq!((stopped.unwrap_err(), turns.get()), (Halted::Stopped, 3));
    }
}
