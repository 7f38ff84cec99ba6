//! The seed's second and third claims, measured on the reader's machine.

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::app::{finished, ActiveBackend, DriftView, Importance, RunResource};
use super::{now_ms, yield_to_browser};
use crate::attention::{Inputs, ModelConfig, Weights};

/// Timings of the batched-heads experiment.
#[derive(Clone, Debug, PartialEq)]
struct Batched {
    config: ModelConfig,
    backend: String,
    all_heads_ms: f64,
    one_head_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Claims 2 (batched heads cost about one head) and 3 (pruning drift), with live numbers.
#[component]
pub fn Claims(
    run: RunResource,
    importance: Memo<Option<Importance>>,
    drift: Memo<Option<DriftView>>,
    backend: RwSignal<Option<ActiveBackend>, LocalStorage>,
) -> impl IntoView {
    let batched = RwSignal::new(None::<Result<Batched, String>>);
    let measuring = RwSignal::new(false);
    let measure = move |_| {
        let Some(config) = run.with(|r| finished(r).map(|r| r.config)) else { return };
        let Some(active) = backend.with(|b| b.as_ref().map(|b| b.backend.clone())) else { return };
        if config.generates_weights() {
            batched.set(Some(Err("this model's weights are generated on the fly, so each pass takes \
                seconds; compare batched and single-head passes on one of the other presets"
                .to_string())));
            return;
        }
        measuring.set(true);
        spawn_local(async move {
            // Let the page show "measuring" before the first (possibly long) forward pass.
            yield_to_browser().await;
            let one = ModelConfig { num_heads: 1, ..config };
            let weights = Weights::generate(config.d_model, 1);
            let inputs = Inputs::generate(&config, 1);
            let (mut all, mut single) = (Vec::new(), Vec::new());
            let mut failure = None;
            // Interleaved rounds, after one untimed warm-up of each.
            for round in 0..4 {
                for (cfg, times) in [(&config, &mut all), (&one, &mut single)] {
                    let t0 = now_ms();
                    if let Err(e) = active.forward(cfg, &inputs.x, &weights).await {
                        failure = Some(e.to_string());
                    }
                    if round > 0 {
                        times.push(now_ms() - t0);
                    }
                    yield_to_browser().await;
                }
            }
            batched.set(Some(match failure {
                Some(e) => Err(e),
                None => Ok(Batched {
                    config,
                    backend: active.label(),
                    all_heads_ms: median(all),
                    one_head_ms: median(single),
                }),
            }));
            measuring.set(false);
        });
    };
    let batched_text = move || {
        batched.get().map(|b| match b {
            Ok(b) => format!(
                "On {}: all {} heads of d_k = {} batched: {:.2} ms; one head of width {}: {:.2} ms. Ratio {:.2}.",
                b.backend,
                b.config.num_heads,
                b.config.d_k(),
                b.all_heads_ms,
                b.config.d_model,
                b.one_head_ms,
                b.all_heads_ms / b.one_head_ms
            ),
            Err(e) => format!("The measurement failed: {e}"),
        })
    };
    let pruning_text = move || {
        importance.with(|imp| {
            let imp = imp.as_ref()?;
            let heads = imp.per_head.len();
            let k = ((heads as f64) * 0.2).round() as usize;
            let least = imp.per_head[imp.ranked[0]];
            let most = imp.per_head[imp.ranked[heads - 1]];
            Some(format!(
                "Here, removing one head alone moves the output by {least:.3} (least important) to {most:.3} \
                 (most important), relative L2. Pruning the {k} least important of {heads} heads (20 %) \
                 moves it by {:.3}; {k} heads at random, by {:.3} on average.",
                imp.ranked_curve[k], imp.random_curve[k]
            ))
        })
    };
    let current = move || drift.with(|d| d.as_ref().map(|d| (d.total - d.active, d.drift.overall.rel_l2)));
    view! {
        <section class="panel claims" aria-labelledby="claims-title" data-testid="claims">
            <h2 id="claims-title">"Claim 2: all heads batched cost about one head"</h2>
            <p>
                "The heads are not run one after another: Q, K and V for every head come out of one matrix product, and each head's attention is a slice of one batched product. So H heads of width d_model / H cost about what one head of width d_model costs."
            </p>
            <button
                data-testid="measure-batched"
                disabled=move || measuring.get() || run.with(|r| finished(r).is_none())
                on:click=measure
            >
                {move || if measuring.get() { "Measuring…" } else { "Time it on this backend" }}
            </button>
            <p class="measured" data-testid="batched-result" aria-live="polite">{batched_text}</p>
            <h2>"Claim 3: many heads can be pruned with little drift"</h2>
            <p data-testid="pruning-claim">{pruning_text}</p>
            <p class="muted">
                {move || {
                    current()
                        .map(|(k, d)| format!("Now: {k} heads pruned, output moved by {d:.3}. "))
                        .unwrap_or_default()
                }}
                "These weights are random, like an untrained layer: its heads are nearly interchangeable, so no head is much more important than another. In trained models (Michel et al. 2019) 20 to 40 % of heads could be removed with no noticeable loss."
            </p>
        </section>
    }
}
