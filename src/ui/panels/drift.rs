//! How far pruning moved the output: numbers, the prune-k controls, the drift-against-k curve,
//! its tables and per-token bars. Every number updates on a toggle without recomputing attention.

use leptos::prelude::*;

use super::charts::DriftChart;
use crate::attention::analysis::DriftView;
use crate::attention::clock::show_ms;
use crate::attention::config::MAX_HEADS;
use crate::attention::importance::random_order;
use crate::attention::HeadSet;
use crate::export::{drift_curve_csv, importance_csv, token_drift_csv};
use crate::ui::browser::{clock_step_ms, scrolled, Axis};
use crate::ui::files;
use crate::ui::state::AppState;
use crate::viz::in_view::ScrollView;

/// The tables the drift panel exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    /// Each head's importance, rank and whether it is pruned.
    Importance,
    /// Drift against heads pruned, least important first and at random.
    DriftCurve,
    /// The drift of each token now.
    TokenDrift,
}

impl Table {
    /// The end of its file name.
    fn name(self) -> &'static str {
        match self {
            Table::Importance => "importance",
            Table::DriftCurve => "drift-curve",
            Table::TokenDrift => "token-drift",
        }
    }

    /// Its CSV text, once there is something to put in it.
    fn csv(self, state: AppState) -> Option<String> {
        match self {
            Table::Importance => {
                let imp = state.importance.get_untracked()?;
                let heads = state.heads.with_untracked(|h| h.resized(imp.ranking.len()));
                Some(importance_csv(&imp.ranking, &heads, "importance_rel_l2"))
            }
            Table::DriftCurve => state
                .importance
                .with_untracked(|i| i.as_ref().map(|i| drift_curve_csv(&i.ranked_curve, &i.random_curve))),
            Table::TokenDrift => {
                let words = state.run()?.words.clone();
                state.drift.with_untracked(|d| d.as_ref().map(|d| token_drift_csv(&words, &d.drift)))
            }
        }
    }
}

/// Drift numbers, pruning controls and curves.
#[component]
pub fn DriftPanel() -> impl IntoView {
    let state = AppState::get();
    let ranked = Signal::derive(move || {
        state.importance.with(|i| i.as_ref().map(|i| i.ranked_curve.clone()).unwrap_or_default())
    });
    let random = Signal::derive(move || {
        state.importance.with(|i| i.as_ref().map(|i| i.random_curve.clone()).unwrap_or_default())
    });
    let current = Signal::derive(move || {
        state.drift.with(|d| d.as_ref().map(|d| (d.pruned(), d.drift.overall.rel_l2)))
    });
    let theme = Signal::derive(move || state.settings.read().theme);
    view! {
        <section class="panel drift-panel" aria-labelledby="drift-title" data-testid="drift">
            <h2 id="drift-title">"Output drift from pruning"</h2>
            <DriftNumbers />
            <PruneControls />
            <h3>"Drift as heads are pruned"</h3>
            <DriftChart ranked=ranked random=random current=current theme=theme />
            <Exports />
            <h3>"Relative L2 change per token"</h3>
            <TokenDrift />
        </section>
    }
}

/// Active heads, cosine and relative L2 of the pruned output, and what computing them cost.
#[component]
fn DriftNumbers() -> impl IntoView {
    let state = AppState::get();
    let field = move |f: fn(&DriftView) -> String| {
        move || state.drift.with(|d| d.as_ref().map(f).unwrap_or_else(|| "–".into()))
    };
    view! {
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
                // Shown no finer than this browser's clock ticks ("under 1 ms" in Firefox).
                let took = show_ms(d.elapsed_ms, clock_step_ms());
                format!("Recomposed from cached per-head outputs in {took}: no projection or attention was recomputed.")
            })}
        </p>
    }
}

