//! Where the page's passes run, and running them: the backend chosen once per session (the GPU
//! or the CPU kernel), named in the page's badge, and replaced by the CPU kernel for the rest of
//! the session when the GPU fails; the synthetic layer's pass ([`run`]) and the trained model's
//! ([`TrainedRunner`]) on it. A GPU failure is a value here, never an error the page must handle:
//! the pass is done again on the CPU kernel and the session remembers why.
//!
//! Unless the reader forced one (`?backend=`), a session with a GPU runs each pass where it was
//! measured faster: the first pass of each model times both backends on a few short passes
//! ([`calibrate`]) and later passes follow the lines fitted to them ([`placement`]).

mod calibrate;
pub mod placement;

use std::cell::RefCell;
use std::rc::Rc;

use self::calibrate::Probes;
use self::placement::Crossover;
pub use self::placement::{Choice, Place};
use crate::attention::clock::{more_repeats, Clock};
use crate::attention::config::MAX_SEQ_LEN;
use crate::attention::{ConfigError, HeadSet, Inputs, LayerWeights, ModelConfig, Weights};
use crate::cpu::generated::GeneratedPass;
use crate::cpu::{self, Forward, Kernel};
use crate::gpu::{GpuBert, GpuContext, GpuError};
use crate::model::analysis::Runner;
use crate::model::bert::{BertOutput, TOTAL_HEADS};
use crate::model::pruned::{self, PrunedBert};
use crate::model::MiniLm;
pub use crate::settings::Preference;

/// Where the forward pass runs.
#[derive(Clone)]
pub enum Backend {
    /// WebGPU (or Vulkan/Metal/DX12 natively) through wgpu.
    Gpu(Rc<GpuContext>),
    /// The CPU path on the given kernel.
    Cpu(Kernel),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

impl Backend {
    /// Chooses once: the GPU unless the reader asked for the CPU or no GPU can be had. The
    /// second value says why the GPU is not used, when it is not.
    pub async fn select(preference: Preference) -> (Backend, Option<GpuUnused>) {
        let cpu = Backend::Cpu(Kernel::Simd);
        if preference == Preference::Cpu {
            return (cpu, Some(GpuUnused::Declined));
        }
        match GpuContext::acquire().await {
            Ok(ctx) => (Backend::Gpu(Rc::new(ctx)), None),
            Err(e) => (cpu, Some(GpuUnused::Failed(e))),
        }
    }

    /// Short name for the badge, e.g. "WebGPU · Apple M2 (BrowserWebGpu)" or "CPU · wasm simd128".
    pub fn label(&self) -> String {
        match self {
            Backend::Gpu(ctx) if cfg!(target_arch = "wasm32") => {
                format!("WebGPU · {}", ctx.adapter_label())
            }
            Backend::Gpu(ctx) => format!("GPU · {}", ctx.adapter_label()),
            Backend::Cpu(kernel) => format!("CPU · {}", kernel.describe()),
        }
    }

    /// Whether this is a GPU backend.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Backend::Gpu(_))
    }

    /// One forward pass on this backend. The CPU path cannot fail (its configuration was
    /// validated); the GPU path reports device loss and other faults as values.
    pub async fn forward(
        &self,
        config: &ModelConfig,
        x: &[f32],
        weights: &Weights,
    ) -> Result<Forward, GpuError> {
        match self {
            Backend::Gpu(ctx) => ctx.forward(config, x, weights).await,
            Backend::Cpu(kernel) => Ok(cpu::forward(*kernel, config, x, weights)),
        }
    }
}

/// Why the GPU is not in use.
#[derive(Clone, Debug, PartialEq)]
pub enum GpuUnused {
    /// The reader asked for the CPU (`?backend=cpu`).
    Declined,
    /// Getting a GPU failed.
    Failed(GpuError),
}

impl GpuUnused {
    /// Whether trying the GPU again could help: not when asked for the CPU, nor when the browser
    /// has no WebGPU at all.
    pub fn retryable(&self) -> bool {
        matches!(self, GpuUnused::Failed(e) if *e != GpuError::NoWebGpu)
    }
}

impl std::fmt::Display for GpuUnused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuUnused::Declined => f.write_str("CPU chosen with ?backend=cpu"),
            GpuUnused::Failed(e) => write!(f, "not using the GPU: {}", one_line(&e.to_string())),
        }
    }
}

