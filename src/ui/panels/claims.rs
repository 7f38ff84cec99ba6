//! The seed's second and third claims, measured on the reader's machine.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::attention::analysis::heads_count;
use crate::attention::clock::{show_ms, SAMPLE_TICKS};
use crate::backend::batched::{time_batched, untimeable, Batched, BATCHED_ROUNDS};
use crate::ui::browser::{clock_step_ms, yield_to_browser, PageHost};
use crate::ui::state::AppState;

/// Claims 2 (batched heads cost about one head) and 3 (pruning drift), with live numbers.
#[component]
pub fn Claims() -> impl IntoView {
    let state = AppState::get();
    let batched = RwSignal::new_local(None::<Result<Batched, String>>);
    let measuring = RwSignal::new(false);
    let measure = move |_| {
        let Some(run) = state.run() else { return };
        let Some(session) = state.session.get_untracked() else { return };
        let (config, backend) = (run.config, run.backend_in(&session));
        if let Some(why) = untimeable(&backend, &config) {
            batched.set(Some(Err(why)));
            return;
        }
        measuring.set(true);
        spawn_local(async move {
            // Let the page show "measuring" before the first (possibly long) forward pass.
            yield_to_browser().await;
            let result = time_batched(&backend, config, &PageHost, yield_to_browser).await;
            batched.set(Some(result.map_err(|e| e.to_string())));
            measuring.set(false);
        });
    };
    let batched_text = move || {
        batched.get().map(|b| match b {
            Ok(b) => format!(
                "On {}: {}: {}; one head of width {}: {}. Ratio {:.2}. \
                 Medians of {BATCHED_ROUNDS} rounds; this browser's clock ticks in {} steps, so each \
                 timing repeats its pass until it spans {SAMPLE_TICKS} ticks.",
                b.backend.label(),
                match b.config.num_heads {
                    1 => format!("its single head of d_k = {}", b.config.d_k()),
                    h => format!("all {h} heads of d_k = {} batched", b.config.d_k()),
                },
                show_ms(b.all_heads_ms, b.step_ms),
                b.config.d_model,
                show_ms(b.one_head_ms, b.step_ms),
                b.ratio(),
                show_ms(clock_step_ms(), clock_step_ms()),
            ),
            Err(e) => format!("Not measured: {e}."),
        })
    };
    let pruning_text = move || state.importance.with(|imp| imp.as_ref()?.claim_sentence());
    let now = move || state.drift.with(|d| d.as_ref().map(|d| (d.pruned(), d.drift.overall.rel_l2)));
    view! {
        <section class="panel claims" aria-labelledby="claims-title" data-testid="claims">
            <h2 id="claims-title">"Claim 2: all heads batched cost about one head"</h2>
            <p>
                "The heads are not run one after another: Q, K and V for every head come out of one matrix product, and each head's attention is a slice of one batched product. So H heads of width d_model / H cost about what one head of width d_model costs."
            </p>
            <button
                data-testid="measure-batched"
                disabled=move || measuring.get() || state.run().is_none()
                on:click=measure
            >
                {move || if measuring.get() { "Measuring…" } else { "Time it on this backend" }}
            </button>
            <p class="measured" data-testid="batched-result" aria-live="polite">{batched_text}</p>
            <h2>"Claim 3: many heads can be pruned with little drift"</h2>
            <p data-testid="pruning-claim">{pruning_text}</p>
            <p class="muted">
                {move || now().map(|(k, d)| format!("Now: {} pruned, output moved by {d:.3}. ", heads_count(k))).unwrap_or_default()}
                "These weights are random, like an untrained layer: its heads are nearly interchangeable, so no head is much more important than another. In trained models (Michel et al. 2019) 20 to 40 % of heads could be removed with no noticeable loss."
            </p>
        </section>
    }
}
