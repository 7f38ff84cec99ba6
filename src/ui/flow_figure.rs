//! The attention-flow figure, shared by the synthetic layer's panel and the trained model's:
//! the picture ([`crate::viz::flow_picture`]) drawn as SVG elements, its text alternative, the sentence
//! on what pruning changed, and its SVG download.

use leptos::prelude::*;

use crate::ui::files;
use crate::viz::flow_picture::{flow_svg, FlowLayout, Picture};

/// The figure for `picture` (none while the pass is computed); `file` names the download.
#[component]
pub fn FlowFigure(picture: Signal<Option<Picture>>, file: &'static str) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
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
        >
            {move || picture.with(|p| p.as_ref().map(|p| drawing(&p.layout)))}
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

/// The layout as SVG elements, its names in the page's text colour.
fn drawing(layout: &FlowLayout) -> impl IntoView {
    let (w, h) = (layout.width, layout.height);
    let text = |x: usize, y: usize, content: String| {
        view! { <text x=x y=y text-anchor="end" fill="currentColor">{content}</text> }
    };
    let rows: Vec<_> = layout.rows.iter().map(|r| text(r.x, r.y, r.text.clone())).collect();
    let cells: Vec<_> = layout
        .cells
        .iter()
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