/// The first line of a GPU error, at most 240 characters: browsers append multi-line
/// diagnostics (a WGSL parse error quotes the source) that belong in the console, not the page.
pub fn one_line(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim_end_matches([':', ' ']);
    let cut: String = first.chars().take(240).collect();
    if cut.len() < message.trim_end().len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// The page's backend over a session: the one selected, and the CPU kernel for good once the GPU
/// has failed (until the reader asks for the GPU again, which starts a new session).
#[derive(Debug)]
pub struct Session {
    selected: Backend,
    unused: Option<GpuUnused>,
    retried: bool,
    failed: RefCell<Option<GpuError>>,
    /// Whether each pass runs where it was measured faster (the reader left `?backend=` alone).
    measured: bool,
    /// The synthetic layer's calibrations so far, by shape (`d_model`, heads).
    layers: RefCell<Vec<((usize, usize), Crossover)>>,
}

impl Session {
    /// Selects a backend for `preference` ([`Backend::select`]); `retried` when the reader asked
    /// for the GPU again after it failed.
    pub async fn start(preference: Preference, retried: bool) -> Session {
        let (selected, unused) = Backend::select(preference).await;
        Session {
            selected,
            unused,
            retried,
            failed: RefCell::new(None),
            measured: preference == Preference::Auto,
            layers: RefCell::new(Vec::new()),
        }
    }

    /// A session on the CPU kernel, with nothing to say about the GPU: the quick first passes
    /// drawn while the page is still asking for a GPU.
    pub fn cpu_only() -> Session {
        Session {
            selected: Backend::Cpu(Kernel::Simd),
            unused: None,
            retried: false,
            failed: RefCell::new(None),
            measured: false,
            layers: RefCell::new(Vec::new()),
        }
    }

    /// Whether a pass of `config` will first time both backends for its shape (the reader left
    /// the choice to the page, it has a GPU, and the shape has not been measured yet).
    pub fn will_calibrate(&self, config: &ModelConfig) -> bool {
        self.measured
            && !config.generates_weights()
            && self.gpu().is_some()
            && self.calibrated(config).is_none()
    }

    /// The calibration of `config`'s shape (`d_model`, heads), once made.
    fn calibrated(&self, config: &ModelConfig) -> Option<Crossover> {
        let shape = (config.d_model, config.num_heads);
        self.layers.borrow().iter().find(|(s, _)| *s == shape).map(|(_, c)| *c)
    }

    /// Where a pass of the synthetic layer `config` (stored weights) runs on `ctx`: `None` when
    /// the reader forced the GPU; else the choice measured for its shape, calibrating the shape
    /// on its first pass (a few short passes on each backend, timed on `clock`).
    async fn layer_choice(
        &self,
        ctx: &Rc<GpuContext>,
        config: &ModelConfig,
        clock: &impl Clock,
    ) -> Result<Option<Choice>, GpuError> {
        if !self.measured {
            return Ok(None);
        }
        let crossover = match self.calibrated(config) {
            Some(c) => c,
            None => {
                let c = calibrate_layer(ctx, config, clock).await?;
                self.layers.borrow_mut().push(((config.d_model, config.num_heads), c));
                c
            }
        };
        Ok(Some(crossover.choose(config.forward_flops())))
    }

    /// Where passes run now.
    pub fn backend(&self) -> Backend {
        match (&self.selected, self.failed.borrow().is_some()) {
            (Backend::Gpu(_), true) => Backend::Cpu(Kernel::Simd),
            (selected, _) => selected.clone(),
        }
    }

    /// Where passes of `run`'s model run now: where `run` ran, unless that was a GPU that has
    /// failed since.
    pub fn backend_for(&self, run: &Run) -> Backend {
        match (&run.backend, self.gpu()) {
            (Backend::Gpu(_), None) => Backend::Cpu(Kernel::Simd),
            (backend, _) => backend.clone(),
        }
    }

    /// The GPU, while the session uses it.
    pub fn gpu(&self) -> Option<Rc<GpuContext>> {
        match self.backend() {
            Backend::Gpu(ctx) => Some(ctx),
            Backend::Cpu(_) => None,
        }
    }

    /// Records a GPU failure: every later pass of the session runs on the CPU kernel.
    pub fn fail(&self, e: GpuError) {
        self.failed.borrow_mut().get_or_insert(e);
    }

    /// The badge's text: where passes run now.
    pub fn label(&self) -> String {
        self.backend().label()
    }

    /// The badge's text when no single pass speaks for the page (the trained model's passes each
    /// go where they were measured faster): where passes run, or that both are in play.
    pub fn placement_label(&self) -> String {
        match self.gpu() {
            Some(ctx) if self.measured => format!(
                "CPU · {} or WebGPU · {}, measured per pass",
                Kernel::Simd.describe(),
                ctx.adapter_label()
            ),
            _ => self.label(),
        }
    }

    /// Why the GPU is not used, when it is not (and the session has something to say).
    pub fn note(&self) -> Option<String> {
        if let Some(e) = self.failed.borrow().as_ref() {
            return Some(format!(
                "switched to the CPU because {}; your settings are kept",
                one_line(&e.to_string())
            ));
        }
        self.unused.as_ref().map(|u| match self.retried {
            true => format!("tried the GPU again; {u}; still on the CPU, your settings are kept"),
            false => u.to_string(),
        })
    }

    /// Whether asking for the GPU again could help (it failed, and the browser has WebGPU).
    pub fn retryable(&self) -> bool {
        self.failed.borrow().is_some() || self.unused.as_ref().is_some_and(GpuUnused::retryable)
    }
}

/// Times the synthetic layer of `config`'s shape on both backends ([`calibrate::crossover`]): 4
/// tokens and the longest power of two within [`QUICK_CPU_FLOPS`], over the lengths it accepts.
async fn calibrate_layer(
    ctx: &Rc<GpuContext>,
    config: &ModelConfig,
    clock: &impl Clock,
) -> Result<Crossover, GpuError> {
    let at = |n: usize| ModelConfig { seq_len: n, ..*config };
    let largest = (1..=MAX_SEQ_LEN).rev().find(|&n| at(n).validate().is_ok()).unwrap_or(config.seq_len);
    let probes = Probes::within(|n| at(n).forward_flops(), QUICK_CPU_FLOPS, largest);
    let weights = Weights::generate(config.d_model, 1);
    let inputs = [probes.small, probes.large].map(|n| Inputs::generate(&at(n), 1));
    let (gpu, cpu) = (Backend::Gpu(ctx.clone()), Backend::Cpu(Kernel::Simd));
    calibrate::crossover(
        probes,
        |n| at(n).forward_flops(),
        clock,
        async |place, n| {
            let x = &inputs[usize::from(n != probes.small)].x;
            let backend = if place == Place::Gpu { &gpu } else { &cpu };
            backend.forward(&at(n), x, &weights).await.map(drop)
        },
    )
    .await
}

/// Largest forward pass (FLOPs) drawn on the CPU kernel while the GPU is still starting: about
/// 10 ms in wasm, so the first heatmaps do not wait for the GPU.
pub const QUICK_CPU_FLOPS: u64 = 300_000_000;

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

/// The trained model where the page runs it: on the GPU while that works (its weights uploaded
/// once) and, unless the reader forced the GPU, where it was measured faster for the sentence's
/// length; else on the CPU kernel. A GPU failure moves it to the CPU for good, with a note; the
/// page's other passes are not affected.
pub struct TrainedRunner {
    model: Rc<MiniLm>,
    gpu: RefCell<Option<Rc<GpuBert>>>,
    note: RefCell<Option<String>>,
    crossover: Option<Crossover>,
}

/// The trained model's calibration: sentences of 8 and 64 tokens, over the 512 it accepts.
const TRAINED_PROBES: Probes = Probes { small: 8, large: 64, largest: crate::model::bert::MAX_POSITIONS };

impl TrainedRunner {
    /// Puts `model` on `session`'s GPU, if it has one, and (unless the reader forced the GPU)
    /// times it there and on the CPU kernel on `clock`; if that fails, the runner uses the CPU
    /// kernel and says why.
    pub async fn new(model: Rc<MiniLm>, session: &Session, clock: &impl Clock) -> TrainedRunner {
        let (mut gpu, mut note, mut crossover) = (None, None, None);
        if let Some(ctx) = session.gpu() {
            let placed = match GpuBert::new(ctx, &model.bert).await {
                Ok(g) if session.measured => calibrate_trained(&model, &g, clock).await.map(|c| (g, Some(c))),
                Ok(g) => Ok((g, None)),
                Err(e) => Err(e),
            };
            match placed {
                Ok((g, c)) => (gpu, crossover) = (Some(Rc::new(g)), c),
                Err(e) => note = Some(format!("The trained model runs on the CPU because {e}.")),
            }
        }
        TrainedRunner { model, gpu: RefCell::new(gpu), note: RefCell::new(note), crossover }
    }

    /// The model.
    pub fn model(&self) -> &MiniLm {
        &self.model
    }

    /// The measured choice for a sentence of `tokens` tokens, when the page chose.
    pub fn choice(&self, tokens: usize) -> Option<Choice> {
        let all = HeadSet::all(TOTAL_HEADS);
        let choice = self.crossover?.choose(pruned::cost(&all, &[tokens]).total_flops);
        self.gpu.borrow().as_ref().map(|_| choice)
    }

    /// The GPU model, when a sentence of `tokens` tokens runs on it.
    fn gpu_for(&self, tokens: usize) -> Option<Rc<GpuBert>> {
        let wanted = self.choice(tokens).is_none_or(|c| c.place == Place::Gpu);
        self.gpu.borrow().clone().filter(|_| wanted)
    }

    /// Whether a sentence of `tokens` tokens runs on the GPU now.
    pub fn on_gpu(&self, tokens: usize) -> bool {
        self.gpu_for(tokens).is_some()
    }

    /// Where a sentence of `tokens` tokens runs now, and why when a measurement chose, for the
    /// page: "the CPU kernel (wasm simd128), faster here than on the GPU: about 12 ms against …".
    pub fn ran_on(&self, tokens: usize) -> String {
        let on = match self.on_gpu(tokens) {
            true => "the GPU (WebGPU)".to_string(),
            false => format!("the CPU kernel ({})", Kernel::Simd.describe()),
        };
        match self.choice(tokens) {
            Some(c) => format!("{on}, {}", c.why()),
            None => on.to_string(),
        }
    }

    /// Why it is not on the page's GPU, when it is not.
    pub fn note(&self) -> Option<String> {
        self.note.borrow().clone()
    }
}

/// Forward times of the full model and of the really pruned one, on the same sentence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrunedSpeed {
    /// Median milliseconds of the full model.
    pub full_ms: f64,
    /// Median milliseconds of the pruned one.
    pub pruned_ms: f64,
    /// Whether both ran on the GPU (else on the CPU kernel).
    pub on_gpu: bool,
    /// The finest step these medians can tell (see `Batched::step_ms`).
    pub step_ms: f64,
}

