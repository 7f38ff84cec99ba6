//! The attention-flow figure, shared by the synthetic layer's panel and the trained model's:
//! the picture ([`crate::viz::flow_picture`]) drawn as SVG elements, its text alternative, the sentence
//! on what pruning changed, and its SVG download.

use leptos::prelude::*;

use crate::ui::browser::{scrolled, Axis};
use crate::ui::files;
use crate::viz::flow_picture::{flow_svg, FlowLayout, Picture};
use crate::viz::in_view::ScrollView;

/// What the picture's scroll box is taken to show before the reader scrolls it: the page's
/// widest (the body's `max-width` in www/style.css), so every column in view is built.
const WIDEST_PX: f64 = 1400.0;

/// The figure for `picture` (none while the pass is computed); `file` names the download.
#[component]
pub fn FlowFigure(picture: Signal<Option<Picture>>, file: &'static str) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    // Only the columns in and near the view are built (a picture of 512 tokens is 24 000 px
    // wide); the range changes, and the drawing with it, only when a scroll leaves them.
    let view = RwSignal::new(ScrollView::at_start(WIDEST_PX));
    let columns =
        Memo::new(move |_| picture.with(|p| p.as_ref().map_or(0..0, |p| p.layout.columns_in(view.get()))));
    let download = move |_| {
        let saved = match picture.get_untracked() {
            Some(p) => files::svg(file, &flow_svg(&p.layout, "#1d1d1f")),
            None => Err("the flow is still being computed".to_string()),
        };
        error.set(saved.err());
    };
    view! {
        <div
            class="flow-scroll"
            tabindex="0"
            role="img"
            data-testid="flow-picture"
            aria-label=move || picture.with(|p| p.as_ref().map(|p| p.description.clone()))
            on:scroll=move |ev| view.set(scrolled(&ev, Axis::Across).1)
        >
            {move || picture.with(|p| p.as_ref().map(|p| drawing(&p.layout, columns.get())))}
        </div>
        <p data-testid="flow-change" aria-live="polite">{move || picture.with(|p| p.as_ref().map(|p| p.sentence.clone()))}</p>
        <div class="buttons">
            <button data-testid="flow-svg" disabled=move || picture.with(Option::is_none) on:click=download>
                "Flow (SVG)"
            </button>
        </div>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// The layout as SVG elements, its names in the page's text colour: the rows' labels, and the
/// cells and tokens of `columns`, at their places in the whole picture.
fn drawing(layout: &FlowLayout, columns: std::ops::Range<usize>) -> impl IntoView {
    let (w, h) = (layout.width, layout.height);
    let text = |x: usize, y: usize, content: String| {
        view! { <text x=x y=y text-anchor="end" fill="currentColor">{content}</text> }
    };
    let rows: Vec<_> = layout.rows.iter().map(|r| text(r.x, r.y, r.text.clone())).collect();
    let cells: Vec<_> = layout
        .cells_in(columns.clone())
        .map(|c| {
            view! {
                <g>
                    <rect x=c.x y=c.y width=c.width height=c.height fill=c.fill.clone()></rect>
                    <text x=c.label.x y=c.label.y text-anchor="middle" fill=c.ink>{c.label.text.clone()}</text>
                    <title>{c.tip.clone()}</title>
                </g>
            }
        })
        .collect();
    let tokens: Vec<_> = layout
        .tokens
        .get(columns)
        .unwrap_or_default()
        .iter()
        .map(|t| {
            view! {
                <text
                    x=t.x
                    y=t.y
                    transform=format!("rotate(-35 {} {})", t.x, t.y)
                    text-anchor="end"
                    dominant-baseline="hanging"
                    fill="currentColor"
                >
                    {t.text.clone()}
                </text>
            }
        })
        .collect();
    view! {
        <svg
            xmlns="http://www.w3.org/2000/svg"
            width=w
            height=h
            viewBox=format!("0 0 {w} {h}")
            font-family="system-ui, sans-serif"
            font-size="11"
        >
            <title>{layout.title.clone()}</title>
            {rows}
            {cells}
            {tokens}
        </svg>
    }
}
