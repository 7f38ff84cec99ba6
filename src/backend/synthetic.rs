//! The synthetic layer's pass on the session's backend: stored weights where they were measured
//! faster, generated weights in the GPU's kernel or the CPU kernel's packing, and what the page
//! says about where it ran.

use super::calibrate::QUICK_CPU_FLOPS;
use super::choice::Backend;
use super::placement::{Choice, Place};
use super::session::Session;
use crate::attention::clock::Clock;
use crate::attention::{ConfigError, Inputs, LayerWeights, ModelConfig};
use crate::cpu::generated::GeneratedPass;
use crate::cpu::{self, Forward, Kernel};

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
    /// The word at each position.
    pub words: Vec<&'static str>,
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

/// One forward pass of the synthetic layer `config` with seed `seed`, on `session`'s backend.
/// A GPU failure ends the session's use of the GPU and the pass is done on the CPU kernel.
/// Weights too large to store are generated inside the kernels: on a hardware GPU in its
/// matrix-product shader; otherwise in the CPU kernel's packing, in steps, with
/// `between_steps(progress)` awaited between them (the page paints its progress bar there).
/// Stored weights go where the session measured them faster ([`Session::layer_choice`]).
pub async fn run(
    session: &Session,
    config: ModelConfig,
    seed: u32,
    clock: &impl Clock,
    mut between_steps: impl AsyncFnMut(f64),
) -> Result<Run, ConfigError> {
    config.validate()?;
    let inputs = Inputs::generate(&config, seed);
    let weights = LayerWeights::for_config(&config, seed);
    let gpu = session.gpu();
    // A software adapter generates weights about 40x slower than the CPU kernel (GPT-3 at 16
    // tokens: 40 s on SwiftShader against 1 s), so there the CPU kernel runs them.
    let usable = gpu.filter(|ctx| !(config.generates_weights() && ctx.is_software()));
    let (usable, choice) = match usable {
        Some(ctx) if !config.generates_weights() => match session.layer_choice(&ctx, &config, clock).await {
            Ok(Some(choice)) => ((choice.place == Place::Gpu).then_some(ctx), Some(choice)),
            Ok(None) => (Some(ctx), None),
            Err(e) => {
                session.fail(e);
                (None, None)
            }
        },
        other => (other, None),
    };
    let t0 = clock.now_ms();
    if let Some(ctx) = usable {
        match ctx.forward_layer(&config, &inputs.x, &weights).await {
            Ok(forward) => {
                let weights =
                    if config.generates_weights() { WeightsIn::GpuKernel } else { WeightsIn::Memory };
                let (backend, forward_ms) = (Backend::Gpu(ctx), clock.now_ms() - t0);
                return Ok(Run {
                    seed,
                    config,
                    forward,
                    words: inputs.words().collect(),
                    forward_ms,
                    backend,
                    weights,
                    choice,
                });
            }
            Err(e) => session.fail(e),
        }
    }
    let (forward, weights) = match &weights {
        LayerWeights::Stored(w) => (cpu::forward(Kernel::Simd, &config, &inputs.x, w), WeightsIn::Memory),
        LayerWeights::Generated(g) => {
            let mut pass = GeneratedPass::new(&config, &inputs.x, *g);
            while pass.step() {
                between_steps(pass.progress()).await;
            }
            (pass.finish(), WeightsIn::CpuKernel { software_gpu: session.gpu().is_some() })
        }
    };
    let backend = Backend::Cpu(Kernel::Simd);
    Ok(Run {
        seed,
        config,
        forward,
        words: inputs.words().collect(),
        forward_ms: clock.now_ms() - t0,
        backend,
        weights,
        choice: choice.filter(|c| c.place == Place::Cpu),
    })
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::attention::Weights;

    #[test]
    fn a_cpu_run_is_the_cpu_kernels_pass_and_a_bad_shape_is_refused() {
        let session = Session::cpu_only();
        let config = ModelConfig { d_model: 48, num_heads: 6, seq_len: 5 };
        let ran = pollster::block_on(run(&session, config, 9, &|| 0.0, async |_| {})).unwrap();
        let inputs = Inputs::generate(&config, 9);
        let want = cpu::forward(Kernel::Simd, &config, &inputs.x, &Weights::generate(48, 9));
        assert_eq!(ran.ran_on(), Backend::Cpu(Kernel::Simd).label());
        assert_eq!((ran.forward, ran.weights, ran.words.len()), (want, WeightsIn::Memory, 5));
        let bad = ModelConfig { num_heads: 7, ..config };
        let refused = pollster::block_on(run(&session, bad, 9, &|| 0.0, async |_| {}));
        assert_eq!(refused.unwrap_err(), bad.validate().unwrap_err());
    }
}