impl PrunedSpeed {
    /// The pruned model's time as a share of the full one's.
    pub fn ratio(&self) -> f64 {
        self.pruned_ms / self.full_ms
    }
}

impl TrainedRunner {
    /// Times the full model against the one with only `heads` kept (its weights really removed)
    /// on `ids`: `rounds` interleaved rounds after one untimed round, medians, on the GPU while
    /// the runner uses it (the CPU kernel if that fails), else on the CPU kernel. `between` is
    /// awaited after each sample; a sample repeats its pass as often as `clock` needs.
    pub async fn time_pruned(
        &self,
        ids: &[u32],
        heads: &HeadSet,
        rounds: usize,
        clock: &impl Clock,
        mut between: impl AsyncFnMut(),
    ) -> PrunedSpeed {
        let bert = &self.model.bert;
        let all = HeadSet::all(TOTAL_HEADS);
        let cut = PrunedBert::new(bert, heads);
        if let Some(full) = self.gpu_for(ids.len()) {
            if let Ok(pruned) = GpuBert::pruned(full.context(), &cut).await {
                let timed = interleaved(rounds, clock, &mut between, async |is_pruned| {
                    let (model, set) = if is_pruned { (&pruned, heads) } else { (&*full, &all) };
                    model.forward(bert, ids, set).await.map(drop)
                })
                .await;
                if let Ok(t) = timed {
                    return PrunedSpeed {
                        full_ms: t.first_ms,
                        pruned_ms: t.second_ms,
                        on_gpu: true,
                        step_ms: t.step_ms,
                    };
                }
            }
        }
        let whole = PrunedBert::new(bert, &all);
        let timed = interleaved(rounds, clock, &mut between, async |is_pruned| {
            std::hint::black_box(if is_pruned { &cut } else { &whole }.embed(Kernel::Simd, ids));
            Ok::<(), GpuError>(())
        })
        .await;
        let t = timed.unwrap_or(Timed { first_ms: f64::NAN, second_ms: f64::NAN, step_ms: f64::NAN });
        PrunedSpeed { full_ms: t.first_ms, pruned_ms: t.second_ms, on_gpu: false, step_ms: t.step_ms }
    }
}

