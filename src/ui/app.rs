//! The root component: owns the reader's settings, the pruned heads and the backend, and runs
//! the forward pass.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::charts::ConfigChart;
use super::claims::Claims;
use super::trained::TrainedModel;
use super::{controls::Controls, drift::DriftPanel, heads::HeadGrid, now_ms};
use crate::attention::importance::{drift_curve, head_importance, least_important_first, mean_random_curve};
use crate::attention::{drift, ConfigError, Drift, HeadMask, Inputs, LayerWeights, ModelConfig};
use crate::backend::{Backend, GpuUnused, Preference};
use crate::cpu::generated::GeneratedPass;
use crate::cpu::{Forward, Kernel};
use crate::embed::View;
use crate::gpu::GpuError;
use crate::settings::{Link, ModelChoice, Settings, Theme};

/// One completed forward pass and what the page shows about it.
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
    /// The backend that computed it, as the badge names it.
    pub backend: String,
}

/// Why there is no run to show.
#[derive(Clone, Debug, PartialEq)]
pub enum RunError {
    /// The configuration cannot run; the reader can fix it.
    Config(ConfigError),
    /// The GPU failed; the app switches to the CPU and runs again.
    Gpu(GpuError),
}

/// The result of the settings on the active backend.
pub type RunResult = Result<Arc<Run>, RunError>;

/// The forward pass, as the page's other parts read it: `None` until the first run finishes.
pub type RunResource = LocalResource<Option<RunResult>>;

/// The finished run in the resource's value, if there is one.
pub fn finished(value: &Option<Option<RunResult>>) -> Option<&Arc<Run>> {
    match value {
        Some(Some(Ok(run))) => Some(run),
        _ => None,
    }
}

/// The backend in use and, when it is not the GPU, why.
#[derive(Clone, Debug)]
pub struct ActiveBackend {
    /// Where forward passes run.
    pub backend: Backend,
    /// Why the GPU is not used (missing, failed, or not asked for).
    pub note: Option<String>,
    /// Whether asking for the GPU again could help (it failed, and the browser has WebGPU).
    pub retryable: bool,
}

impl ActiveBackend {
    /// What a backend selection gives the page; `retried` when the reader asked again.
    fn selected(backend: Backend, unused: Option<GpuUnused>, retried: bool) -> Self {
        let retryable = unused.as_ref().is_some_and(GpuUnused::retryable);
        let note = unused.map(|u| match retried {
            true => format!("tried the GPU again; {u}; still on the CPU, your settings are kept"),
            false => u.to_string(),
        });
        ActiveBackend { backend, note, retryable }
    }

    /// Makes this the page's backend (and the one `simulate_gpu_loss` reaches).
    fn install(self, signal: RwSignal<Option<ActiveBackend>, LocalStorage>) {
        ACTIVE_GPU.with(|g| *g.borrow_mut() = self.backend.is_gpu().then(|| self.backend.clone()));
        signal.set(Some(self));
    }
}

thread_local! {
    /// The GPU backend in use, so `simulate_gpu_loss` can reach it from JavaScript.
    static ACTIVE_GPU: RefCell<Option<Backend>> = const { RefCell::new(None) };
}

/// Destroys the page's GPU device, as a driver reset would, to demonstrate (and test) the
/// fallback to the CPU kernel. Returns whether there was a GPU device to lose.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn simulate_gpu_loss() -> bool {
    ACTIVE_GPU.with(|g| match g.borrow().as_ref() {
        Some(Backend::Gpu(ctx)) => {
            ctx.destroy();
            true
        }
        _ => false,
    })
}

/// Panics on purpose, to demonstrate (and test) what a panic that escapes every check does: the
/// banner with "reload with defaults", and the state logged to the console.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn simulate_panic() {
    panic!("a simulated panic (simulate_panic)");
}

/// Bytes of wasm linear memory: it only grows, so a leak shows as growth (tests watch it).
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn wasm_memory_bytes() -> f64 {
    (core::arch::wasm32::memory_size::<0>() * 65536) as f64
}

