//! One heatmap per head with its prune toggle, importance and summary; any head enlarged with
//! token labels, a colour legend and a hover readout.

use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;
use web_sys::MouseEvent;

use crate::attention::summary::describe;
use crate::backend::Run;
use crate::export::attention_csv;
use crate::ui::browser::after_next_paint;
use crate::ui::canvas::{draw_heatmap_within, draw_soon};
use crate::ui::files;
use crate::ui::keyboard::arrow_focus;
use crate::ui::state::AppState;
use crate::viz::colormap::viridis_css_gradient;
use crate::viz::heatmap::Scale;
use crate::viz::svg;

/// All heads of the current run, in a grid, and the enlarged head if one is open.
#[component]
pub fn HeadGrid() -> impl IntoView {
    let state = AppState::get();
    let num_heads = move || state.run().map_or(0, |r| r.config.num_heads);
    let listed = cards_in_turns(num_heads);
    let selected = RwSignal::new(None::<usize>);
    let export_error = RwSignal::new(None::<String>);
    let export_csv = move |_| {
        let result = state.run().ok_or("nothing computed yet".to_string()).and_then(|r| {
            let csv = attention_csv(&r.words, r.config.num_heads, &r.forward.attention)
                .map_err(|e| e.to_string())?;
            files::csv(&format!("{}-attention.csv", files::stem(&state.settings.read_untracked())), &csv)
        });
        export_error.set(result.err());
    };
    view! {
        <section class="panel heads-panel" aria-labelledby="heads-title">
            <h2 id="heads-title">"Attention weights, one heatmap per head"</h2>
            <p class="legend">
                "Row = query token, column = key token. Colour runs from 0 "
                <span class="legend-bar" style=format!("background: {}", viridis_css_gradient())></span>
                " to each head's largest weight. Select a heatmap to enlarge it; switch a head off to prune it. Arrow keys move between heads."
            </p>
            <div class="buttons">
                <button data-testid="export-attention-csv" on:click=export_csv>
                    "Attention weights (CSV)"
                </button>
            </div>
            {move || export_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {move || {
                selected
                    .get()
                    .filter(|&h| h < num_heads())
                    .map(|h| view! { <HeadDetail h=h on_close=move || selected.set(None) /> })
            }}
            <div class="heads" data-testid="heads" on:keydown=move |ev| arrow_focus(&ev)>
                <For each=move || 0..listed.get() key=|h| *h let:h>
                    <HeadCard h=h selected=selected gone=Signal::derive(move || h >= num_heads()) />
                </For>
            </div>
        </section>
    }
}

/// Cards made or removed per frame: 256 heads' cards made, or removed, and laid out at once
/// held the page's thread for a third of a second (BENCHMARKS.md section 20).
const CARDS_PER_TURN: usize = 32;

/// How many cards to list for `total()` heads: it moves toward the total by [`CARDS_PER_TURN`]
/// a frame, up or down (a card past the total is listed but hidden until it goes).
fn cards_in_turns(total: impl Fn() -> usize + 'static) -> RwSignal<usize> {
    let listed = RwSignal::new(untrack(&total).min(CARDS_PER_TURN));
    Effect::new(move |_| {
        let total = total();
        if listed.get() != total {
            spawn_local(async move {
                after_next_paint().await;
                // Ends quietly when the grid has left the page meanwhile.
                listed.try_update(|at| {
                    *at = match *at < total {
                        true => (*at + CARDS_PER_TURN).min(total),
                        false => at.saturating_sub(CARDS_PER_TURN).max(total),
                    }
                });
            });
        }
    });
    listed
}

/// The run, when it has head `h`.
fn run_with_head(state: AppState, h: usize) -> Option<std::rc::Rc<Run>> {
    state.run().filter(|r| h < r.config.num_heads)
}

/// Widest heatmap in the grid, pixels: a longer sequence is shown by each block's largest
/// weight (the enlarged head keeps one pixel per weight).
const CARD_PX: usize = 256;

/// Pushes head `h`'s attention matrix into `canvas` (at most `px` wide, [`draw_heatmap_within`])
/// and its pattern in words into `summary` whenever the run changes: soon after, not in the
/// Effect, so that many heads' drawings share the browser's turns ([`draw_soon`]).
fn draw_head_on_change(
    canvas: NodeRef<html::Canvas>,
    h: usize,
    px: usize,
    error: RwSignal<Option<String>>,
    summary: RwSignal<Option<String>>,
) {
    let state = AppState::get();
    Effect::new(move |_| {
        let Some(canvas) = canvas.get() else { return };
        let Some(r) = run_with_head(state, h) else { return };
        draw_soon(move || {
            let result = draw_heatmap_within(&canvas, r.forward.attention_of(h), r.config.seq_len, px);
            error.try_set(result.err().map(|e| format!("could not draw: {e:?}")));
            summary.try_set(Some(summary_line(&r, h)));
        });
    });
}

/// Head `h`'s pattern in words: its heatmap's text alternative.
fn summary_line(r: &Run, h: usize) -> String {
    describe(r.forward.attention_of(h), &r.words)
}

/// Head `h`: its heatmap (select to enlarge), prune toggle, importance and summary.
#[component]
fn HeadCard(h: usize, selected: RwSignal<Option<usize>>, gone: Signal<bool>) -> impl IntoView {
    let state = AppState::get();
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    let summary = RwSignal::new(None::<String>);
    draw_head_on_change(canvas, h, CARD_PX, draw_error, summary);
    let active = move || state.heads.read().is_active(h);
    let toggle = move |_| state.heads.update(|s| s.toggle(h));
    // Importance as drift when this head alone is removed, and its rank (1 = most important).
    let importance_of = move || {
        state.importance.with(|i| {
            let r = &i.as_ref()?.ranking;
            Some((*r.per_head.get(h)?, r.rank(h)?, r.share(h)))
        })
    };
    let summary = move || summary.get();
    view! {
        <figure class="head" class:pruned=move || !active() hidden=gone data-testid=format!("head-{h}")>
            <button
                class="heatmap-button"
                data-nav="enlarge"
                aria-label=format!("Enlarge head {h}")
                on:click=move |_| selected.set(Some(h))
            >
                <canvas
                    node_ref=canvas
                    class="heatmap"
                    data-testid=format!("heatmap-{h}")
                    role="img"
                    aria-label=move || format!("Attention weights of head {h}: {}", summary().unwrap_or_default())
                ></canvas>
            </button>
            <figcaption>
                <span>{format!("head {h}")}</span>
                <button
                    class="toggle"
                    data-nav="toggle"
                    data-testid=format!("head-toggle-{h}")
                    aria-pressed=move || active().to_string()
                    title=move || if active() { "Prune this head" } else { "Restore this head" }
                    on:click=toggle
                >
                    {move || if active() { "on" } else { "pruned" }}
                </button>
            </figcaption>
            <div
                class="importance"
                data-testid=format!("importance-{h}")
                title="Relative L2 change of the output if this head alone is removed"
            >
                {move || {
                    importance_of()
                        .map(|(value, rank, share)| {
                            view! {
                                <span class="bar-track">
                                    <span class="bar" style=format!("width: {:.0}%", 100.0 * share)></span>
                                </span>
                                <span class="num">{format!("{value:.3} · #{rank}")}</span>
                            }
                        })
                }}
            </div>
            <p class="head-summary" data-testid=format!("summary-{h}")>{summary}</p>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}

/// Head `h` enlarged, with token labels on both axes, a legend and a hover readout.
#[component]
fn HeadDetail(h: usize, on_close: impl Fn() + 'static) -> impl IntoView {
    let state = AppState::get();
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    let export_png = move |_| {
        let Some(canvas) = canvas.get_untracked() else { return };
        let name = format!("{}-head-{h}.png", files::stem(&state.settings.read_untracked()));
        draw_error.set(files::png(&canvas, &name, 512).err());
    };
    let export_svg = move |_| {
        let Some(r) = run_with_head(state, h) else { return };
        let name = format!("{}-head-{h}.svg", files::stem(&state.settings.read_untracked()));
        let text = svg::heatmap(r.forward.attention_of(h), r.config.seq_len, &r.words, &format!("head {h}"));
        draw_error.set(files::svg(&name, &text).err());
    };
    let summary = RwSignal::new(None::<String>);
    draw_head_on_change(canvas, h, usize::MAX, draw_error, summary);
    let hover = RwSignal::new(None::<String>);
    let words = move || state.run().map(|r| r.words.clone()).unwrap_or_default();
    let on_move = move |ev: MouseEvent| {
        let Some(canvas) = canvas.get() else { return };
        let rect = canvas.get_bounding_client_rect();
        {
            let Some(r) = run_with_head(state, h) else { return };
            let n = r.config.seq_len;
            let cell = |offset: f64, size: f64| ((offset / size.max(1.0)) * n as f64).floor() as isize;
            let (q, k) = (
                cell(ev.client_y() as f64 - rect.top(), rect.height()),
                cell(ev.client_x() as f64 - rect.left(), rect.width()),
            );
            if (0..n as isize).contains(&q) && (0..n as isize).contains(&k) {
                let (q, k) = (q as usize, k as usize);
                let w = r.forward.attention_of(h)[q * n + k];
                hover.set(Some(format!(
                    "query t{q} \"{}\" → key t{k} \"{}\": weight {w:.4}",
                    r.words[q], r.words[k]
                )));
            }
        }
    };
    let max = move || run_with_head(state, h).map_or(0.0, |r| Scale::fit(r.forward.attention_of(h)).max);
    let summary = move || summary.get();
    let show_labels = move || words().len() <= 48;
    // The same token labels along the top (keys) and down the side (queries).
    let labels =
        move || show_labels().then(|| words().into_iter().map(|w| view! { <li>{w}</li> }).collect_view());
    view! {
        <div class="head-detail" data-testid="head-detail" role="group" aria-label=format!("Head {h}, enlarged")>
            <div class="detail-header">
                <h3>{format!("Head {h}")}</h3>
                <button data-testid="export-head-png" on:click=export_png>
                    "PNG"
                </button>
                <button data-testid="export-head-svg" on:click=export_svg>
                    "SVG"
                </button>
                <button class="reset" data-testid="close-detail" on:click=move |_| on_close()>
                    "Close"
                </button>
            </div>
            <p class="head-summary">{summary}</p>
            <div class="detail-grid" class:labels=show_labels>
                <span></span>
                <ol class="key-labels" aria-hidden="true">
                    {labels}
                </ol>
                <ol class="query-labels" aria-hidden="true">
                    {labels}
                </ol>
                <canvas
                    node_ref=canvas
                    class="heatmap big"
                    data-testid="detail-heatmap"
                    role="img"
                    aria-label=move || format!("Attention weights of head {h}, enlarged: {}", summary().unwrap_or_default())
                    on:mousemove=on_move
                ></canvas>
            </div>
            <p class="legend">
                "0 "
                <span class="legend-bar wide" style=format!("background: {}", viridis_css_gradient())></span>
                {move || format!(" {:.4} (this head's largest weight)", max())}
            </p>
            <p class="tooltip" data-testid="detail-hover" aria-live="polite">
                {move || hover.get().unwrap_or_else(|| "Hover a cell: query row, key column, weight.".into())}
            </p>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </div>
    }
}
