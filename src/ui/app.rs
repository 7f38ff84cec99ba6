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
use crate::attention::config::MAX_HEADS;
use crate::attention::importance::{drift_curve, head_importance, least_important_first, mean_random_curve};
use crate::attention::{drift, ConfigError, Drift, HeadMask, Inputs, ModelConfig, Weights};
use crate::backend::Backend;
use crate::cpu::{Forward, Kernel};
use crate::gpu::GpuError;
use crate::model::bert::{HEADS, LAYERS};
use crate::settings::{format_head_list, parse_head_list, ModelChoice, Settings, Theme};

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
    let weights = Weights::generate(config.d_model, settings.seed);
    let inputs = Inputs::generate(&config, settings.seed);
    let fwd = crate::cpu::forward(Kernel::Simd, &config, &inputs.x, &weights);
    let mask = HeadMask::with_pruned(config.num_heads, pruned.into_iter().map(|h| h as usize));
    let d = drift(&fwd.output, &fwd.contributions.recompose(&mask), config.d_model).overall;
    format!("{:.6} {:.4}", d.cosine, d.rel_l2)
}

async fn compute(backend: Backend, config: ModelConfig, seed: u32) -> RunResult {
    config.validate().map_err(RunError::Config)?;
    let weights = Weights::generate(config.d_model, seed);
    let inputs = Inputs::generate(&config, seed);
    let t0 = now_ms();
    let forward = backend.forward(&config, &inputs.x, &weights).await.map_err(RunError::Gpu)?;
    let forward_ms = now_ms() - t0;
    Ok(Arc::new(Run {
        seed,
        config,
        forward,
        words: inputs.words().collect(),
        forward_ms,
        backend: backend.label(),
    }))
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

/// The whole page below its static header.
#[component]
pub fn App() -> impl IntoView {
    let search = window().location().search().unwrap_or_default();
    let (initial, mut url_notes) = Settings::from_query(&search);
    let settings = RwSignal::new(initial);
    // Heads the reader switched off. Indices past the current model's head count are kept and
    // ignored, so moving between presets does not lose a selection.
    let pruned = RwSignal::new(BTreeSet::<usize>::new());
    // Chosen once, asynchronously (finding a GPU adapter is async); replaced by the CPU kernel
    // if the GPU fails later. wgpu objects are not Send on the web, hence local storage.
    let backend = RwSignal::new_local(None::<ActiveBackend>);
    spawn_local(async move {
        let (chosen, note) = Backend::select(initial.backend).await;
        ACTIVE_GPU.with(|g| *g.borrow_mut() = chosen.is_gpu().then(|| chosen.clone()));
        backend.set(Some(ActiveBackend { backend: chosen, note }));
    });

    // The trained model's own state: its sentence, the layer shown, its pruned heads (0..72).
    let params = web_sys::UrlSearchParams::new_with_str(&search).ok();
    let param = |key: &str| params.as_ref().and_then(|p| p.get(key));
    let text = RwSignal::new(param("text").unwrap_or_else(|| super::trained::EXAMPLES[0].to_string()));
    let layer = RwSignal::new(param("layer").and_then(|l| l.parse::<usize>().ok()).map_or(0, |l| l.min(5)));
    // Pruned heads from the link: the trained model's 72, or the synthetic model's heads.
    let starts_trained = matches!(initial.model, ModelChoice::Trained);
    let limit = if starts_trained { LAYERS * HEADS } else { initial.config().num_heads.min(MAX_HEADS) };
    let (linked, note) = parse_head_list(&param("pruned").unwrap_or_default(), limit);
    url_notes.extend(note);
    let trained_pruned = RwSignal::new(if starts_trained { linked.clone() } else { BTreeSet::new() });
    if !starts_trained {
        pruned.set(linked);
    }
    let trained = Memo::new(move |_| matches!(settings.read().model, ModelChoice::Trained));

    // Only the shape and the seed decide the forward pass (not the theme or the backend choice);
    // the trained model runs its own.
    let work = Memo::new(move |_| settings.with(|s| (!trained.get()).then(|| (s.config(), s.seed))));
    let run: RunResource = LocalResource::new(move || {
        let work = work.get();
        let active = backend.with(|b| b.as_ref().map(|b| b.backend.clone()));
        async move {
            match (active, work) {
                (Some(backend), Some((config, seed))) => Some(compute(backend, config, seed).await),
                _ => None,
            }
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
            ACTIVE_GPU.with(|g| g.borrow_mut().take());
            backend.set(Some(ActiveBackend {
                backend: Backend::Cpu(Kernel::Simd),
                note: Some(format!("switched to the CPU because {e}; your settings are kept")),
            }));
        }
    });

    // Push the settings into the address bar so that every view is a link.
    Effect::new(move |_| {
        let mut query = format!("?{}", settings.get().to_query());
        let heads = if trained.get() {
            let encoded: String = js_sys::encode_uri_component(&text.read()).into();
            query.push_str(&format!("&text={encoded}&layer={}", layer.get()));
            format_head_list(&trained_pruned.read())
        } else {
            format_head_list(&pruned.read())
        };
        if !heads.is_empty() {
            query.push_str(&format!("&pruned={heads}"));
        }
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
    let timing = move || {
        if trained.get() {
            return "all-MiniLM-L6-v2 runs on the CPU kernel (wasm simd128); its GPU path is not built yet."
                .to_string();
        }
        run.with(|r| match r {
            Some(Some(Err(_))) => String::new(),
            Some(Some(Ok(r))) => {
                let gflops = r.config.forward_flops() as f64 / 1e6 / r.forward_ms.max(1e-3);
                format!(
                    "Forward pass on {}: {:.1} ms ({:.1} GFLOP/s) for d_model {}, {} heads of d_k = {}, {} tokens.",
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
            None => "looking for a GPU…".to_string(),
        })
    };
    let backend_note = move || backend.with(|b| b.as_ref().and_then(|b| b.note.clone()));

    view! {
        <div class="toolbar">
            <Controls settings=settings />
            <span class="badge" data-testid="backend-badge" title=move || backend_note().unwrap_or_default()>
                {badge}
            </span>
        </div>
        {move || {
            backend_note()
                .map(|note| {
                    view! {
                        <p class="backend-note" data-testid="backend-note">
                            {note}
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
        <p class="timing" data-testid="timing">
            {timing}
        </p>
        <Show
            when=move || trained.get()
            fallback=move || {
                view! {
                    <div class="panels">
                        <div class="column-chart">
                            <ConfigChart settings=settings />
                            <Claims run=run importance=importance drift=drift backend=backend />
                        </div>
                        <HeadGrid run=run pruned=pruned importance=importance />
                        <DriftPanel run=run drift=drift pruned=pruned importance=importance settings=settings />
                    </div>
                }
            }
        >
            <div class="panels trained-panels">
                <div class="column-chart">
                    <ConfigChart settings=settings />
                </div>
                <TrainedModel text=text layer=layer pruned=trained_pruned backend=backend />
            </div>
        </Show>
    }
}
