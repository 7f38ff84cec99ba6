//! The root component: owns the reader's settings and pruned heads, runs the forward pass.

use std::collections::BTreeSet;
use std::sync::Arc;

use leptos::prelude::*;

use super::{controls::Controls, drift::DriftPanel, heads::HeadGrid, now_ms};
use crate::attention::{drift, ConfigError, Drift, HeadMask, Inputs, ModelConfig, Weights};
use crate::backend::Backend;
use crate::cpu::Forward;
use crate::settings::Settings;

/// One completed forward pass and what the page shows about it.
#[derive(Debug)]
pub struct Run {
    /// The settings it was computed for; two runs of equal settings are the same run.
    pub settings: Settings,
    /// The configuration (derived from the settings, validated).
    pub config: ModelConfig,
    /// Attention weights, per-head contributions and the full output.
    pub forward: Forward,
    /// The word at each position.
    pub words: Vec<&'static str>,
    /// Wall time of the forward pass, milliseconds.
    pub forward_ms: f64,
}

impl PartialEq for Run {
    fn eq(&self, other: &Self) -> bool {
        self.settings == other.settings
    }
}

/// The memoised result of the settings: a run, or why the configuration cannot run.
pub type RunResult = Result<Arc<Run>, ConfigError>;

fn compute(backend: Backend, settings: Settings) -> RunResult {
    let config = settings.config();
    config.validate()?;
    let weights = Weights::generate(config.d_model, settings.seed);
    let inputs = Inputs::generate(&config, settings.seed);
    let t0 = now_ms();
    let forward = backend.forward(&config, &inputs.x, &weights);
    let forward_ms = now_ms() - t0;
    Ok(Arc::new(Run {
        settings,
        config,
        forward,
        words: inputs.words().collect(),
        forward_ms,
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

fn measure_drift(run: &Run, pruned: &BTreeSet<usize>) -> DriftView {
    let t0 = now_ms();
    let mask = HeadMask::with_pruned(run.config.num_heads, pruned.iter().copied());
    let output = run.forward.contributions.recompose(&mask);
    let drift = drift(&run.forward.output, &output, run.config.d_model);
    DriftView {
        drift,
        active: mask.active_count(),
        total: mask.len(),
        elapsed_ms: now_ms() - t0,
    }
}

/// The whole page below its static header.
#[component]
pub fn App() -> impl IntoView {
    let search = window().location().search().unwrap_or_default();
    let (initial, url_notes) = Settings::from_query(&search);
    let settings = RwSignal::new(initial);
    // Heads the reader switched off. Indices past the current model's head count are kept and
    // ignored, so moving between presets does not lose a selection.
    let pruned = RwSignal::new(BTreeSet::<usize>::new());
    let backend = Backend::detect();

    let run = Memo::new(move |_| compute(backend, settings.get()));
    let drift =
        Memo::new(move |_| run.with(|r| r.as_ref().ok().map(|r| measure_drift(r, &pruned.read()))));

    // Push the settings into the address bar so that every view is a link.
    Effect::new(move |_| {
        let query = format!("?{}", settings.get().to_query());
        if let Ok(history) = window().history() {
            let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&query));
        }
    });

    let error = move || run.with(|r| r.as_ref().err().map(ToString::to_string));
    let timing = move || {
        run.with(|r| {
            r.as_ref().ok().map(|r| {
                let gflops = r.config.forward_flops() as f64 / 1e6 / r.forward_ms.max(1e-3);
                format!(
                    "Forward pass: {:.1} ms ({:.1} GFLOP/s) for d_model {}, {} heads of d_k = {}, {} tokens.",
                    r.forward_ms,
                    gflops,
                    r.config.d_model,
                    r.config.num_heads,
                    r.config.d_k(),
                    r.config.seq_len
                )
            })
        })
    };

    view! {
        <div class="toolbar">
            <Controls settings=settings />
            <span class="badge" data-testid="backend-badge" title="Where the attention runs">
                {backend.label()}
            </span>
        </div>
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
        <div class="panels">
            <HeadGrid run=run pruned=pruned />
            <DriftPanel run=run drift=drift pruned=pruned />
        </div>
    }
}