/// What `interleaved` measured: median milliseconds per pass of each side, and the finest step
/// they can tell.
struct Timed {
    first_ms: f64,
    second_ms: f64,
    step_ms: f64,
}

/// Median milliseconds per pass of `pass(false)` and `pass(true)`, timed alternately for
/// `rounds` rounds after one untimed round, awaiting `between` after each sample. On a coarse
/// clock the untimed round finds how many passes a sample needs to span `SAMPLE_TICKS` ticks,
/// for each side; an exact clock times single passes.
async fn interleaved<E>(
    rounds: usize,
    clock: &impl Clock,
    between: &mut impl AsyncFnMut(),
    mut pass: impl AsyncFnMut(bool) -> Result<(), E>,
) -> Result<Timed, E> {
    let (mut reps, mut times) = ([1usize; 2], [Vec::new(), Vec::new()]);
    for round in 0..=rounds {
        for side in [false, true] {
            let i = usize::from(side);
            loop {
                let t0 = clock.now_ms();
                for _ in 0..reps[i] {
                    pass(side).await?;
                }
                let elapsed = clock.now_ms() - t0;
                between().await;
                if round > 0 {
                    times[i].push(elapsed / reps[i] as f64);
                    break;
                }
                match more_repeats(clock.resolution_ms(), reps[i], elapsed) {
                    Some(more) => reps[i] = more,
                    None => break,
                }
            }
        }
    }
    let median = |t: &[f64]| crate::attention::stats::median(t).unwrap_or(f64::NAN);
    let step_ms = clock.resolution_ms() / reps[0].min(reps[1]) as f64;
    Ok(Timed { first_ms: median(&times[0]), second_ms: median(&times[1]), step_ms })
}