/// "Prune the k least important heads", the same number at random, and "restore all".
#[component]
fn PruneControls() -> impl IntoView {
    let state = AppState::get();
    let num_heads = move || state.run().map_or(0, |r| r.config.num_heads);
    // Position of the slider; moving it replaces the pruned set.
    let k = RwSignal::new(0usize);
    let random_draws = RwSignal::new(0u32);
    let prune_least = move |count: usize| {
        k.set(count);
        if let Some(least) = state.importance.with(|i| i.as_ref().map(|i| i.ranking.least(count))) {
            state.heads.set(least.resized(MAX_HEADS));
        }
    };
    let prune_random = move |_| {
        let seed = state.run().map_or(0, |r| r.seed);
        random_draws.update(|d| *d += 1);
        let order =
            random_order(num_heads(), seed.wrapping_add(1000).wrapping_add(random_draws.get_untracked()));
        state.heads.set(HeadSet::with_pruned(MAX_HEADS, order.into_iter().take(k.get_untracked())));
    };
    view! {
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
                disabled=move || !state.heads.read().any_pruned()
                on:click=move |_| {
                    k.set(0);
                    state.heads.update(HeadSet::restore_all);
                }
            >
                "Restore all heads"
            </button>
        </div>
    }
}

/// The three tables as CSV downloads.
#[component]
fn Exports() -> impl IntoView {
    let state = AppState::get();
    let export_error = RwSignal::new(None::<String>);
    let export = move |table: Table| {
        let name = format!("{}-{}.csv", files::stem(&state.settings.read_untracked()), table.name());
        export_error.set(match table.csv(state) {
            Some(text) => files::csv(&name, &text).err(),
            None => Some("nothing computed yet".into()),
        });
    };
    view! {
        <div class="buttons">
            <span class="muted">"Download:"</span>
            <button data-testid="export-importance-csv" on:click=move |_| export(Table::Importance)>
                "Head importance (CSV)"
            </button>
            <button data-testid="export-drift-csv" on:click=move |_| export(Table::DriftCurve)>
                "Drift curve (CSV)"
            </button>
            <button data-testid="export-token-drift-csv" on:click=move |_| export(Table::TokenDrift)>
                "Token drift (CSV)"
            </button>
        </div>
        {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// What the token list's box is taken to show before the reader scrolls it: its `max-height`
/// (28rem in www/style.css) at the default font size.
const LIST_PX: f64 = 448.0;

/// A row's height before one is measured: its CSS height (1.4rem) at the default font size.
const ROW_PX: f64 = 22.4;

/// Each token's drift as a bar. Only the rows in and near the list's view are built
/// ([`crate::viz::in_view`]; they are remade on every toggle); the list's padding stands for
/// the rest.
#[component]
fn TokenDrift() -> impl IntoView {
    let state = AppState::get();
    let view = RwSignal::new(ScrollView::at_start(LIST_PX));
    let row_px = RwSignal::new(ROW_PX);
    let count = move || state.drift.with(|d| d.as_ref().map_or(0, |d| d.drift.per_token.len()));
    let rows = Memo::new(move |_| view.get().items(0.0, row_px.get(), count()));
    let on_scroll = move |ev: leptos::ev::Event| {
        let (el, at) = scrolled(&ev, Axis::Down);
        if let Some(row) = el.query_selector("li").ok().flatten() {
            let height = row.get_bounding_client_rect().height();
            if height > 0.0 && (height - row_px.get_untracked()).abs() > 0.01 {
                row_px.set(height);
            }
        }
        view.set(at);
    };
    let tokens = move || {
        let (run, shown) = (state.run(), rows.get());
        let words = run.as_ref().map_or(&[][..], |r| &r.words[..]);
        state.drift.with(|d| {
            let Some(d) = d else { return Vec::new() };
            let total = d.drift.per_token.len();
            words
                .iter()
                .zip(&d.drift.per_token)
                .enumerate()
                .skip(shown.start)
                .take(shown.len())
                .map(|(t, (&word, td))| {
                    let pct = (td.rel_l2 * 100.0).min(100.0);
                    view! {
                        <li
                            aria-setsize=total
                            aria-posinset=t + 1
                            title=format!("token {t} \"{word}\": relative L2 {:.4}, cosine {:.6}", td.rel_l2, td.cosine)
                        >
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
    let padding = move || {
        let (shown, row) = (rows.get(), row_px.get());
        let after = count().saturating_sub(shown.end);
        format!("padding-top: {:.1}px; padding-bottom: {:.1}px", shown.start as f64 * row, after as f64 * row)
    };
    view! {
        <div class="token-drift" data-testid="token-drift" on:scroll=on_scroll>
            <ol style=padding>{tokens}</ol>
        </div>
    }
}
