//! One heatmap per head, each with its prune toggle.

use std::collections::BTreeSet;

use leptos::html;
use leptos::prelude::*;
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};

use super::app::{finished, RunResource};
use crate::viz::colormap::viridis_css_gradient;
use crate::viz::heatmap::{rasterize, Scale};

/// All heads of the current run, in a grid.
#[component]
pub fn HeadGrid(run: RunResource, pruned: RwSignal<BTreeSet<usize>>) -> impl IntoView {
    let num_heads = move || run.with(|r| finished(r).map_or(0, |r| r.config.num_heads));
    view! {
        <section class="heads-panel" aria-labelledby="heads-title">
            <h2 id="heads-title">"Attention weights, one heatmap per head"</h2>
            <p class="legend">
                "Row = query token, column = key token. Colour runs from 0 "
                <span class="legend-bar" style=format!("background: {}", viridis_css_gradient())></span>
                " to each head's largest weight. Switch a head off to prune it."
            </p>
            <div class="heads" data-testid="heads">
                <For each=move || 0..num_heads() key=|h| *h let:h>
                    <HeadCard h=h run=run pruned=pruned />
                </For>
            </div>
        </section>
    }
}

fn draw(canvas: &HtmlCanvasElement, weights: &[f32], n: usize) -> Result<(), wasm_bindgen::JsValue> {
    canvas.set_width(n as u32);
    canvas.set_height(n as u32);
    let ctx: CanvasRenderingContext2d =
        canvas.get_context("2d")?.ok_or("no 2d context")?.dyn_into().map_err(|_| "not a 2d context")?;
    let pixels = rasterize(weights, n, Scale::fit(weights));
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&pixels), n as u32, n as u32)?;
    ctx.put_image_data(&image, 0.0, 0.0)
}

#[component]
fn HeadCard(h: usize, run: RunResource, pruned: RwSignal<BTreeSet<usize>>) -> impl IntoView {
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    // Push the head's attention matrix into its canvas whenever the run changes.
    Effect::new(move |_| {
        let Some(canvas) = canvas.get() else { return };
        run.with(|r| {
            if let Some(r) = finished(r) {
                if h < r.config.num_heads {
                    let result = draw(&canvas, r.forward.attention_of(h), r.config.seq_len);
                    draw_error.set(result.err().map(|e| format!("could not draw: {e:?}")));
                }
            }
        });
    });
    let active = move || !pruned.read().contains(&h);
    let toggle = move |_| {
        pruned.update(|p| {
            if !p.remove(&h) {
                p.insert(h);
            }
        })
    };
    view! {
        <figure class="head" class:pruned=move || !active() data-testid=format!("head-{h}")>
            <canvas
                node_ref=canvas
                class="heatmap"
                data-testid=format!("heatmap-{h}")
                role="img"
                aria-label=format!("Attention weights of head {h}")
            ></canvas>
            <figcaption>
                <span>{format!("head {h}")}</span>
                <button
                    class="toggle"
                    data-testid=format!("head-toggle-{h}")
                    aria-pressed=move || active().to_string()
                    title=move || if active() { "Prune this head" } else { "Restore this head" }
                    on:click=toggle
                >
                    {move || if active() { "on" } else { "pruned" }}
                </button>
            </figcaption>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}
