//! How far pruning moved the output, per token and overall.

use std::collections::BTreeSet;

use leptos::prelude::*;

use super::app::{finished, DriftView, RunResource};

/// Drift numbers and per-token bars; updated on every toggle without recomputing attention.
#[component]
pub fn DriftPanel(
    run: RunResource,
    drift: Memo<Option<DriftView>>,
    pruned: RwSignal<BTreeSet<usize>>,
) -> impl IntoView {
    let field = move |f: fn(&DriftView) -> String| {
        move || drift.with(|d| d.as_ref().map(f).unwrap_or_else(|| "–".into()))
    };
    let tokens = move || {
        let words = run.with(|r| finished(r).map(|r| r.words.clone()).unwrap_or_default());
        drift.with(|d| {
            let Some(d) = d else { return Vec::new() };
            words
                .into_iter()
                .zip(&d.drift.per_token)
                .enumerate()
                .map(|(t, (word, td))| {
                    let pct = (td.rel_l2 * 100.0).min(100.0);
                    view! {
                        <li title=format!("token {t} \"{word}\": relative L2 {:.4}, cosine {:.6}", td.rel_l2, td.cosine)>
                            <span class="word">{word}</span>
                            <span class="bar-track">
                                <span class="bar" style=format!("width: {pct:.1}%")></span>
                            </span>
                            <span class="num">{format!("{:.3}", td.rel_l2)}</span>
                        </li>
                    }
                })
                .collect::<Vec<_>>()
        })
    };
    view! {
        <section class="drift-panel" aria-labelledby="drift-title" data-testid="drift">
            <h2 id="drift-title">"Output drift from pruning"</h2>
            <dl class="drift-numbers">
                <dt>"Active heads"</dt>
                <dd data-testid="drift-active">{field(|d| format!("{} of {}", d.active, d.total))}</dd>
                <dt>"Cosine, pruned vs full output"</dt>
                <dd data-testid="drift-cosine">{field(|d| format!("{:.6}", d.drift.overall.cosine))}</dd>
                <dt>"Relative L2 change"</dt>
                <dd data-testid="drift-rel-l2">{field(|d| format!("{:.4}", d.drift.overall.rel_l2))}</dd>
            </dl>
            <p class="muted" data-testid="drift-cost">
                {field(|d| format!(
                    "Recomposed from cached per-head outputs in {:.2} ms: no projection or attention was recomputed.",
                    d.elapsed_ms
                ))}
            </p>
            <button
                class="reset"
                data-testid="restore-all"
                disabled=move || pruned.read().is_empty()
                on:click=move |_| pruned.update(|p| p.clear())
            >
                "Restore all heads"
            </button>
            <h3>"Relative L2 change per token"</h3>
            <ol class="token-drift" data-testid="token-drift">
                {tokens}
            </ol>
        </section>
    }
}