/// Arms a GPU fault (`adapter`, `pipeline` or `map`) for the next operation of its kind, to
/// demonstrate (and test) the fallback. Returns whether the name was known.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn inject_gpu_fault(kind: &str) -> bool {
    crate::gpu::Fault::parse(kind).map(crate::gpu::inject_fault).is_some()
}

/// The drift the CPU core computes for the settings in `query` with heads `pruned` switched off,
/// as "cosine rel_l2" with the page's rounding: end-to-end tests compare the page's numbers, on
/// whichever backend it runs, with this. Returns the configuration error's text if it cannot run.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn cpu_core_drift(query: &str, pruned: Vec<u32>) -> String {
    let (settings, _) = Settings::from_query(query);
    let config = settings.config();
    if let Err(e) = config.validate() {
        return e.to_string();
    }
    let inputs = Inputs::generate(&config, settings.seed);
    let fwd = match LayerWeights::for_config(&config, settings.seed) {
        LayerWeights::Stored(weights) => crate::cpu::forward(Kernel::Simd, &config, &inputs.x, &weights),
        LayerWeights::Generated(weights) => GeneratedPass::new(&config, &inputs.x, weights).finish(),
    };
    let mask = HeadMask::with_pruned(config.num_heads, pruned.into_iter().map(|h| h as usize));
    let d = drift(&fwd.output, &fwd.contributions.recompose(&mask), config.d_model).overall;
    format!("{:.6} {:.4}", d.cosine, d.rel_l2)
}

async fn compute(
    backend: Backend,
    config: ModelConfig,
    seed: u32,
    progress: RwSignal<Option<f64>>,
) -> RunResult {
    config.validate().map_err(RunError::Config)?;
    let inputs = Inputs::generate(&config, seed);
    let t0 = now_ms();
    let (forward, backend) = match LayerWeights::for_config(&config, seed) {
        LayerWeights::Stored(weights) => {
            let forward = backend.forward(&config, &inputs.x, &weights).await.map_err(RunError::Gpu)?;
            (forward, backend.label())
        }
        // Weights too large to store are generated inside the kernels: on the GPU in the
        // matrix-product shader; on the CPU in the packing, in steps, with the browser's turn
        // (and a progress bar) between them.
        // A software adapter generates weights about 40x slower than the CPU kernel (GPT-3 at 16
        // tokens: 40 s on SwiftShader against 1 s), so there the CPU kernel runs them.
        LayerWeights::Generated(weights) if matches!(&backend, Backend::Gpu(ctx) if !ctx.is_software()) => {
            let Backend::Gpu(ctx) = &backend else { unreachable!("matched a GPU") };
            let forward = ctx.forward_generated(&config, &inputs.x, weights).await.map_err(RunError::Gpu)?;
            (forward, format!("{} (weights generated in the kernel)", backend.label()))
        }
        LayerWeights::Generated(weights) => {
            let mut pass = GeneratedPass::new(&config, &inputs.x, weights);
            while pass.step() {
                progress.set(Some(pass.progress()));
                super::after_next_paint().await;
            }
            progress.set(None);
            let software_gpu = if backend.is_gpu() { ", as the GPU is a software adapter" } else { "" };
            let label = format!(
                "{} (weights generated on the fly{software_gpu})",
                Backend::Cpu(Kernel::Simd).label()
            );
            (pass.finish(), label)
        }
    };
    let forward_ms = now_ms() - t0;
    Ok(Arc::new(Run { seed, config, forward, words: inputs.words().collect(), forward_ms, backend }))
}

/// Drift of the pruned output, and what producing it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct DriftView {
    /// Per-token and overall drift against the full output.
    pub drift: Drift,
    /// Heads still active.
    pub active: usize,
    /// Heads in the model.
    pub total: usize,
    /// Milliseconds to recompose the output and measure the drift.
    pub elapsed_ms: f64,
}

/// How much each head matters in the current run, and drift against heads pruned.
#[derive(Clone, Debug, PartialEq)]
pub struct Importance {
    /// Relative L2 drift when each head alone is removed.
    pub per_head: Vec<f64>,
    /// Heads, least important first.
    pub ranked: Vec<usize>,
    /// Drift after pruning the first k of `ranked`, k = 0..=heads.
    pub ranked_curve: Vec<f64>,
    /// Mean drift after pruning k heads at random, k = 0..=heads.
    pub random_curve: Vec<f64>,
}