/// Times the trained model on both backends ([`calibrate::crossover`]) on sentences of the
/// word "the", with every head.
async fn calibrate_trained(model: &MiniLm, gpu: &GpuBert, clock: &impl Clock) -> Result<Crossover, GpuError> {
    let all = HeadSet::all(TOTAL_HEADS);
    let ids = |n: usize| model.ids(&"the ".repeat(n - 2));
    let sentences = [ids(TRAINED_PROBES.small), ids(TRAINED_PROBES.large)];
    let flops = |n: usize| pruned::cost(&all, &[n]).total_flops;
    calibrate::crossover(TRAINED_PROBES, flops, clock, async |place, n| {
        let ids = &sentences[usize::from(n != TRAINED_PROBES.small)];
        match place {
            Place::Gpu => gpu.forward(&model.bert, ids, &all).await.map(drop),
            Place::Cpu => {
                std::hint::black_box(model.bert.forward(Kernel::Simd, ids, &all));
                Ok(())
            }
        }
    })
    .await
}

impl Runner for TrainedRunner {
    async fn run(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> BertOutput {
        if let Some(gpu) = self.gpu_for(ids.len()) {
            match gpu.forward_from(&self.model.bert, ids, heads, base).await {
                Ok(out) => return out,
                Err(e) => {
                    *self.gpu.borrow_mut() = None;
                    *self.note.borrow_mut() =
                        Some(format!("The trained model switched to the CPU because {e}."));
                }
            }
        }
        self.model.bert.run(ids, heads, base).await
    }
}

// Natively only: pollster drives the futures.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn gpu_errors_are_shown_on_one_line() {
        assert_eq!(one_line("device lost"), "device lost");
        assert_eq!(
            one_line("pipeline creation failed: Error while parsing WGSL: :1:1 error: unexpected token\nthis is not WGSL\n^^^^"),
            "pipeline creation failed: Error while parsing WGSL: :1:1 error: unexpected token…"
        );
        assert_eq!(one_line(&"x".repeat(500)).chars().count(), 241);
    }

    #[test]
    fn a_session_says_why_the_gpu_is_not_used_and_whether_to_try_again() {
        let declined = pollster::block_on(Session::start(Preference::Cpu, false));
        assert_eq!(declined.label(), Backend::Cpu(Kernel::Simd).label());
        assert_eq!(declined.placement_label(), declined.label(), "no GPU in play: the CPU kernel alone");
        assert_eq!(declined.note().as_deref(), Some("CPU chosen with ?backend=cpu"));
        assert!(!declined.retryable() && declined.gpu().is_none());
        let quick = Session::cpu_only();
        assert_eq!((quick.note(), quick.retryable()), (None, false));
        quick.fail(GpuError::DeviceLost("destroyed".into()));
        quick.fail(GpuError::Internal("a consequence".into()));
        assert_eq!(
            quick.note().as_deref(),
            Some("switched to the CPU because the GPU device was lost (destroyed); your settings are kept")
        );
        assert!(quick.retryable());
        let retried = Session {
            selected: Backend::Cpu(Kernel::Simd),
            unused: Some(GpuUnused::Failed(GpuError::NoAdapter("rejected".into()))),
            retried: true,
            failed: RefCell::new(None),
            measured: true,
            layers: RefCell::new(Vec::new()),
        };
        assert!(retried.retryable());
        assert!(retried
            .note()
            .unwrap()
            .starts_with("tried the GPU again; not using the GPU: no WebGPU adapter"));
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

    /// A clock that shows whole milliseconds of a time the test advances, as Firefox's does.
    struct WholeMs(std::cell::Cell<f64>);

    impl Clock for WholeMs {
        fn now_ms(&self) -> f64 {
            self.0.get().floor()
        }

        fn resolution_ms(&self) -> f64 {
            1.0
        }
    }

    #[test]
    fn on_a_coarse_clock_samples_repeat_until_they_can_tell_sub_tick_passes_apart() {
        // Passes of 0.25 and 0.1 ms on a 1 ms clock: read singly, both would be 0 or 1 ms.
        let clock = WholeMs(std::cell::Cell::new(0.3));
        let (mut samples, mut passes) = (0, [0usize; 2]);
        let timed = pollster::block_on(interleaved(3, &clock, &mut async || samples += 1, async |side| {
            passes[usize::from(side)] += 1;
            clock.0.set(clock.0.get() + if side { 0.1 } else { 0.25 });
            Ok::<(), ()>(())
        }))
        .unwrap();
        assert!((timed.first_ms / 0.25 - 1.0).abs() < 0.03, "{}", timed.first_ms);
        assert!((timed.second_ms / 0.1 - 1.0).abs() < 0.03, "{}", timed.second_ms);
        // Each timed sample spans at least 50 ticks, and the step shown is one tick over the
        // passes of the side that repeated least.
        assert!(passes[0] >= 4 * 200 && passes[1] >= 4 * 500, "{passes:?}");
        assert!(timed.step_ms > 0.0 && timed.step_ms <= 1.0 / 200.0, "{}", timed.step_ms);
        assert!(samples >= 8, "the browser gets a turn after every sample");
    }

    #[test]
    fn a_cpu_run_is_the_cpu_kernels_pass_and_a_bad_shape_is_refused() {
        let session = Session::cpu_only();
        let config = ModelConfig { d_model: 48, num_heads: 6, seq_len: 5 };
        let run = pollster::block_on(run(&session, config, 9, &|| 0.0, async |_| {})).unwrap();
        let inputs = Inputs::generate(&config, 9);
        let want = cpu::forward(Kernel::Simd, &config, &inputs.x, &Weights::generate(48, 9));
        assert_eq!(run.ran_on(), Backend::Cpu(Kernel::Simd).label());
        assert_eq!((run.forward, run.weights, run.words.len()), (want, WeightsIn::Memory, 5));
        let bad = ModelConfig { num_heads: 7, ..config };
        let refused = pollster::block_on(super::run(&session, bad, 9, &|| 0.0, async |_| {}));
        assert_eq!(refused.unwrap_err(), bad.validate().unwrap_err());
    }
}
