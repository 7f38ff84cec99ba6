//! The heatmaps of one layer of the trained model, as the (possibly pruned) model attends.

use leptos::html;
use leptos::prelude::*;

use super::view::EncoderView;
use crate::attention::summary::describe;
use crate::ui::canvas::{draw_heatmap, draw_soon};
use crate::ui::files;
use crate::viz::colormap::viridis_css_gradient;
use crate::viz::svg;

/// The layer picker, a legend, and the layer's heatmaps.
#[component]
pub fn LayerHeads() -> impl IntoView {
    let view = EncoderView::get();
    let layer = view.choices.layer;
    let last = move || view.spec().layers - 1;
    view! {
        <label>
            "Layer "
            <select
                data-testid="layer"
                prop:value=move || layer.get().to_string()
                on:change=move |ev| layer.set(event_target_value(&ev).parse().unwrap_or(0).min(last()))
            >
                {move || {
                    (0..view.spec().layers)
                        .map(|l| view! { <option value=l.to_string()>{format!("{}", l + 1)}</option> })
                        .collect_view()
                }}
            </select>
        </label>
        <p class="legend">
            "Rows are query tokens, columns key tokens; 0 "
            <span class="legend-bar" style=format!("background: {}", viridis_css_gradient())></span>
            " each head's largest weight. Pruned heads leave later layers' patterns changed."
        </p>
        <div class="heads trained-heads" data-testid="trained-heads">
            {move || (0..view.spec().heads).map(|h| view! { <LayerHead h=h /> }).collect_view()}
        </div>
    }
}

/// Head `h` of the selected layer.
#[component]
fn LayerHead(h: usize) -> impl IntoView {
    let (view, app) = (EncoderView::get(), crate::ui::state::AppState::get());
    let layer = move || view.choices.layer.get().min(view.spec().layers - 1);
    // Head h's n x n weights in the selected layer of the current pass.
    let weights = move || {
        let pass = view.pass_now()?;
        let n = pass.out.seq_len;
        Some((pass.out.attention[layer()][h * n * n..(h + 1) * n * n].to_vec(), n))
    };
    let canvas = NodeRef::<html::Canvas>::new();
    let draw_error = RwSignal::new(None::<String>);
    // Drawn soon after, not in the Effect: the layer's heads share the browser's turns.
    Effect::new(move |_| {
        let (Some(canvas), Some((w, n))) = (canvas.get(), weights()) else { return };
        draw_soon(move || {
            draw_error.try_set(draw_heatmap(&canvas, &w, n).err().map(|e| format!("could not draw: {e:?}")));
        });
    });
    // The same pattern in words, for screen readers.
    let described = move || {
        let (w, n) = weights()?;
        let pieces: Vec<String> = view.tokens.with(|t| t.iter().map(|t| t.piece.clone()).collect());
        (pieces.len() == n).then(|| describe(&w, &pieces))
    };
    let export_png = move |_| {
        let Some(canvas) = canvas.get_untracked() else { return };
        let stem = files::stem(&app.settings.get_untracked());
        let name = format!("{stem}-layer{}-head{h}.png", untrack(layer) + 1);
        draw_error.set(files::png(&canvas, &name, 512).err());
    };
    let export_svg = move |_| {
        let Some((w, n)) = weights() else { return };
        let layer = untrack(layer) + 1;
        let pieces: Vec<String> = view.tokens.with_untracked(|t| t.iter().map(|t| t.piece.clone()).collect());
        let text =
            svg::heatmap(&w, n, &pieces, &format!("{}, layer {layer}, head {h}", untrack(|| view.name())));
        let stem = files::stem(&app.settings.get_untracked());
        draw_error.set(files::svg(&format!("{stem}-layer{layer}-head{h}.svg"), &text).err());
    };
    view! {
        <figure class="head">
            <canvas
                node_ref=canvas
                class="heatmap"
                data-testid=format!("trained-heatmap-{h}")
                role="img"
                aria-label=move || format!("Attention weights of head {h} in layer {}: {}", layer() + 1, described().unwrap_or_default())
            ></canvas>
            <figcaption>
                <span>{format!("head {h}")}</span>
                <button class="mini" data-testid=format!("trained-png-{h}") aria-label=format!("Download head {h} as PNG") on:click=export_png>
                    "PNG"
                </button>
                <button class="mini" data-testid=format!("trained-svg-{h}") aria-label=format!("Download head {h} as SVG") on:click=export_svg>
                    "SVG"
                </button>
            </figcaption>
            {move || draw_error.get().map(|e| view! { <p class="error">{e}</p> })}
        </figure>
    }
}
