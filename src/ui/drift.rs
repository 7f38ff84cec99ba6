//! How far pruning moved the output: numbers, per-token bars, the prune-k controls and the
//! drift-against-k curve. Every number updates on a toggle without recomputing attention.

use std::collections::BTreeSet;

use leptos::prelude::*;

use super::app::{finished, DriftView, Importance, RunResource};
use super::charts::DriftChart;
use super::download;
use crate::attention::importance::random_order;
use crate::export::{drift_curve_csv, importance_csv, token_drift_csv};
use crate::settings::Settings;

/// Drift numbers, pruning controls and curves.
#[component]
pub fn DriftPanel(
    run: RunResource,
    drift: Memo<Option<DriftView>>,
    pruned: RwSignal<BTreeSet<usize>>,
    importance: Memo<Option<Importance>>,
    settings: RwSignal<Settings>,
) -> impl IntoView {
    let field = move |f: fn(&DriftView) -> String| {
        move || drift.with(|d| d.as_ref().map(f).unwrap_or_else(|| "–".into()))
    };
    let num_heads = move || run.with(|r| finished(r).map_or(0, |r| r.config.num_heads));
    // Position of the "prune the k least important" slider; moving it replaces the pruned set.
    let k = RwSignal::new(0usize);
    let random_draws = RwSignal::new(0u32);
    let prune_least = move |count: usize| {
        k.set(count);
        if let Some(order) = importance.with(|i| i.as_ref().map(|i| i.ranked.clone())) {
            pruned.set(order.into_iter().take(count).collect());
        }
    };
    let prune_random = move |_| {
        let heads = num_heads();
        let seed = run.with(|r| finished(r).map_or(0, |r| r.seed));
        random_draws.update(|d| *d += 1);
        let order = random_order(heads, seed.wrapping_add(1000).wrapping_add(random_draws.get_untracked()));
        pruned.set(order.into_iter().take(k.get_untracked()).collect());
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
                        <li title=format!(
                            "token {t} \"{word}\": relative L2 {:.4}, cosine {:.6}",
                            td.rel_l2,
                            td.cosine,
                        )>
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
    // Three tables: each head's importance, the drift curve, and the drift of each token now.
    let export_error = RwSignal::new(None::<String>);
    let export = move |table: &'static str| {
        let name = format!("{}-{table}.csv", download::stem(&settings.read_untracked()));
        let text = match table {
            "importance" => importance.with_untracked(|i| {
                i.as_ref().map(|i| importance_csv(&i.per_head, &i.ranked, &pruned.read_untracked()))
            }),
            "drift-curve" => importance
                .with_untracked(|i| i.as_ref().map(|i| drift_curve_csv(&i.ranked_curve, &i.random_curve))),
            _ => run.with_untracked(|r| {
                let words = finished(r)?.words.clone();
                drift.with_untracked(|d| d.as_ref().map(|d| token_drift_csv(&words, &d.drift)))
            }),
        };
        export_error.set(match text {
            Some(text) => download::csv(&name, &text).err(),
            None => Some("nothing computed yet".into()),
        });
    };
    let ranked = Signal::derive(move || {
        importance.with(|i| i.as_ref().map(|i| i.ranked_curve.clone()).unwrap_or_default())
    });
    let random = Signal::derive(move || {
        importance.with(|i| i.as_ref().map(|i| i.random_curve.clone()).unwrap_or_default())
    });
    let current = Signal::derive(move || {
        drift.with(|d| d.as_ref().map(|d| (d.total - d.active, d.drift.overall.rel_l2)))
    });
    view! {
        <section class="panel drift-panel" aria-labelledby="drift-title" data-testid="drift">
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
                {field(|d| {
                    // The browser's clock ticks in 0.1 ms steps; say so rather than print 0.00.
                    let took = if d.elapsed_ms < 0.1 { "under 0.1 ms".to_string() } else { format!("{:.1} ms", d.elapsed_ms) };
                    format!("Recomposed from cached per-head outputs in {took}: no projection or attention was recomputed.")
                })}
            </p>
            <label class="prune-k">
                {move || format!("Prune the {} least important heads ", k.get())}
                <input
                    type="range"
                    min="0"
                    max=move || num_heads().to_string()
                    data-testid="prune-k"
                    prop:value=move || k.get().to_string()
                    on:input=move |ev| prune_least(event_target_value(&ev).parse().unwrap_or(0))
                />
            </label>
            <div class="buttons">
                <button data-testid="prune-random" on:click=prune_random disabled=move || k.get() == 0>
                    {move || format!("Prune {} at random instead", k.get())}
                </button>
                <button
                    class="reset"
                    data-testid="restore-all"
                    disabled=move || pruned.read().is_empty()
                    on:click=move |_| {
                        k.set(0);
                        pruned.update(|p| p.clear());
                    }
                >
                    "Restore all heads"
                </button>
            </div>
            <h3>"Drift as heads are pruned"</h3>
            <DriftChart ranked=ranked random=random current=current settings=settings />
            <div class="buttons">
                <span class="muted">"Download:"</span>
                <button data-testid="export-importance-csv" on:click=move |_| export("importance")>
                    "Head importance (CSV)"
                </button>
                <button data-testid="export-drift-csv" on:click=move |_| export("drift-curve")>
                    "Drift curve (CSV)"
                </button>
                <button data-testid="export-token-drift-csv" on:click=move |_| export("token-drift")>
                    "Token drift (CSV)"
                </button>
            </div>
            {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <h3>"Relative L2 change per token"</h3>
            <ol class="token-drift" data-testid="token-drift">
                {tokens}
            </ol>
        </section>
    }
}
