//! One heatmap per head with its prune toggle, importance and summary; any head enlarged with
//! token labels, a colour legend and a hover readout.

use std::collections::BTreeSet;

use leptos::html;
use leptos::prelude::*;
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData, MouseEvent};

use super::app::{finished, Importance, Run, RunResource};
use super::{arrow_focus, download};
use crate::attention::summary::summarize;
use crate::export::attention_csv;
use crate::settings::Settings;
use crate::viz::colormap::viridis_css_gradient;
use crate::viz::heatmap::{rasterize, Scale};

/// All heads of the current run, in a grid, and the enlarged head if one is open.
#[component]
pub fn HeadGrid(
    run: RunResource,
    pruned: RwSignal<BTreeSet<usize>>,
    importance: Memo<Option<Importance>>,
    settings: RwSignal<Settings>,
) -> impl IntoView {
    let num_heads = move || run.with(|r| finished(r).map_or(0, |r| r.config.num_heads));
    let selected = RwSignal::new(None::<usize>);
    let export_error = RwSignal::new(None::<String>);
    let export_csv = move |_| {
        let result = run.with(|r| {
            let r = finished(r).ok_or("nothing computed yet")?;
            let csv = attention_csv(&r.words, r.config.num_heads, &r.forward.attention)
                .map_err(|e| e.to_string())?;
            download::csv(&format!("{}-attention.csv", download::stem(&settings.read_untracked())), &csv)
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
                    .map(|h| view! { <HeadDetail h=h run=run settings=settings on_close=move || selected.set(None) /> })
            }}
            <div class="heads" data-testid="heads" on:keydown=move |ev| arrow_focus(&ev)>
                <For each=move || 0..num_heads() key=|h| *h let:h>
                    <HeadCard h=h run=run pruned=pruned importance=importance selected=selected />
                </For>
            </div>
        </section>
    }
}

/// Draws an `n x n` attention matrix into `canvas`, one pixel per weight.
pub(super) fn draw_heatmap(
    canvas: &HtmlCanvasElement,
    weights: &[f32],
    n: usize,
) -> Result<(), wasm_bindgen::JsValue> {
    canvas.set_width(n as u32);
    canvas.set_height(n as u32);
    let ctx: CanvasRenderingContext2d =
        canvas.get_context("2d")?.ok_or("no 2d context")?.dyn_into().map_err(|_| "not a 2d context")?;
    let pixels = rasterize(weights, n, Scale::fit(weights));
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&pixels), n as u32, n as u32)?;
    ctx.put_image_data(&image, 0.0, 0.0)
}

/// Pushes head `h`'s attention matrix into `canvas` whenever the run changes.
fn draw_head_on_change(
    canvas: NodeRef<html::Canvas>,
    run: RunResource,
    h: usize,
    error: RwSignal<Option<String>>,
) {
    Effect::new(move |_| {
        let Some(canvas) = canvas.get() else { return };
        run.with(|r| {
            if let Some(r) = finished(r).filter(|r| h < r.config.num_heads) {
                let result = draw_heatmap(&canvas, r.forward.attention_of(h), r.config.seq_len);
                error.set(result.err().map(|e| format!("could not draw: {e:?}")));
            }
        });
    });
}

/// A head's pattern in words ("entropy 3.2 of 4.0 bits · most weight on 'cat' (t7, 21 %) ·
/// self 9 %"): the heatmap's text alternative. `words` has one entry per token.
pub(super) fn describe_head<S: AsRef<str>>(weights: &[f32], words: &[S]) -> String {
    let n = words.len();
    if n == 0 || weights.len() != n * n {
        return "no pattern to describe".to_string();
    }
    let s = summarize(weights, n);
    format!(
        "entropy {:.1} of {:.1} bits · most weight on \"{}\" (t{}, {:.0} %) · self {:.0} %",
        s.entropy_bits,
        s.max_entropy_bits,
        words[s.top_key].as_ref(),
        s.top_key,
        100.0 * s.top_key_weight,
        100.0 * s.self_weight
    )
}

fn summary_line(r: &Run, h: usize) -> String {
    describe_head(r.forward.attention_of(h), &r.words)
}

#[component]
fn HeadCard(
    h: usize,
    run: RunResource,
    pruned: RwSignal<BTreeSet<usize>>,
    importance: Memo<Option<Importance>>,
    selected: RwSignal<Option<usize>>,
) -> impl IntoView {
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    draw_head_on_change(canvas, run, h, draw_error);
    let active = move || !pruned.read().contains(&h);
    let toggle = move |_| {
        pruned.update(|p| {
            if !p.remove(&h) {
                p.insert(h);
            }
        })
    };
    // Importance as drift when this head alone is removed, and its rank (1 = most important).
    let importance_of = move || {
        importance.with(|i| {
            let i = i.as_ref()?;
            let value = *i.per_head.get(h)?;
            let rank = i.per_head.len() - i.ranked.iter().position(|&x| x == h)?;
            let max = i.per_head.iter().copied().fold(0.0f64, f64::max).max(f64::MIN_POSITIVE);
            Some((value, rank, value / max))
        })
    };
    let summary =
        move || run.with(|r| finished(r).filter(|r| h < r.config.num_heads).map(|r| summary_line(r, h)));
    view! {
        <figure class="head" class:pruned=move || !active() data-testid=format!("head-{h}")>
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
fn HeadDetail(
    h: usize,
    run: RunResource,
    settings: RwSignal<Settings>,
    on_close: impl Fn() + 'static,
) -> impl IntoView {
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    let export_png = move |_| {
        let Some(canvas) = canvas.get_untracked() else { return };
        let name = format!("{}-head-{h}.png", download::stem(&settings.read_untracked()));
        draw_error.set(download::png(&canvas, &name, 512).err());
    };
    draw_head_on_change(canvas, run, h, draw_error);
    let hover = RwSignal::new(None::<String>);
    let words = move || run.with(|r| finished(r).map(|r| r.words.clone()).unwrap_or_default());
    let on_move = move |ev: MouseEvent| {
        let Some(canvas) = canvas.get() else { return };
        let rect = canvas.get_bounding_client_rect();
        run.with(|r| {
            let Some(r) = finished(r).filter(|r| h < r.config.num_heads) else { return };
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
        });
    };
    let max = move || run.with(|r| finished(r).map_or(0.0, |r| Scale::fit(r.forward.attention_of(h)).max));
    let summary =
        move || run.with(|r| finished(r).filter(|r| h < r.config.num_heads).map(|r| summary_line(r, h)));
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