fn measure_importance(run: &Run) -> Importance {
    let (c, full) = (&run.forward.contributions, &run.forward.output);
    let per_head = head_importance(c, full);
    let ranked = least_important_first(&per_head);
    let ranked_curve = drift_curve(c, full, &ranked).iter().map(|d| d.rel_l2).collect();
    let random_curve = mean_random_curve(c, full, 8, run.seed);
    Importance { per_head, ranked, ranked_curve, random_curve }
}

fn measure_drift(run: &Run, pruned: &BTreeSet<usize>) -> DriftView {
    let t0 = now_ms();
    let mask = HeadMask::with_pruned(run.config.num_heads, pruned.iter().copied());
    let output = run.forward.contributions.recompose(&mask);
    let drift = drift(&run.forward.output, &output, run.config.d_model);
    DriftView { drift, active: mask.active_count(), total: mask.len(), elapsed_ms: now_ms() - t0 }
}

/// Largest forward pass (FLOPs) drawn on the CPU kernel while the GPU is still starting: about
/// 10 ms in wasm, so the first heatmaps do not wait for the GPU.
const QUICK_CPU_FLOPS: u64 = 300_000_000;

/// The whole page below its static header.
#[component]
pub fn App() -> impl IntoView {
    let search = window().location().search().unwrap_or_default();
    let (link, url_notes) = Link::from_query(&search);
    let initial = link.settings;
    let settings = RwSignal::new(initial);
    // How the page is embedded is fixed for its life: it comes from the iframe's src.
    let embed = link.embed.clone();
    let view_kind = embed.as_ref().map_or(View::All, |e| e.view);
    if let Some(embed) = &embed {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-embed", view_kind.as_str());
        }
        super::embedding::connect_host(embed, settings);
    }
    // Heads the reader switched off. Indices past the current model's head count are kept and
    // ignored, so moving between presets does not lose a selection.
    let pruned = RwSignal::new(BTreeSet::<usize>::new());
    // Chosen once, asynchronously (finding a GPU adapter is async); replaced by the CPU kernel
    // if the GPU fails later. wgpu objects are not Send on the web, hence local storage.
    let backend = RwSignal::new_local(None::<ActiveBackend>);
    spawn_local(async move {
        // Let the first heatmaps come from the CPU kernel before touching WebGPU: while the
        // browser's GPU process is busy (starting, or tearing down another page's device), asking
        // it for an adapter can hold this page for a second.
        super::yield_to_browser().await;
        super::yield_to_browser().await;
        let (chosen, unused) = Backend::select(initial.backend).await;
        ActiveBackend::selected(chosen, unused, false).install(backend);
    });

    // The trained model's own state: its sentence, the layer shown, its pruned heads (0..72).
    let text = RwSignal::new(link.text.clone().unwrap_or_else(|| super::trained::EXAMPLES[0].to_string()));
    let layer = RwSignal::new(link.layer);
    // Pruned heads from the link: the trained model's 72, or the synthetic model's heads.
    let starts_trained = matches!(initial.model, ModelChoice::Trained);
    let trained_pruned = RwSignal::new(if starts_trained { link.pruned.clone() } else { BTreeSet::new() });
    if !starts_trained {
        pruned.set(link.pruned.clone());
    }
    let trained = Memo::new(move |_| matches!(settings.read().model, ModelChoice::Trained));

    // Only the shape and the seed decide the forward pass (not the theme or the backend choice);
    // the trained model runs its own.
    let work = Memo::new(move |_| settings.with(|s| (!trained.get()).then(|| (s.config(), s.seed))));
    // Whether a pass is under way: the resource keeps showing the previous run meanwhile.
    let computing = RwSignal::new(false);
    // How far a long pass (generated weights) has got, 0 to 1.
    let progress = RwSignal::new(None::<f64>);
    let run: RunResource = LocalResource::new(move || {
        let work = work.get();
        // While the GPU starts (adapter, device, pipelines: about a second on a software
        // adapter), a configuration the CPU kernel finishes in milliseconds is drawn from it at
        // once; the GPU's pass replaces it when the GPU is ready.
        let quick =
            |(c, _): &(ModelConfig, u32)| c.validate().is_ok() && c.forward_flops() <= QUICK_CPU_FLOPS;
        let active = backend
            .with(|b| b.as_ref().map(|b| b.backend.clone()))
            .or_else(|| work.as_ref().filter(|w| quick(w)).map(|_| Backend::Cpu(Kernel::Simd)));
        let starts = active.is_some() && work.is_some();
        computing.set(starts);
        async move {
            let (Some(backend), Some((config, seed))) = (active, work) else { return None };
            // The CPU kernel holds the main thread: before a long pass, let the "Computing"
            // status paint first. A quick one just runs (waiting for a frame would delay the
            // first heatmaps while the browser is busy starting the GPU).
            if config.forward_flops() > QUICK_CPU_FLOPS {
                super::after_next_paint().await;
            }
            let result = compute(backend, config, seed, progress).await;
            computing.set(false);
            Some(result)
        }
    });
    let drift = Memo::new(move |_| run.with(|r| finished(r).map(|run| measure_drift(run, &pruned.read()))));
    let importance = Memo::new(move |_| run.with(|r| finished(r).map(|run| measure_importance(run))));

    // The theme goes on <html data-theme>, which the stylesheet follows.
    Effect::new(move |_| {
        let theme = settings.read().theme;
        if let Some(root) = document().document_element() {
            let _ = match theme {
                Theme::Auto => root.remove_attribute("data-theme"),
                t => root.set_attribute("data-theme", t.as_str()),
            };
        }
    });

    // A GPU failure switches to the CPU kernel; the settings and pruned heads stay as they are,
    // and the run starts again on the CPU.
    Effect::new(move |_| {
        if let Some(Some(Err(RunError::Gpu(e)))) = run.get() {
            ActiveBackend {
                backend: Backend::Cpu(Kernel::Simd),
                note: Some(format!(
                    "switched to the CPU because {}; your settings are kept",
                    crate::backend::one_line(&e.to_string())
                )),
                retryable: true,
            }
            .install(backend);
        }
    });

    // The whole state as a link; pushed into the address bar so that every view is one.
    let current_link = {
        let embed = embed.clone();
        move || Link {
            settings: settings.get(),
            text: Some(text.get()),
            layer: layer.get(),
            pruned: if trained.get() { trained_pruned.get() } else { pruned.get() },
            embed: embed.clone(),
        }
    };
    let full_view = {
        let current_link = current_link.clone();
        move || format!("?{}", current_link().full_view_query())
    };
    Effect::new(move |_| {
        let query = format!("?{}", current_link().to_query());
        if let Ok(history) = window().history() {
            let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&query));
        }
    });

    let error = move || {
        run.with(|r| match r {
            Some(Some(Err(RunError::Config(e)))) => Some(e.to_string()),
            _ => None,
        })
    };
    let busy = move || !trained.get() && (computing.get() || run.with(|r| !matches!(r, Some(Some(_)))));
    let timing = move || {
        if trained.get() {
            return "all-MiniLM-L6-v2: its passes are timed in its panel below.".to_string();
        }
        if computing.get() {
            let c = settings.read().config();
            if c.validate().is_err() {
                return "Checking the configuration…".to_string();
            }
            let generating = if c.generates_weights() {
                format!(
                    ", generating its {:.2} GiB of weights on the fly",
                    c.weight_bytes() as f64 / (1u64 << 30) as f64
                )
            } else {
                String::new()
            };
            let done = progress.get().map(|p| format!(": {:.0} %", 100.0 * p)).unwrap_or_default();
            return format!(
                "Computing d_model {}, {} heads, {} tokens ({:.2} GFLOP{generating}){done}…",
                c.d_model,
                c.num_heads,
                c.seq_len,
                c.forward_flops() as f64 / 1e9
            );
        }
        run.with(|r| match r {
            Some(Some(Err(_))) => String::new(),
            Some(Some(Ok(r))) => {
                let gflops = r.config.forward_flops() as f64 / 1e6 / r.forward_ms.max(1e-3);
                let interim = if backend.with(Option::is_none) { " (while the GPU starts)" } else { "" };
                format!(
                    "Forward pass on {}{interim}: {:.1} ms ({:.1} GFLOP/s) for d_model {}, {} heads of d_k = {}, {} tokens.",
                    r.backend,
                    r.forward_ms,
                    gflops,
                    r.config.d_model,
                    r.config.num_heads,
                    r.config.d_k(),
                    r.config.seq_len
                )
            }
            _ => "Computing…".to_string(),
        })
    };
    let badge = move || {
        backend.with(|b| match b {
            Some(b) => b.backend.label(),
            None => "preparing the GPU…".to_string(),
        })
    };
    let backend_note = move || backend.with(|b| b.as_ref().and_then(|b| b.note.clone()));
    // After a GPU failure (or none found at start), the reader can ask for the GPU again; the
    // settings and pruned heads stay, and the run repeats on whichever backend comes back.
    let retrying = RwSignal::new(false);
    let can_retry = move || backend.with(|b| b.as_ref().is_some_and(|b| b.retryable));
    let retry_gpu = move |_| {
        retrying.set(true);
        spawn_local(async move {
            let (chosen, unused) = Backend::select(Preference::Gpu).await;
            ActiveBackend::selected(chosen, unused, true).install(backend);
            retrying.set(false);
        });
    };

    // The chart column of either layout; the synthetic presets add the claims beneath the chart.
    let chart_column = move |with_claims: bool| {
        view_kind.shows_chart().then(|| {
            view! {
                <div class="column-chart">
                    <ConfigChart settings=settings />
                    {with_claims.then(|| view! { <Claims run=run importance=importance drift=drift backend=backend /> })}
                </div>
            }
        })
    };
    view! {
        <div class="toolbar">
            <Controls settings=settings />
            <span
                class="badge"
                class:busy=move || backend.with(Option::is_none)
                data-testid="backend-badge"
                role="status"
                title=move || backend_note().unwrap_or_default()
            >
                {badge}
            </span>
            {embed
                .is_some()
                .then(|| {
                    view! {
                        <a class="full-view" data-testid="full-view" href=full_view target="_blank" rel="noopener">
                            "Open the full explorer ↗"
                        </a>
                    }
                })}
        </div>
        {move || {
            backend_note()
                .map(|note| {
                    view! {
                        <p class="backend-note" data-testid="backend-note">
                            {note}
                            " "
                            <Show when=can_retry>
                                <button
                                    class="reset"
                                    data-testid="retry-gpu"
                                    disabled=move || retrying.get()
                                    on:click=retry_gpu
                                >
                                    {move || if retrying.get() { "Trying the GPU…" } else { "Try the GPU again" }}
                                </button>
                            </Show>
                        </p>
                    }
                })
        }}
        {(!url_notes.is_empty())
            .then(|| {
                view! {
                    <ul class="notes" data-testid="url-notes">
                        {url_notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}
                    </ul>
                }
            })}
        <Show when=move || error().is_some()>
            <p class="error" role="alert" data-testid="config-error">
                {error}
            </p>
        </Show>
        <p class="timing" class:busy=busy data-testid="timing" role="status">
            {timing}
        </p>
        {move || {
            progress
                .get()
                .map(|p| {
                    view! {
                        <progress class="pass-progress" data-testid="pass-progress" max="1" value=p aria-label="Forward pass progress"></progress>
                    }
                })
        }}
        <Show
            when=move || trained.get()
            fallback=move || {
                view! {
                    <div class="panels">
                        {chart_column(true)}
                        {view_kind
                            .shows_heads()
                            .then(|| view! { <HeadGrid run=run pruned=pruned importance=importance settings=settings /> })}
                        {view_kind
                            .shows_drift()
                            .then(|| {
                                view! {
                                    <DriftPanel
                                        run=run
                                        drift=drift
                                        pruned=pruned
                                        importance=importance
                                        settings=settings
                                    />
                                }
                            })}
                    </div>
                }
            }
        >
            <div class="panels trained-panels">
                {chart_column(false)}
                <TrainedModel text=text layer=layer pruned=trained_pruned backend=backend />
            </div>
        </Show>
    }
}
